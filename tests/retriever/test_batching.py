"""Micro-batching: concurrent callers are served together and each gets its own result."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from retriever.encoding.batching import (
    BatchedBackend,
    MicroBatcher,
    call_overhead_tokens,
    concurrent_rates,
    length_groups,
    unpadded,
)


def test_concurrent_items_are_batched_and_answered_in_place():
    calls: list[list[int]] = []
    release = threading.Event()

    def square(items: list[int]) -> list[int]:
        release.wait(5)  # hold the first batch so that the others queue up behind it
        calls.append(list(items))
        return [i * i for i in items]

    batcher = MicroBatcher(square, max_batch=16, max_wait_s=0.001)
    futures = [batcher.submit(i) for i in range(40)]
    release.set()
    assert [f.result(10) for f in futures] == [i * i for i in range(40)]
    assert sorted(i for call in calls for i in call) == list(range(40))
    assert max(len(call) for call in calls) == 16 and len(calls) < 40


def test_an_error_reaches_every_caller_of_its_batch_and_the_next_batch_works():
    def fail_on_negative(items):
        if any(i < 0 for i in items):
            raise ValueError("negative")
        return items

    release = threading.Event()

    def hold_first_then(items):
        release.wait(5)  # the items below queue up behind the first batch and run as one
        return fail_on_negative(items)

    batcher = MicroBatcher(hold_first_then, max_wait_s=0.05)
    first = batcher.submit(1)
    bad = [batcher.submit(-1), batcher.submit(2)]
    release.set()
    assert first.result(10) == 1
    for future in bad:
        with pytest.raises(ValueError, match="negative"):
            future.result(10)
    assert batcher(3, timeout=10) == 3


def test_a_lone_caller_does_not_wait_for_company():
    batcher = MicroBatcher(lambda items: [i + 1 for i in items], max_wait_s=30)
    started = time.monotonic()
    assert [batcher(i, timeout=60) for i in range(3)] == [1, 2, 3]
    assert time.monotonic() - started < 15  # a wait would have taken 30 s per call
    assert batcher.batches == 3


def test_batched_embedder_gives_each_thread_its_own_vectors(tiny_model_dir, tmp_path):
    from retriever import Embedder

    embedder = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    queries = [f"query {i} about green tea and rivers" + " sea" * (i % 7) for i in range(48)]
    alone = np.concatenate([embedder.embed([q]) for q in queries])
    embedder.batch_queries(max_batch=16, max_wait_s=0.01, when="always")
    assert isinstance(embedder._backend, BatchedBackend)
    assert embedder.decision["query_batching"] == {"chosen": "batched"}
    with ThreadPoolExecutor(12) as pool:
        together = np.concatenate(list(pool.map(lambda q: embedder.embed([q]), queries)))
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_calls_of_different_lengths_merged_into_one_pass_get_their_own_rows(tiny_model_dir, tmp_path):
    from retriever import Embedder
    from retriever.encoding.tokens import padded_batches

    embedder = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    inner = embedder._backend
    calls = [["green tea"], ["rivers flow into the sea and mountains rise above the clouds"], ["a", "b c d"]]
    inputs = []
    for texts in calls:
        (_, input_ids, mask), = padded_batches(embedder._tokens.encode(texts), len(texts))
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


def test_concurrent_rates_favour_batching_only_where_calls_take_turns_and_cost_much():
    lengths = [10, 20, 30, 40] * 4
    sharing = _CostOfWork(0.001, 0.001)  # calls overlap (asleep) and cost mostly per token
    rates = concurrent_rates(sharing, BatchedBackend(sharing, overhead_tokens=1.0), lengths, callers=8, rounds=1)
    assert rates["concurrent"] > 1.5 * rates["batched"]
    taking_turns = _TakingTurns(0.02, 0.0001)  # one call at a time, each 20 ms before its tokens
    rates = concurrent_rates(taking_turns, BatchedBackend(taking_turns, overhead_tokens=200.0), lengths, callers=8, rounds=1)
    assert rates["batched"] > 1.5 * rates["concurrent"]


def test_batch_queries_keeps_the_faster_way_and_says_which(tiny_model_dir, tmp_path):
    from retriever import Embedder
    from retriever.errors import BadInputError

    embedder = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    with pytest.raises(BadInputError, match="when must be"):
        embedder.batch_queries(when="sometimes")
    inner = embedder._backend
    embedder.batch_queries()
    decision = embedder.decision["query_batching"]
    faster = "batched" if decision["batched_per_s"] >= decision["concurrent_per_s"] else "concurrent"
    assert decision["chosen"] == faster
    assert isinstance(embedder._backend, BatchedBackend) == (faster == "batched")
    assert (embedder._backend is inner) == (faster == "concurrent")
    embedder.batch_queries()  # a second call changes nothing
    assert embedder.decision["query_batching"] is decision


class _CostOfWork:
    """A backend whose calls take ``overhead_s + per_token_s * tokens`` (asleep), with zero vectors."""

    name = "sleeper"

    def __init__(self, overhead_s: float, per_token_s: float) -> None:
        self.overhead_s, self.per_token_s = overhead_s, per_token_s

    def run(self, input_ids, attention_mask):
        time.sleep(self.overhead_s + self.per_token_s * input_ids.size)
        return np.zeros((input_ids.shape[0], 4), dtype=np.float32)


def test_call_overhead_is_timed_in_tokens_of_work():
    assert call_overhead_tokens(_CostOfWork(0.02, 0.001), window=512, repeats=3) == pytest.approx(20, abs=6)
    flat = call_overhead_tokens(_CostOfWork(0.01, 0.0), window=512, repeats=2)
    assert flat is None or flat > 100  # no cost per token: splitting never pays


class _TakingTurns(_CostOfWork):
    """A ``_CostOfWork`` whose calls run one at a time, as an OpenVINO backend's do."""

    def __init__(self, overhead_s: float, per_token_s: float) -> None:
        super().__init__(overhead_s, per_token_s)
        self._lock = threading.Lock()

    def run(self, input_ids, attention_mask):
        with self._lock:
            return super().run(input_ids, attention_mask)
