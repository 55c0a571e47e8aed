"""A serving process loads the model a switch put in force once, however many searches ask for it at once."""

from __future__ import annotations

import threading
import time

import pytest

from retriever import Collection, Embedder, models_in_force
from retriever.deadline import deadline
from retriever.encoding.embedder import BACKEND_ENV
from retriever.errors import DeadlineExceededError
from tests.retriever.storage.test_model_switch import QUERIES, documents, perturbed

SEARCHES = 8
WAIT_S = 120  # most seconds a test waits for another thread to get somewhere


class Loads:
    """Counts the ``Embedder``s that ``ModelsInForce`` loads (the real class underneath), and can hold or fail
    the first load until ``gate`` is set."""

    def __init__(self, monkeypatch, gated: bool = False, first_fails: bool = False) -> None:
        self.names: list[str] = []
        self.started = threading.Event()
        self.gate = threading.Event()
        if not gated:
            self.gate.set()
        loads = self

        class CountedEmbedder(Embedder):
            def __init__(self, model, *args, **kwargs):
                loads.names.append(str(model))
                first = len(loads.names) == 1
                loads.started.set()
                if first:
                    assert loads.gate.wait(WAIT_S), "the test never let the first load go on"
                    if first_fails:
                        raise OSError(f"model files unreadable: {model}")
                super().__init__(model, *args, **kwargs)

        monkeypatch.setattr(models_in_force, "Embedder", CountedEmbedder)


@pytest.fixture(scope="module")
def new_model_dir(tmp_path_factory, tiny_model_dir):
    return perturbed(tiny_model_dir, tmp_path_factory.mktemp("new-model") / "model", seed=3)


@pytest.fixture()
def switched(tmp_path, tiny_model_dir, new_model_dir, monkeypatch):
    """``(serving, switcher)``: a handle that searched with the old model, and the handle that then switched the
    collection to the new one (the serving handle has not loaded it yet)."""
    monkeypatch.setenv(BACKEND_ENV, "torch-fp32")  # the serving handle loads the new model as the switch did
    switcher = Collection.create(tmp_path / "col", Embedder(tiny_model_dir), window_tokens=24, overlap_tokens=4)
    switcher.add(documents(0, 20))
    serving = Collection.open(switcher.root)
    serving.search(QUERIES[0], k=5, mode="dense")  # the old model, loaded
    switcher.switch_model(Embedder(new_model_dir), progress=False)
    yield serving, switcher
    serving.close()
    switcher.close()


def ranking(collection: Collection, query: str) -> list[tuple[str, float]]:
    return [(hit.id, round(hit.score, 5)) for hit in collection.search(query, k=5, mode="dense", evidence="none")]


def in_threads(count: int, work) -> list:
    """Run ``work(i)`` in ``count`` threads released together; their results (or exceptions) in order."""
    start = threading.Barrier(count)
    results: list = [None] * count

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = work(i)
        except Exception as exc:  # noqa: BLE001 - returned for the test to inspect
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads), "a search never returned"
    return results


def wait_until(condition, what: str) -> None:
    deadline_at = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline_at, f"{what} did not happen within {WAIT_S} s"
        time.sleep(0.01)


def test_concurrent_searches_after_a_switch_load_the_new_model_once(switched, new_model_dir, monkeypatch):
    serving, switcher = switched
    loads = Loads(monkeypatch)
    results = in_threads(SEARCHES, lambda i: ranking(serving, QUERIES[i % len(QUERIES)]))
    assert loads.names == [str(new_model_dir)]
    assert results == [ranking(switcher, QUERIES[i % len(QUERIES)]) for i in range(SEARCHES)]
    assert serving.model["sha256"] == switcher.model["sha256"]


def test_a_failed_load_reaches_every_waiting_search_and_the_next_search_loads_again(switched, monkeypatch):
    serving, switcher = switched
    loads = Loads(monkeypatch, gated=True, first_fails=True)
    new_sha = switcher.model["sha256"]

    def release_once_all_wait() -> None:
        try:
            wait_until(lambda: serving.models.loading.get(new_sha) == SEARCHES - 1, "every other search waiting")
        finally:
            loads.gate.set()

    releaser = threading.Thread(target=release_once_all_wait)
    releaser.start()
    results = in_threads(SEARCHES, lambda i: ranking(serving, QUERIES[0]))
    releaser.join(WAIT_S)
    assert len(loads.names) == 1
    assert all(isinstance(result, OSError) and "model files unreadable" in str(result) for result in results)
    assert ranking(serving, QUERIES[0]) == ranking(switcher, QUERIES[0])  # not cached: loaded again
    assert len(loads.names) == 2 and serving.models.loading == {}


def test_a_search_waiting_for_the_load_stops_at_its_deadline_and_the_load_goes_on(switched, monkeypatch):
    serving, switcher = switched
    loads = Loads(monkeypatch, gated=True)
    first = threading.Thread(target=lambda: ranking(serving, QUERIES[0]))
    first.start()
    try:
        assert loads.started.wait(WAIT_S)
        with pytest.raises(DeadlineExceededError, match="waiting for the model"), deadline(0.05):
            ranking(serving, QUERIES[1])
        assert len(loads.names) == 1  # it waited for the one load, and did not start its own
    finally:
        loads.gate.set()
        first.join(WAIT_S)
    assert ranking(serving, QUERIES[1]) == ranking(switcher, QUERIES[1]) and len(loads.names) == 1
