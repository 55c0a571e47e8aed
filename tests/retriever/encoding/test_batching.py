"""Micro-batching: concurrent callers are served together and each gets its own result.

No test here times anything on the wall clock: batches are held with events
and counts until the calls that should share them have queued, and the rates
and overheads the module measures are read off a clock that only the fake
backends move, so the outcomes are the same on a loaded machine.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from retriever.encoding import batching
from retriever.encoding.batching import (
    BatchedBackend,
    MicroBatcher,
    call_overhead_tokens,
    concurrent_rates,
    length_groups,
    unpadded,
)

PATIENCE_S = 60  # only a guard against a hang: every wait below ends on an event or a count


class _Clock:
    """Stands in for ``batching``'s ``time``: seconds pass only when a fake backend spends them."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def perf_counter(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(batching, "time", fake)  # batching reads the time through time.perf_counter alone
    return fake


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    """One export of the tiny model for every ONNX embedder of this module."""
    return tmp_path_factory.mktemp("onnx-cache")


class _CostOfWork:
    """A backend whose calls cost ``overhead_s + per_token_s * tokens`` on ``clock``, with zero vectors.

    The clock adds up the cost of every call, as it passes for calls that
    take turns (an OpenVINO backend's do). ``slow_calls`` first calls cost
    ``slowdown_s`` more, as under a burst of other work.
    """

    name = "cost-of-work"

    def __init__(
        self, clock: _Clock, overhead_s: float, per_token_s: float, slow_calls: int = 0, slowdown_s: float = 0.0
    ):
        self.clock, self.overhead_s, self.per_token_s = clock, overhead_s, per_token_s
        self.slow_calls, self.slowdown_s = slow_calls, slowdown_s
        self.calls = 0

    def run(self, input_ids, attention_mask):
        self.calls += 1
        extra = self.slowdown_s if self.calls <= self.slow_calls else 0.0
        self.clock.spend(self.overhead_s + self.per_token_s * input_ids.size + extra)
        return np.zeros((input_ids.shape[0], 4), dtype=np.float32)


class _AllAtOnce:
    """Calls straight to ``backend`` from ``callers`` threads, each run once all ``callers`` calls have arrived.

    So that many calls are in flight at once however loaded the machine, and
    a thread pool of ``callers`` threads starts every one of them.
    """

    def __init__(self, backend, callers: int) -> None:
        self.backend, self.name = backend, backend.name
        self._barrier = threading.Barrier(callers)

    def run(self, input_ids, attention_mask):
        self._barrier.wait(PATIENCE_S)
        return self.backend.run(input_ids, attention_mask)


def _gathered(backend, callers: int, overhead_tokens: float | None = None) -> BatchedBackend:
    """``BatchedBackend(backend)`` whose first batch of each round of ``callers`` one-row calls waits for them all.

    The batch runs once every call of its round has been queued (counted, not
    timed), so the calls queued behind it make one more batch: two at most a
    round, on any machine. Without batching each call would still run alone.
    """
    state = threading.Condition()
    counts = {"queued": 0, "done": 0}

    class Held:
        name = backend.name

        def run(self, input_ids, attention_mask):
            with state:
                round_end = callers * (counts["done"] // callers + 1)
                assert state.wait_for(lambda: counts["queued"] >= round_end, PATIENCE_S)
            vectors = backend.run(input_ids, attention_mask)
            with state:
                counts["done"] += input_ids.shape[0]
            return vectors

    batched = BatchedBackend(Held(), overhead_tokens=overhead_tokens)
    submit = batched.batcher.submit

    def counted_submit(item):
        future = submit(item)
        with state:
            counts["queued"] += 1
            state.notify_all()
        return future

    batched.batcher.submit = counted_submit
    return batched


class _WaitLog(queue.Queue):
    """A batcher's queue that counts the worker's waits for company and answers each at once with what is there.

    A wait is a ``get`` with a timeout; it raises ``queue.Empty`` at once when
    nothing is queued, so a batcher that waits where it should not is caught
    by the count, not by the clock.
    """

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def get(self, block=True, timeout=None):
        if block and timeout is not None:
            self.waits.append(timeout)
            return super().get(block=False)
        return super().get(block, timeout)


class _Held:
    """A batch function that records each batch it gets and holds it until ``release`` is set.

    ``submit_and_hold`` queues an item and returns once its batch is running,
    so whatever is submitted next queues up behind it, however loaded the machine.
    """

    def __init__(self, fn) -> None:
        self.fn, self.calls = fn, []
        self.running, self.release = threading.Event(), threading.Event()

    def __call__(self, items):
        self.calls.append(list(items))
        self.running.set()
        assert self.release.wait(PATIENCE_S)
        return self.fn(items)

    def submit_and_hold(self, batcher: MicroBatcher, item):
        self.running.clear()
        self.release.clear()
        future = batcher.submit(item)
        assert self.running.wait(PATIENCE_S)
        return future


def test_concurrent_items_are_batched_and_answered_in_place():
    square = _Held(lambda items: [i * i for i in items])
    batcher = MicroBatcher(square, max_batch=16, max_wait_s=0.001)
    futures = [square.submit_and_hold(batcher, 0)]
    futures += [batcher.submit(i) for i in range(1, 40)]
    square.release.set()
    assert [f.result(PATIENCE_S) for f in futures] == [i * i for i in range(40)]
    assert square.calls == [[0], list(range(1, 17)), list(range(17, 33)), list(range(33, 40))]


def test_an_error_reaches_every_caller_of_its_batch_and_the_next_batch_works():
    def fail_on_negative(items):
        if any(i < 0 for i in items):
            raise ValueError("negative")
        return items

    held = _Held(fail_on_negative)
    batcher = MicroBatcher(held, max_wait_s=0.05)
    first = held.submit_and_hold(batcher, 1)
    bad = [batcher.submit(-1), batcher.submit(2)]  # queued behind the first batch: they run as one
    held.release.set()
    assert first.result(PATIENCE_S) == 1
    for future in bad:
        with pytest.raises(ValueError, match="negative"):
            future.result(PATIENCE_S)
    assert batcher(3, timeout=PATIENCE_S) == 3
    assert held.calls == [[1], [-1, 2], [3]]


def test_a_lone_caller_does_not_wait_for_company_but_callers_that_came_together_do():
    plus_one = _Held(lambda items: [i + 1 for i in items])
    batcher = MicroBatcher(plus_one, max_wait_s=30)
    batcher._queue = log = _WaitLog()
    plus_one.release.set()
    assert [batcher(i, timeout=PATIENCE_S) for i in range(3)] == [1, 2, 3]
    assert log.waits == [] and plus_one.calls == [[0], [1], [2]]  # one call at a time: none waited

    first = plus_one.submit_and_hold(batcher, 10)
    together = [batcher.submit(11), batcher.submit(12)]  # queued behind the first: one batch of two
    plus_one.release.set()
    assert [f.result(PATIENCE_S) for f in [first, *together]] == [11, 12, 13]
    assert log.waits == [30]  # the batch of two waited for more
    assert batcher(13, timeout=PATIENCE_S) == 14
    assert log.waits == [30, 30]  # and so did the next, while calls came together
    assert batcher(14, timeout=PATIENCE_S) == 15
    assert log.waits == [30, 30]  # alone again: no wait
    assert plus_one.calls[3:] == [[10], [11, 12], [13], [14]]


def test_batched_embedder_gives_each_thread_its_own_vectors(tiny_model_dir, onnx_cache):
    from retriever import Embedder

    embedder = Embedder(tiny_model_dir, backend="onnx", cache_dir=onnx_cache)
    queries = [f"query {i} about green tea and rivers" + " sea" * (i % 7) for i in range(48)]
    alone = np.concatenate([embedder.embed([q]) for q in queries])
    embedder.batch_queries(max_batch=16, max_wait_s=0.01, when="always")
    assert isinstance(embedder._backend, BatchedBackend)
    assert embedder.decision["query_batching"] == {"chosen": "batched"}
    with ThreadPoolExecutor(12) as pool:
        together = np.concatenate(list(pool.map(lambda q: embedder.embed([q]), queries)))
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_calls_of_different_lengths_merged_into_one_pass_get_their_own_rows(tiny_model_dir, onnx_cache):
    from retriever import Embedder
    from retriever.encoding.tokens import padded_batches

    embedder = Embedder(tiny_model_dir, backend="onnx", cache_dir=onnx_cache)
    inner = embedder._backend
    calls = [["green tea"], ["rivers flow into the sea and mountains rise above the clouds"], ["a", "b c d"]]
    inputs = []
    for texts in calls:
        ((_, input_ids, mask),) = padded_batches(embedder._tokens.encode(texts), len(texts))
        inputs.append((input_ids, mask))
    for overhead, calls in ((None, 1), (1000.0, 1), (1.0, 3)):  # unknown or dear calls: one pass; cheap: by length
        batched = BatchedBackend(inner, overhead_tokens=overhead)
        merged = batched._run_many(inputs)
        assert batched.calls == calls
        assert [rows.shape[0] for rows in merged] == [1, 1, 2]
        for rows, (input_ids, mask) in zip(merged, inputs):
            np.testing.assert_allclose(rows, inner.run(input_ids, mask), atol=1e-5)


def test_length_groups_split_off_what_padding_would_waste():
    lengths, rows = [9, 40, 8, 8], [1, 1, 1, 1]
    # one call: 18 + 4 * 40 = 178 tokens' worth; short ones apart from the long one: 18 + 27 + 18 + 40 = 103
    assert length_groups(lengths, rows, overhead_tokens=18) == [[2, 3, 0], [1]]
    assert length_groups(lengths, rows, overhead_tokens=200) == [[2, 3, 0, 1]]
    assert length_groups(lengths, rows, overhead_tokens=0) == [[2], [3], [0], [1]]
    assert length_groups([5, 30], [8, 1], overhead_tokens=18) == [[0], [1]]  # rows weigh: 8 x 5 apart from 1 x 30
    assert length_groups([], [], overhead_tokens=18) == []


def test_length_groups_weigh_the_shapes_a_backend_pads_to():
    """Eight queries of up to 36 tokens: one call as they are, but split where one call would pad to 8 x 64."""

    def fixed(rows: int, tokens: int) -> list[tuple[int, int]]:  # groups of 8 rows, padded to 1, 4 or 8 x 32 or 64
        calls = []
        for start in range(0, rows, 8):
            group = min(8, rows - start)
            calls.append((next(n for n in (1, 4, 8) if n >= group), 32 if tokens <= 32 else 64))
        return calls

    lengths, rows = [14, 17, 19, 21, 22, 24, 28, 36], [1] * 8
    # as they are: 100 + 8 x 36 = 388, the best split 100 + 6 x 24 + 100 + 2 x 36 = 416;
    # padded: 100 + 8 x 64 = 612, split 100 + 8 x 32 + 100 + 64 = 520
    assert length_groups(lengths, rows, 100, unpadded) == [list(range(8))]
    assert length_groups(lengths, rows, 100, fixed) == [list(range(7)), [7]]
    assert length_groups([36, 40], [1, 1], 60, fixed) == [[0], [1]]  # 2 x (60 + 64) against 60 + 4 x 64
    assert length_groups([30, 30, 30], [1, 1, 1], 60, fixed) == [[0, 1, 2]]  # 60 + 4 x 32 against 3 x (60 + 32)


def test_concurrent_rates_are_calls_per_second_of_each_way_in_its_best_round(clock):
    class ByRound:
        """Four calls a round, each costing what ``costs`` says for its round."""

        name = "by-round"

        def __init__(self, costs: list[float]) -> None:
            self.costs, self.calls, self._lock = costs, 0, threading.Lock()

        def run(self, input_ids, attention_mask):
            with self._lock:
                round_, self.calls = self.calls // 4, self.calls + 1
            clock.spend(self.costs[round_])
            return np.zeros((input_ids.shape[0], 4), dtype=np.float32)

    direct = ByRound([0.001, 0.5, 0.25, 0.4])  # the warm-up round is the fastest, and does not count
    batched = ByRound([0.002, 0.1, 0.2, 0.05])
    rates = concurrent_rates(direct, batched, [10, 20, 30, 40], callers=2, rounds=3)
    assert rates == {"concurrent": pytest.approx(4 / (4 * 0.25)), "batched": pytest.approx(4 / (4 * 0.05))}
    assert direct.calls == batched.calls == 16


def test_concurrent_rates_favour_batching_only_where_calls_cost_much(clock):
    """Eight callers at once, one call each: a dear call is cheaper batched, a cheap one is dearer padded."""
    lengths = [10, 20, 30, 40] * 2
    dear = _CostOfWork(clock, 0.02, 0.0001)  # calls take turns, each 20 ms before its tokens
    batched = _gathered(dear, 8, overhead_tokens=200.0)
    rates = concurrent_rates(_AllAtOnce(dear, 8), batched, lengths, callers=8, rounds=1)
    # one at a time: 8 x 20 ms + 200 tokens a round; batched: two calls at most, padded to 40 tokens
    assert batched.calls <= 2 * 2
    assert rates["concurrent"] == pytest.approx(8 / (8 * 0.02 + 200 * 0.0001))
    assert rates["batched"] >= 8 / (2 * 0.02 + 8 * 40 * 0.0001) > 2 * rates["concurrent"]

    cheap = _CostOfWork(clock, 0.0, 0.001)  # no cost per call: batching adds padding and saves nothing
    rates = concurrent_rates(_AllAtOnce(cheap, 8), _gathered(cheap, 8), lengths, callers=8, rounds=1)
    assert rates["concurrent"] == pytest.approx(8 / (200 * 0.001))
    assert rates["batched"] < rates["concurrent"]


@pytest.mark.parametrize(
    "rates, chosen",
    [
        ({"concurrent": 123.4, "batched": 97.1}, "concurrent"),
        ({"concurrent": 97.1, "batched": 123.4}, "batched"),
        ({"concurrent": 100.0, "batched": 100.0}, "batched"),
    ],
)
def test_batch_queries_keeps_the_faster_way_and_says_which(tiny_model_dir, onnx_cache, monkeypatch, rates, chosen):
    """The decision follows rates this test sets, and wraps the backend that was measured."""
    from retriever import Embedder
    from retriever.errors import BadInputError

    measured = []

    def set_rates(direct, batched, lengths, **kwargs):
        measured.append((direct, batched, list(lengths)))
        return dict(rates)

    monkeypatch.setattr(batching, "concurrent_rates", set_rates)
    monkeypatch.setattr(batching, "call_overhead_tokens", lambda backend, window, repeats=5: 18.0)
    embedder = Embedder(tiny_model_dir, backend="onnx", cache_dir=onnx_cache)
    with pytest.raises(BadInputError, match="when must be"):
        embedder.batch_queries(when="sometimes")
    inner = embedder._backend
    embedder.batch_queries()
    ((direct, batched, lengths),) = measured
    assert direct is inner and isinstance(batched, BatchedBackend) and batched.inner is inner
    assert batched.overhead_tokens == 18.0
    assert lengths and all(0 < n <= embedder.max_tokens for n in lengths)
    decision = embedder.decision["query_batching"]
    assert decision == {"chosen": chosen, "concurrent_per_s": rates["concurrent"], "batched_per_s": rates["batched"]}
    assert (embedder._backend is batched) == (chosen == "batched")
    assert (embedder._backend is inner) == (chosen == "concurrent")
    embedder.batch_queries()  # a second call changes nothing, and measures nothing
    assert embedder.decision["query_batching"] is decision and len(measured) == 1


def test_call_overhead_is_timed_in_tokens_of_work(clock):
    work = _CostOfWork(clock, 0.02, 0.001, slow_calls=3, slowdown_s=0.05)  # a burst of load at the start
    assert call_overhead_tokens(work, window=512, repeats=3) == pytest.approx(20)  # the fastest runs count
    assert work.calls == 6
    flat = call_overhead_tokens(_CostOfWork(clock, 0.01, 0.0), window=512, repeats=2)
    assert flat is None or flat > 100  # no cost per token: splitting never pays
