"""Micro-batching: calls from many threads that arrive within a few milliseconds run as one.

A server answering many searches at once may spend much of each query's
encode on per-call overhead; where it does (OpenVINO, AMX), encoding the
queries that arrive together in one forward pass costs much less than
encoding them one by one, and where it does not (ONNX Runtime, AVX2) the
padding costs more than it saves: ``concurrent_rates`` measures which. ``MicroBatcher``
collects items from any number of threads, runs one function over the batch
in a worker thread, and hands each caller its own result; ``BatchedBackend``
does so for an encoder, in as few padded calls as pay.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, Sequence, TypeVar

import numpy as np

Item = TypeVar("Item")
Result = TypeVar("Result")


class MicroBatcher(Generic[Item, Result]):
    """Runs ``fn`` over batches of items submitted from any thread.

    Args:
        fn: Maps a list of items to a list of results, in the same order.
        max_batch: Most items per call of ``fn`` (default 64).
        max_wait_s: How long the worker waits for more items after the first
            one of a batch arrived (default 0.002 s), while calls arrive
            together (the last batch held more than one): a lone caller does
            not wait. Items that queue up while ``fn`` runs join the next
            batch without waiting.
    """

    def __init__(self, fn: Callable[[list[Item]], Sequence[Result]], max_batch: int = 64, max_wait_s: float = 0.002):
        self._fn = fn
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._queue: queue.Queue[tuple[Item, Future]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._start = threading.Lock()
        self.batches = 0  # calls of fn so far, for inspection
        self._last_batch_size = 0

    def submit(self, item: Item) -> Future:
        """Queue ``item``; the future resolves to its result (or raises what ``fn`` raised)."""
        future: Future = Future()
        self._queue.put((item, future))
        self._ensure_worker()
        return future

    def __call__(self, item: Item, timeout: float | None = None) -> Result:
        """``submit(item)`` and wait for the result (``TimeoutError`` after ``timeout`` seconds)."""
        return self.submit(item).result(timeout)

    def _ensure_worker(self) -> None:
        if self._worker is None:
            with self._start:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._loop, name="micro-batcher", daemon=True)
                    self._worker.start()

    def _take_batch(self) -> list[tuple[Item, Future]]:
        batch = [self._queue.get()]
        while len(batch) < self.max_batch:  # what is already waiting
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        if len(batch) < self.max_batch and self.max_wait_s > 0 and (len(batch) > 1 or self._last_batch_size > 1):
            try:
                while len(batch) < self.max_batch:
                    batch.append(self._queue.get(timeout=self.max_wait_s))
            except queue.Empty:
                pass
        self._last_batch_size = len(batch)
        return batch

    def _loop(self) -> None:
        while True:
            batch = self._take_batch()
            live = [(item, future) for item, future in batch if future.set_running_or_notify_cancel()]
            if not live:
                continue
            try:
                results = self._fn([item for item, _ in live])
                if len(results) != len(live):
                    raise RuntimeError(f"batch function returned {len(results)} results for {len(live)} items")
            except BaseException as exc:  # noqa: BLE001 - every caller of the batch learns of it
                for _, future in live:
                    future.set_exception(exc)
            else:
                for (_, future), result in zip(live, results):
                    future.set_result(result)
            self.batches += 1


#: ``(rows, tokens)`` of an input -> the ``(rows, tokens)`` of each call a backend really runs for it.
PaddedCalls = Callable[[int, int], Sequence[tuple[int, int]]]


def unpadded(rows: int, tokens: int) -> list[tuple[int, int]]:
    """The calls of a backend that runs any input shape as it is: one, of that shape."""
    return [(rows, tokens)]


def padded_calls_of(backend) -> PaddedCalls:
    """``backend.padded_calls`` where it pads inputs to fixed shapes (OpenVINO), else ``unpadded``."""
    return getattr(backend, "padded_calls", unpadded)


def call_overhead_tokens(backend, window: int, repeats: int = 5) -> float | None:
    """A backend's fixed cost per call, in tokens' worth of work.

    Times one row of 16 and of 64 tokens (at most ``window``), alternately,
    and fits ``overhead + per_token * tokens`` to the fastest of ``repeats``
    runs of each (the fastest is the least disturbed by other work), counting
    the tokens the backend really runs (``padded_calls``). Measured alone,
    not under load: under load every call is slower, the small ones most,
    which would read as a larger overhead.

    Returns:
        The overhead over the per-token cost, at least 0.0 (the figures of
        some backends and CPUs are in docs/benchmarks.md), or ``None`` when
        the longer row costs no more than the shorter.
    """
    sizes = (16, max(17, min(64, window)))
    best = {size: float("inf") for size in sizes}
    for _ in range(repeats):
        for size in sizes:
            ids = np.zeros((1, size), dtype=np.int64)
            started = time.perf_counter()
            backend.run(ids, np.ones_like(ids))
            best[size] = min(best[size], time.perf_counter() - started)
    padded = padded_calls_of(backend)
    short, long = sizes
    short_run, long_run = (sum(r * t for r, t in padded(1, size)) for size in sizes)  # tokens really run
    per_token = (best[long] - best[short]) / (long_run - short_run) if long_run > short_run else 0.0
    if per_token <= 0:
        return None
    return max(0.0, best[short] / per_token - short_run)


def concurrent_rates(direct, batched, lengths: Sequence[int], callers: int = 8, rounds: int = 3) -> dict[str, float]:
    """One-row calls per second from ``callers`` threads at once: straight to ``direct``, and through ``batched``.

    Each round sends one call of each of ``lengths`` tokens from a pool of
    ``callers`` threads, once per way, alternately; the best round of each
    counts (the least disturbed by other work), after one round of warm-up.
    A backend whose concurrent calls share the cores well (ONNX Runtime on
    AVX2) runs faster unbatched; one
    whose calls take turns or cost much per call (OpenVINO, AMX) gains from
    batching.

    Returns:
        ``{"concurrent": calls/s, "batched": calls/s}``.
    """
    inputs = [np.ones((1, max(1, int(n))), dtype=np.int64) for n in lengths]
    ways = {"concurrent": direct, "batched": batched}
    best = {way: 0.0 for way in ways}
    with ThreadPoolExecutor(callers, thread_name_prefix="query-rate") as pool:
        for round_ in range(rounds + 1):
            for way, backend in ways.items():
                started = time.perf_counter()
                list(pool.map(lambda ids, backend=backend: backend.run(ids, np.ones_like(ids)), inputs))
                if round_:  # the first round warms both up
                    best[way] = max(best[way], len(inputs) / (time.perf_counter() - started))
    return best


def length_groups(
    lengths: Sequence[int], rows: Sequence[int], overhead_tokens: float, padded_calls: PaddedCalls = unpadded
) -> list[list[int]]:
    """Split items into groups, each run as one padded call, at the least estimated cost.

    A group costs, for each call the backend runs for it (``padded_calls`` of
    its rows and its longest length: one call of that shape unless the
    backend pads to fixed shapes), ``overhead_tokens`` plus the call's rows
    times its tokens. Items are taken in order of length, so each group is a
    run of similar lengths: one long query no longer pads a batch of short
    ones to a larger shape.

    Args:
        lengths: Tokens per item.
        rows: Rows per item.
        overhead_tokens: The fixed cost of a call, in tokens.
        padded_calls: ``(rows, tokens)`` -> the shapes of the calls run for them.

    Returns:
        Groups of item indices; one group holding every item when splitting gains nothing.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    n = len(order)
    best = [0.0] + [float("inf")] * n  # best[j]: least cost of the first j items in order
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        group_rows = 0
        for start in range(end - 1, -1, -1):
            group_rows += rows[order[start]]
            calls = padded_calls(group_rows, lengths[order[end - 1]])
            cost = best[start] + sum(overhead_tokens + r * t for r, t in calls)
            if cost < best[end]:
                best[end], cut[end] = cost, start
    groups, end = [], n
    while end > 0:
        groups.append(order[cut[end] : end])
        end = cut[end]
    return groups[::-1]


class BatchedBackend:
    """An encoder backend whose calls from concurrent threads are run together.

    Each ``run`` call (one or a few texts) becomes one item; the worker pads
    the items of a batch to a common length, runs the wrapped backend once
    and gives each caller its rows. Padding is masked, so a text's vector does
    not depend on its batch. Padding is not free, though: a padded token costs
    what a real one does, so given the backend's call overhead (see
    ``call_overhead_tokens``) a batch whose lengths differ widely runs as a
    few calls of similar lengths (``length_groups``), counting the padding of
    a backend that runs fixed shapes (OpenVINO pads eight queries of up to 36
    tokens to 8 x 64; seven in 8 x 32 and one in 1 x 64 cost less; docs/benchmarks.md).

    Args:
        backend: The backend to wrap (see ``retriever.encoding.backends``).
        max_batch: Most calls merged into one forward pass.
        max_wait_s: Wait for more calls after the first (seconds).
        overhead_tokens: A call's fixed cost in tokens, for grouping by length;
            ``None`` (default): every batch runs as one call.
    """

    def __init__(self, backend, max_batch: int = 64, max_wait_s: float = 0.002, overhead_tokens: float | None = None):
        self.inner = backend
        self.name = backend.name
        self.batcher: MicroBatcher = MicroBatcher(self._run_many, max_batch, max_wait_s)
        self.overhead_tokens = overhead_tokens
        self._padded_calls = padded_calls_of(backend)
        self.calls = 0  # calls of the wrapped backend, for inspection

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        return self.batcher((input_ids, attention_mask))

    def _run_many(self, items: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        lengths = [int(mask.sum(axis=1).max()) if mask.size else 0 for _, mask in items]
        rows = [ids.shape[0] for ids, _ in items]
        overhead = self.overhead_tokens
        if overhead is None:
            groups = [list(range(len(items)))]
        else:
            groups = length_groups(lengths, rows, overhead, self._padded_calls)
        results: list[np.ndarray | None] = [None] * len(items)
        for group in groups:
            for i, vectors in zip(group, self._run_group([items[i] for i in group], max(lengths[i] for i in group))):
                results[i] = vectors
        return results

    def _run_group(self, items: list[tuple[np.ndarray, np.ndarray]], longest: int) -> list[np.ndarray]:
        """One call of the wrapped backend over ``items``, padded (and cut) to ``longest`` tokens."""
        longest = max(longest, 1)
        total = sum(ids.shape[0] for ids, _ in items)
        input_ids = np.zeros((total, longest), dtype=np.int64)
        mask = np.zeros((total, longest), dtype=np.int64)
        bounds, row = [], 0
        for ids, item_mask in items:
            width = min(ids.shape[1], longest)  # columns past every row's last token are padding
            input_ids[row : row + ids.shape[0], :width] = ids[:, :width]
            mask[row : row + ids.shape[0], :width] = item_mask[:, :width]
            bounds.append((row, row + ids.shape[0]))
            row += ids.shape[0]
        vectors = self.inner.run(input_ids, mask)
        self.calls += 1
        return [vectors[start:end] for start, end in bounds]
