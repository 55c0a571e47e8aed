"""BM25 latency on SciFact: the ranking alone, and whole searches with and without evidence.

    .venv/bin/python -m benchmarks.bm25_speed [--datasets DIR] [--no-record] [--page FILE]

Uses the evaluation collection ``semsearch eval`` builds for SciFact (the
packaged MiniLM; built first if missing) and every SciFact query, one at a
time on one thread: "ranking" is analysis plus the BM25 top 10 over the
segments (what bm25s' 0.3 ms a query measures), "search" adds the catalog
read and snippets of the hits, "search + evidence" the default evidence
sentences. Prints p50 and p99 with the machine, and writes them into the
"BM25" table of docs/benchmarks.md (``benchmarks.results_page``; its other
rows kept; ``--no-record`` leaves the page alone).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks import results_page

DEFAULT_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
#: The table of docs/benchmarks.md a run writes, and the column that tells its rows apart.
TABLE = "BM25"
COLUMNS = ("what", "result", "command", "machine", "date")
KEYS = ("what",)


def timed(call, queries: list[str]) -> tuple[float, float]:
    """``(p50, p99)`` in ms of ``call(query)`` over ``queries``."""
    times = []
    for query in queries:
        began = time.perf_counter()
        call(query)
        times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.99 * (len(times) - 1))]


def table_rows(documents: int, queries: int, timings: dict[str, tuple[float, float]]) -> list[dict]:
    """The table's two rows: the ranking alone, and whole searches without and with evidence."""
    (rank50, rank99), (plain50, plain99), (evidence50, evidence99) = (
        timings[name] for name in ("ranking", "search", "search + evidence")
    )
    return [
        {
            "what": f"SciFact ({documents:,} documents, its {queries:,} queries): ranking (analysis and top 10)",
            "result": f"{rank50:.2f} ms p50, {rank99:.2f} ms p99",
        },
        {
            "what": "SciFact: a whole BM25 search without / with evidence",
            "result": f"{plain50:.2f} / {evidence50:.2f} ms p50, {plain99:.2f} / {evidence99:.2f} ms p99",
        },
    ]


def main(argv=None) -> int:
    from indexer.beir import open_collection
    from indexer.job import index_paths
    from retriever.encoding.backends.choice import describe_cpu
    from retriever.evaluation import load_beir
    from retriever.search.ranking import bm25_ranking

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    results_page.add_options(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    results_page.check(args, TABLE, COLUMNS)
    root = args.datasets / "scifact"
    queries = [json.loads(line)["text"] for line in (root / "queries.jsonl").open(encoding="utf-8")]
    with open_collection(load_beir(root, "test"), None, None, progress=False) as col:
        index_paths(col, [root], prune=True, progress=False)
        view, searcher = col.reader.current(), col.searcher
        col.search(queries[0], k=10, mode="bm25")  # the view and statistics loaded outside the timings
        print(f"machine: {describe_cpu()}")
        documents = col.info()["documents"]
        print(f"SciFact: {documents:,} documents, {len(queries):,} queries, k=10, one thread")
        rows = {
            "ranking": lambda q: bm25_ranking(view, searcher.analyzer(q), 10, None, searcher.k1, searcher.b),
            "search": lambda q: col.search(q, k=10, mode="bm25", evidence="none"),
            "search + evidence": lambda q: col.search(q, k=10, mode="bm25"),
        }
        timings = {}
        for name, call in rows.items():
            p50, p99 = timings[name] = timed(call, queries)
            print(f"  {name:<18} p50 {p50:6.3f} ms  p99 {p99:6.3f} ms")
    results_page.record(
        args,
        TABLE,
        COLUMNS,
        KEYS,
        table_rows(documents, len(queries), timings),
        command=results_page.command_line("benchmarks.bm25_speed", argv),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
