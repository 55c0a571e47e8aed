"""``make bench-learn``: what ``semsearch learn`` gains from judgments, scored on queries it never saw.

For each BEIR set: a copy of its evaluation collection (``indexer.beir``,
built once and cached), half of the test queries' judgments imported as if
users had given them (split by a seeded shuffle of the query ids), ``learn``
run with its defaults, and the other half scored before and after (hybrid
and dense nDCG@10), by ``Collection.evaluate`` on a judgment file that is
never stored. ``--train-split train`` imports a split's judgments instead
(SciFact's train queries) and scores every test query. Rows go into the
"Learning from judgments" table of docs/benchmarks.md.

    python -m benchmarks.learning [--only scifact,cisi] [--train-split train] [--no-record]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import results_page

DEFAULT_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SETS = ("scifact", "cisi", "cranfield", "medline", "time")
TABLE = "Learning from judgments"
COLUMNS = (
    "dataset",
    "judged",
    "scored",
    "hybrid before",
    "hybrid after",
    "dense before",
    "dense after",
    "cv",
    "chosen",
    "settings",
    "seconds",
    "command",
    "machine",
    "date",
)
KEYS = ("dataset", "judged")


def halves(qrels: dict[str, dict[str, int]], seed: int = 0) -> tuple[list[str], list[str]]:
    """The query ids of ``qrels`` split in two by a seeded shuffle: (imported, scored)."""
    ids = sorted(qrels)
    random.Random(seed).shuffle(ids)
    middle = len(ids) // 2
    return sorted(ids[:middle]), sorted(ids[middle:])


def judgment_file(path: Path, queries: dict[str, str], qrels: dict[str, dict[str, int]], ids: list[str]) -> Path:
    """A JSONL judgment file of the queries ``ids``: ``{"query", "id", "grade"}`` rows."""
    rows = [
        {"query": queries[qid], "id": doc_id, "grade": grade} for qid in ids for doc_id, grade in qrels[qid].items()
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def measure(dataset_dir: Path, work: Path, train_split: str | None, progress: bool) -> dict:
    """One row: ``learn`` on one set, its scored queries before and after."""
    from indexer.beir import evaluate, open_collection
    from retriever import Collection
    from retriever.evaluation import load_beir
    from training.learning import LearnConfig, learn

    test = load_beir(dataset_dir, "test")
    evaluate(dataset_dir, mode="bm25", progress=progress)  # builds (or refreshes) the cached collection
    with open_collection(test, None, None, progress) as cached:
        cached.snapshot(work / "collection")
    if train_split:
        source = load_beir(dataset_dir, train_split)
        imported = judgment_file(work / "imported.jsonl", source.queries, source.qrels, sorted(source.qrels))
        scored = judgment_file(work / "scored.jsonl", test.queries, test.qrels, sorted(test.qrels))
        judged, n_scored = f"{train_split} split", len(test.qrels)
    else:
        learn_ids, score_ids = halves(test.qrels)
        imported = judgment_file(work / "imported.jsonl", test.queries, test.qrels, learn_ids)
        scored = judgment_file(work / "scored.jsonl", test.queries, test.qrels, score_ids)
        judged, n_scored = "half of test", len(score_ids)
    with Collection.open(work / "collection") as collection:
        collection.import_judgments(imported, who="benchmark")
        before = {mode: collection.evaluate(scored, mode=mode).metrics["ndcg@10"] for mode in ("hybrid", "dense")}
        started = time.monotonic()
        report = learn(collection, LearnConfig(work_dir=str(work / "learn")), progress=progress)
        seconds = time.monotonic() - started
        after = {mode: collection.evaluate(scored, mode=mode).metrics["ndcg@10"] for mode in ("hybrid", "dense")}
        settings = collection.search_settings()
    return {
        "dataset": dataset_dir.name,
        "judged": f"{judged} ({report.queries} queries)",
        "scored": n_scored,
        "hybrid before": round(before["hybrid"], 4),
        "hybrid after": round(after["hybrid"], 4),
        "dense before": round(before["dense"], 4),
        "dense after": round(after["dense"], 4),
        "cv": " / ".join(f"{k} {v:.4f}" for k, v in report.cv.items()),
        "chosen": report.chosen,
        "settings": f"{settings['fusion']} {settings['alpha']:g} fb {'on' if settings['feedback'] else 'off'}",
        "seconds": round(seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--only", help="comma-separated sets (default: all five)")
    parser.add_argument("--train-split", help="import this split's judgments and score every test query")
    parser.add_argument("--quiet", action="store_true")
    results_page.add_options(parser)
    args = parser.parse_args(argv)
    results_page.check(args, TABLE, COLUMNS)
    names = args.only.split(",") if args.only else list(SETS)
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"learn-{name}-") as work:
            row = measure(args.datasets / name, Path(work), args.train_split, progress=not args.quiet)
        rows.append(row)
        print(json.dumps(row), flush=True)
    results_page.record(args, TABLE, COLUMNS, KEYS, rows, command="python -m benchmarks.learning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
