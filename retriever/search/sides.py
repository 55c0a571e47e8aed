"""A spare core for the keyword side of a hybrid search.

A hybrid search ranks twice, by vector and by keywords, and neither ranking
needs the other. On a large collection each takes milliseconds (side by
side they take about as long as the slower alone; docs/benchmarks.md), and FAISS
and the compiled BM25 loop both release the GIL; so where a view holds at
least ``CONCURRENT_MIN_DOCS`` documents, the searcher starts the keyword side
on an idle helper thread and runs the dense side itself. Below that the
hand-over costs about as much as it saves.

``SideThreads`` keeps one helper per core beyond the caller's
(``threads.thread_count()``, i.e. ``$SEMSEARCH_THREADS`` or the cores this
process may use, less one). A side that finds every helper busy (a server's
concurrent searches already keep the cores busy) runs in the caller after
the other side, as it would alone: a search never queues behind another.
``SEMSEARCH_THREADS=1`` runs every search on its caller's thread alone.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from retriever.encoding.threads import thread_count

CONCURRENT_MIN_DOCS = 50_000

Result = TypeVar("Result")


class SideThreads:
    """Runs a call on an idle helper thread, or leaves it to the caller when none is idle.

    Args:
        helpers: Helper threads (default: ``thread_count() - 1``; 0 runs everything in the caller).
    """

    def __init__(self, helpers: int | None = None) -> None:
        self.helpers = max(0, thread_count() - 1) if helpers is None else max(0, helpers)
        self._start = threading.Lock()
        self._fresh()

    def _fresh(self) -> None:
        """No helper started yet, all idle (also in a process forked from one that had them: threads do not
        survive a fork)."""
        self._idle = threading.BoundedSemaphore(max(self.helpers, 1))
        self._pool: ThreadPoolExecutor | None = None
        self._pid = os.getpid()

    def start(self, fn: Callable[..., Result], *args) -> Callable[[], Result]:
        """Start ``fn(*args)`` on an idle helper. Returns a function that gives its result: it waits for the
        helper (and raises what ``fn`` raised), or, where no helper was idle, calls ``fn`` itself."""
        if self._pid != os.getpid():
            self._fresh()
        if not self.helpers or not self._idle.acquire(blocking=False):
            return functools.partial(fn, *args)
        try:
            future = self._executor().submit(fn, *args)
        except BaseException:
            self._idle.release()
            raise
        future.add_done_callback(lambda _: self._idle.release())
        return future.result

    def _executor(self) -> ThreadPoolExecutor:
        with self._start:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.helpers, thread_name_prefix="semsearch-side")
            return self._pool
