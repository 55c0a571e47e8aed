"""Micro-batching: calls from many threads that arrive within a few milliseconds run as one.

A server answering many searches at once spends most of each query's encode
on per-call overhead; encoding the queries that arrive together in one
forward pass costs little more than encoding one. ``MicroBatcher`` collects
items from any number of threads, runs one function over the batch in a
worker thread, and hands each caller its own result.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
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


class BatchedBackend:
    """An encoder backend whose calls from concurrent threads are run together.

    Each ``run`` call (one or a few texts) becomes one item; the worker pads
    the items of a batch to a common length, runs the wrapped backend once
    and gives each caller its rows. Padding is masked, so a text's vector does
    not depend on its batch.

    Args:
        backend: The backend to wrap (see ``retriever.backends``).
        max_batch: Most calls merged into one forward pass.
        max_wait_s: Wait for more calls after the first (seconds).
    """

    def __init__(self, backend, max_batch: int = 64, max_wait_s: float = 0.002) -> None:
        self.inner = backend
        self.name = backend.name
        self.batcher: MicroBatcher = MicroBatcher(self._run_many, max_batch, max_wait_s)

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        return self.batcher((input_ids, attention_mask))

    def _run_many(self, items: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        if len(items) == 1:
            return [self.inner.run(*items[0])]
        rows = sum(ids.shape[0] for ids, _ in items)
        longest = max(ids.shape[1] for ids, _ in items)
        input_ids = np.zeros((rows, longest), dtype=np.int64)
        mask = np.zeros((rows, longest), dtype=np.int64)
        bounds, row = [], 0
        for ids, item_mask in items:
            input_ids[row : row + ids.shape[0], : ids.shape[1]] = ids
            mask[row : row + ids.shape[0], : ids.shape[1]] = item_mask
            bounds.append((row, row + ids.shape[0]))
            row += ids.shape[0]
        vectors = self.inner.run(input_ids, mask)
        return [vectors[start:end] for start, end in bounds]
