"""What evidence costs a search: ``python -m benchmarks.evidence [--dataset DIR] [--queries N]``.

On one BEIR collection (SciFact's by default, built once under the
evaluation cache), every test query is searched hybrid with k=10 under each
evidence mode in turn, the modes taking turns query by query so that they
share the machine's noise. Prints p50/p95 per mode, the time evidence adds
over ``none``, how many hits carry evidence and, under ``auto``, how many of
those needed the model. Writes ``runs/bench/evidence.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from indexer.beir import open_collection
from indexer.job import index_paths
from retriever.encoding.backends.choice import describe_cpu
from retriever.evaluation import load_beir
from retriever.search.evidence import EVIDENCE_MODES

DEFAULT_DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "scifact"
OUT = Path("runs/bench/evidence.json")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()

    dataset = load_beir(args.dataset, "test")
    queries = list(dataset.queries.values())[: args.queries]
    with open_collection(dataset, None, None, progress=True) as col:
        index_paths(col, [dataset.root], prune=True, progress=True)
        for query in queries[:10]:  # load the model and the view outside the timings
            col.search(query, k=args.k, evidence="semantic")
        times = {mode: [] for mode in EVIDENCE_MODES}
        counts = {mode: {"hits": 0, "with_evidence": 0, "semantic": 0} for mode in EVIDENCE_MODES}
        for i, query in enumerate(queries):
            order = EVIDENCE_MODES[i % 4:] + EVIDENCE_MODES[: i % 4]
            for mode in order:
                started = time.perf_counter()
                hits = col.search(query, k=args.k, evidence=mode)
                times[mode].append(time.perf_counter() - started)
                counts[mode]["hits"] += len(hits)
                counts[mode]["with_evidence"] += sum(bool(hit.evidence) for hit in hits)
                counts[mode]["semantic"] += sum(bool(hit.evidence) and hit.evidence[0].method == "semantic"
                                                for hit in hits)
        report = {"machine": describe_cpu(), "dataset": dataset.name, "documents": len(col),
                  "queries": len(queries), "k": args.k, "mode": "hybrid", "evidence": {}}
    base = statistics.median(times["none"])
    print(f"{report['machine']}\n{dataset.name}: {report['documents']:,} documents, {len(queries)} queries, "
          f"hybrid, k={args.k}\n")
    print(f"{'evidence':<10} {'p50 ms':>8} {'p95 ms':>8} {'+p50 ms':>8} {'hits with':>10} {'by model':>9}")
    for mode in EVIDENCE_MODES:
        p50, p95 = statistics.median(times[mode]), percentile(times[mode], 0.95)
        c = counts[mode]
        report["evidence"][mode] = {"p50_ms": round(p50 * 1e3, 2), "p95_ms": round(p95 * 1e3, 2),
                                    "added_p50_ms": round((p50 - base) * 1e3, 2), **c}
        print(f"{mode:<10} {p50 * 1e3:>8.2f} {p95 * 1e3:>8.2f} {(p50 - base) * 1e3:>8.2f} "
              f"{c['with_evidence'] / max(c['hits'], 1):>10.1%} {c['semantic'] / max(c['hits'], 1):>9.1%}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
