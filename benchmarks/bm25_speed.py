"""BM25 latency on SciFact: the ranking alone, and whole searches with and without evidence.

    .venv/bin/python -m benchmarks.bm25_speed [--datasets DIR]

Uses the evaluation collection ``semsearch eval`` builds for SciFact (the
packaged MiniLM; built first if missing) and every SciFact query, one at a
time on one thread: "ranking" is analysis plus the BM25 top 10 over the
segments (what bm25s' 0.3 ms a query measures), "search" adds the catalog
read and snippets of the hits, "search + evidence" the default evidence
sentences. Prints p50 and p99 with the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

DEFAULT_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def timed(call, queries: list[str]) -> tuple[float, float]:
    """``(p50, p99)`` in ms of ``call(query)`` over ``queries``."""
    times = []
    for query in queries:
        began = time.perf_counter()
        call(query)
        times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.99 * (len(times) - 1))]


def main(argv=None) -> int:
    from indexer.beir import open_collection
    from indexer.job import index_paths
    from retriever.encoding.backends.choice import describe_cpu
    from retriever.evaluation import load_beir
    from retriever.search.ranking import bm25_ranking

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    args = parser.parse_args(argv)
    root = args.datasets / "scifact"
    queries = [json.loads(line)["text"] for line in (root / "queries.jsonl").open(encoding="utf-8")]
    with open_collection(load_beir(root, "test"), None, None, progress=False) as col:
        index_paths(col, [root], prune=True, progress=False)
        view, searcher = col.reader.current(), col.searcher
        col.search(queries[0], k=10, mode="bm25")  # the view and statistics loaded outside the timings
        print(f"machine: {describe_cpu()}")
        print(f"SciFact: {col.info()['documents']:,} documents, {len(queries):,} queries, k=10, one thread")
        rows = {
            "ranking": lambda q: bm25_ranking(view, searcher.analyzer(q), 10, None, searcher.k1, searcher.b),
            "search": lambda q: col.search(q, k=10, mode="bm25", evidence="none"),
            "search + evidence": lambda q: col.search(q, k=10, mode="bm25"),
        }
        for name, call in rows.items():
            p50, p99 = timed(call, queries)
            print(f"  {name:<18} p50 {p50:6.3f} ms  p99 {p99:6.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
