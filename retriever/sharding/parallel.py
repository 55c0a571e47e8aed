"""Work on several shards at once: one thread per shard, every error waited for and the first raised.

Embedding (torch, ONNX Runtime), FAISS and the compiled BM25 loop release
the GIL, so shards written or searched in threads proceed side by side.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def in_parallel(fn: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """``[fn(item) for item in items]``, the calls in threads (in the caller alone for one item).

    Every call runs to its end; the first error, in the order of ``items``, is then raised.
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(len(items), thread_name_prefix="semsearch-shard") as pool:
        futures = [pool.submit(fn, item) for item in items]
    errors = [future.exception() for future in futures]
    for error in errors:
        if error is not None:
            raise error
    return [future.result() for future in futures]
