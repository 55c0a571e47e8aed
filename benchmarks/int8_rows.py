"""int8 rescoring rows: how far their estimates are from float32, and what they save a large collection.

    python -m benchmarks.int8_rows [--collection runs/bench/scale/n10000000-compressed] [--queries 200]

Without ``--collection``: real all-MiniLM-L6-v2 chunk and query embeddings (``benchmarks.scale``'s cache
of the shared sets) quantized as segments quantize them; prints the estimates' absolute error (mean, p99,
max), recall@10 of the int8 ranking alone against float32, and the deepest int8 rank of a float32 top-10
hit (the float32 pass rescores ``ranking.exact_depth``: 30 for the top 10). With ``--collection``: the
collection is opened twice in one process and one copy's segments forget their int8 rows (rescoring every
candidate from float32, as before them); real query vectors, a different one each search, alternate
between the two; prints the machine and dense p50 / p90 per side, and how often their top 10 agree.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import numpy as np

from benchmarks.scale import BENCH, DEFAULT_DATASETS, machine, real_data
from retriever.search import int8_rows


def estimate_errors(chunks: np.ndarray, queries: np.ndarray) -> None:
    """Print the int8 estimates' error and ranking against float32 for every query over ``chunks``."""
    quantized = int8_rows.quantize(chunks)
    everything = np.arange(len(chunks))
    errors, kept, deepest = [], 0, 0
    for query in queries:
        exact, estimated = chunks @ query, int8_rows.scores(quantized, everything, query)
        errors.append(np.abs(estimated - exact))
        truth = np.argsort(-exact)[:10]
        rank = np.empty(len(chunks), dtype=np.int64)
        rank[np.argsort(-estimated)] = everything
        kept += int((rank[truth] < 10).sum())
        deepest = max(deepest, int(rank[truth].max()) + 1)
    error = np.concatenate(errors)
    print(f"machine: {machine()}")
    print(
        f"{len(chunks):,} real chunks, {len(queries)} real queries: |int8 - float32| mean {error.mean():.5f}, "
        f"p99 {np.quantile(error, 0.99):.5f}, max {error.max():.5f}; recall@10 of int8 alone "
        f"{kept / (10 * len(queries)):.4f}; deepest int8 rank of a float32 top-10 hit: {deepest}"
    )


def alternate(path: str, vectors: np.ndarray, n: int) -> None:
    """Dense searches of the collection at ``path`` with and without int8 rows, in alternation."""
    from retriever import Collection

    sides = {"int8": Collection.open(path), "float32": Collection.open(path)}
    for part in sides["float32"].reader.current().parts:
        part.segment.index.int8 = None
    chosen = np.random.default_rng(23).choice(len(vectors), size=min(2 * n + 1, len(vectors)), replace=False)
    for col in sides.values():
        col.search(vector=vectors[chosen[0]], k=10)
    times: dict[str, list[float]] = defaultdict(list)
    same = 0
    for i in range(1, len(chosen) - 1, 2):
        for j, name in enumerate(("int8", "float32") if i % 4 == 1 else ("float32", "int8")):
            began = time.perf_counter()
            sides[name].search(vector=vectors[chosen[i + j]], k=10)
            times[name].append(time.perf_counter() - began)
        query = vectors[chosen[i]]  # both sides have read its pages now: untimed
        tops = [{h.id for h in col.search(vector=query, k=10)} for col in sides.values()]
        same += len(tops[0] & tops[1])
    print(f"machine: {machine()}; {len(sides['int8']):,} documents")
    for name, taken in times.items():
        ms = sorted(t * 1000 for t in taken)
        print(f"  {name:<8} dense p50 {statistics.median(ms):7.2f} ms  p90 {ms[len(ms) * 9 // 10]:7.2f} ms")
    print(f"  top 10 shared by the two sides: {same / (10 * len(times['int8'])):.4f}")
    for col in sides.values():
        col.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", help="a collection to search with and without int8 rows")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    chunks, queries, _ = real_data(DEFAULT_DATASETS, BENCH / "scale" / "real")
    queries = queries.astype(np.float32)
    if args.collection:
        alternate(args.collection, queries, args.queries)
    else:
        estimate_errors(chunks.astype(np.float32), queries[: args.queries])


if __name__ == "__main__":
    main()
