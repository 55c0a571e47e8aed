"""The keyword side of a large hybrid search runs on an idle helper thread, beside the dense side."""

from __future__ import annotations

import os
import threading

import pytest

from retriever import Collection
from retriever.search import searcher as searcher_module
from retriever.search.sides import SideThreads


def where_it_ran(started: threading.Event | None = None, release: threading.Event | None = None):
    """A call that returns the name of the thread it ran on, after ``release`` is set (when given)."""

    def call(tag: str) -> tuple[str, str]:
        if started is not None:
            started.set()
        if release is not None:
            assert release.wait(10)
        return tag, threading.current_thread().name

    return call


def test_without_helpers_the_caller_runs_the_call_when_it_asks_for_the_result():
    ran = []
    result = SideThreads(helpers=0).start(lambda: ran.append(threading.current_thread().name) or 7)
    assert ran == []  # not run yet: the caller runs it when it wants the result
    assert result() == 7 and ran == [threading.current_thread().name]


def test_an_idle_helper_runs_the_call_and_a_busy_one_leaves_it_to_the_caller():
    sides = SideThreads(helpers=1)
    started, release = threading.Event(), threading.Event()
    first = sides.start(where_it_ran(started, release), "first")
    assert started.wait(10)
    second = sides.start(where_it_ran(), "second")  # the only helper is busy
    assert second() == ("second", threading.current_thread().name)
    release.set()
    tag, thread = first()
    assert tag == "first" and thread.startswith("semsearch-side")
    third = sides.start(where_it_ran(), "third")  # idle again
    assert third()[1].startswith("semsearch-side")


def test_what_the_call_raises_reaches_the_caller_and_frees_the_helper():
    sides = SideThreads(helpers=1)

    def fail():
        raise ValueError("bad postings")

    with pytest.raises(ValueError, match="bad postings"):
        sides.start(fail)()
    assert sides.start(where_it_ran(), "after")()[1].startswith("semsearch-side")


def test_a_forked_process_starts_its_own_helpers():
    """Threads do not survive a fork: a child whose parent's helper was busy gets fresh, idle helpers."""
    sides = SideThreads(helpers=1)
    started, release = threading.Event(), threading.Event()
    busy = sides.start(where_it_ran(started, release), "parent")
    assert started.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: its helper runs the call (a stale pool or semaphore would hang or refuse)
        ok = False
        try:
            ok = sides.start(where_it_ran(), "child")()[1].startswith("semsearch-side")
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    release.set()
    assert busy()[0] == "parent"
    assert os.waitstatus_to_exitcode(status) == 0


def test_semsearch_threads_sets_the_helpers(monkeypatch):
    monkeypatch.setenv("SEMSEARCH_THREADS", "1")
    assert SideThreads().helpers == 0
    monkeypatch.setenv("SEMSEARCH_THREADS", "3")
    assert SideThreads().helpers == 2


def test_hybrid_search_ranks_keywords_on_the_helper_with_the_same_hits(tmp_path, tiny_embedder, monkeypatch):
    col = Collection.create(tmp_path / "c", tiny_embedder)
    col.add([{"id": f"d{i}", "text": f"tea rivers {'sea ' * (i % 5)}clouds number {i}"} for i in range(40)])
    query = "tea by the sea"
    alone = [(h.id, h.score) for h in col.search(query, k=10)]  # 40 documents: far below the threshold
    threads = []
    real_bm25 = searcher_module.bm25_ranking

    def recorded(*args):
        threads.append(threading.current_thread().name)
        return real_bm25(*args)

    monkeypatch.setattr(searcher_module, "bm25_ranking", recorded)
    monkeypatch.setattr(searcher_module, "CONCURRENT_MIN_DOCS", 10)
    col.searcher.sides = SideThreads(helpers=1)
    assert [(h.id, h.score) for h in col.search(query, k=10)] == alone
    col.search(query, k=10, mode="bm25")  # one side only: the caller's
    col.searcher.sides = SideThreads(helpers=0)
    assert [(h.id, h.score) for h in col.search(query, k=10)] == alone
    assert threads[0].startswith("semsearch-side")
    assert threads[1:] == [threading.current_thread().name] * 2
    col.close()
