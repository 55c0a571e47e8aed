"""What evidence costs a search: ``python -m benchmarks.evidence [--dataset DIR] [--queries N] [--no-record]``.

On one BEIR collection (SciFact's by default, built once under the
evaluation cache), every test query is searched hybrid with k=10 under each
evidence mode in turn, the modes taking turns query by query so that they
share the machine's noise. Prints p50/p95 per mode, the time evidence adds
over ``none``, how many hits carry evidence and, under ``auto``, how many of
those needed the model. Writes ``runs/bench/evidence.json``, and a run of the
default workload (SciFact, 300 queries, k=10) writes the "Evidence" table of
docs/benchmarks.md (``benchmarks.results_page``; ``--no-record`` leaves the
page alone, ``--page`` names another copy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks import results_page
from indexer.beir import open_collection
from indexer.job import index_paths
from retriever.encoding.backends.choice import describe_cpu
from retriever.evaluation import load_beir
from retriever.search.evidence import EVIDENCE_MODES

DEFAULT_DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "scifact"
OUT = Path("runs/bench/evidence.json")
#: The table of docs/benchmarks.md a run writes (of ``DEFAULT_WORKLOAD`` only), and the column that tells its
#: rows apart.
TABLE = "Evidence"
COLUMNS = ("evidence", "search p50", "p95", "hits with evidence", "command", "machine", "date")
KEYS = ("evidence",)
DEFAULT_WORKLOAD = ("scifact", 300, 10)  # the dataset's folder, queries, k
#: How the table names each mode.
LABELS = {"none": "`none`", "terms": "`terms` (default)", "auto": "`auto` (the UI's)", "semantic": "`semantic`"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table_row(mode: str, figures: dict) -> dict:
    """The table's row of one evidence mode, from its entry in the report's ``evidence``."""
    share = figures["with_evidence"] / max(figures["hits"], 1)
    hits = f"{share:.1%}" if figures["with_evidence"] else "none"
    if mode == "auto":
        hits += f" ({figures['semantic'] / max(figures['hits'], 1):.0%} of hits needed the model)"
    p50 = f"{figures['p50_ms']:.2f} ms" + (f" (+{figures['added_p50_ms']:.2f} over `none`)" if mode != "none" else "")
    return {
        "evidence": LABELS.get(mode, f"`{mode}`"),
        "search p50": p50,
        "p95": f"{figures['p95_ms']:.2f} ms",
        "hits with evidence": hits,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The run's flags; a workload other than the default's is not written into the results page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("-k", type=int, default=10)
    results_page.add_options(parser)
    args = parser.parse_args(argv)
    if (args.dataset.name, args.queries, args.k) != DEFAULT_WORKLOAD and not args.no_record:
        print(f"not written into {args.page}: its table is of the default workload (SciFact, 300 queries, k=10)")
        args.no_record = True
    results_page.check(args, TABLE, COLUMNS)
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)

    dataset = load_beir(args.dataset, "test")
    queries = list(dataset.queries.values())[: args.queries]
    with open_collection(dataset, None, None, progress=True) as col:
        index_paths(col, [dataset.root], prune=True, progress=True)
        for query in queries[:10]:  # load the model and the view outside the timings
            col.search(query, k=args.k, evidence="semantic")
        times = {mode: [] for mode in EVIDENCE_MODES}
        counts = {mode: {"hits": 0, "with_evidence": 0, "semantic": 0} for mode in EVIDENCE_MODES}
        for i, query in enumerate(queries):
            order = EVIDENCE_MODES[i % 4 :] + EVIDENCE_MODES[: i % 4]
            for mode in order:
                started = time.perf_counter()
                hits = col.search(query, k=args.k, evidence=mode)
                times[mode].append(time.perf_counter() - started)
                counts[mode]["hits"] += len(hits)
                counts[mode]["with_evidence"] += sum(bool(hit.evidence) for hit in hits)
                counts[mode]["semantic"] += sum(
                    bool(hit.evidence) and hit.evidence[0].method == "semantic" for hit in hits
                )
        report = {
            "machine": describe_cpu(),
            "dataset": dataset.name,
            "documents": len(col),
            "queries": len(queries),
            "k": args.k,
            "mode": "hybrid",
            "evidence": {},
        }
    base = statistics.median(times["none"])
    print(
        f"{report['machine']}\n{dataset.name}: {report['documents']:,} documents, {len(queries)} queries, "
        f"hybrid, k={args.k}\n"
    )
    print(f"{'evidence':<10} {'p50 ms':>8} {'p95 ms':>8} {'+p50 ms':>8} {'hits with':>10} {'by model':>9}")
    for mode in EVIDENCE_MODES:
        p50, p95 = statistics.median(times[mode]), percentile(times[mode], 0.95)
        c = counts[mode]
        report["evidence"][mode] = {
            "p50_ms": round(p50 * 1e3, 2),
            "p95_ms": round(p95 * 1e3, 2),
            "added_p50_ms": round((p50 - base) * 1e3, 2),
            **c,
        }
        print(
            f"{mode:<10} {p50 * 1e3:>8.2f} {p95 * 1e3:>8.2f} {(p50 - base) * 1e3:>8.2f} "
            f"{c['with_evidence'] / max(c['hits'], 1):>10.1%} {c['semantic'] / max(c['hits'], 1):>9.1%}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    rows = [
        table_row(mode, report["evidence"][mode])
        for mode in ("none", "terms", "auto", "semantic")
        if mode in report["evidence"]
    ]
    results_page.record(
        args, TABLE, COLUMNS, KEYS, rows, command=results_page.command_line("benchmarks.evidence", argv)
    )


if __name__ == "__main__":
    main()
