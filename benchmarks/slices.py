"""Small, fixed slices of the shared datasets, cheap enough for ``make test``."""

from __future__ import annotations

import json
from pathlib import Path

SLICE_QUERIES = 50
SLICE_EXTRA_DOCS = 500


def write_scifact_slice(source: Path, target: Path) -> Path:
    """A BEIR dataset of SciFact's first 50 test queries over a 500-plus-document corpus:
    the first 500 corpus records plus every document those queries judge relevant.
    Each record gets a ``bucket`` field (its line number modulo 5) to filter on."""
    (target / "qrels").mkdir(parents=True)
    rows = (source / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    chosen: list[str] = []
    kept_rows = []
    for row in rows:
        query_id, doc_id, _ = row.split("\t")
        if query_id not in chosen:
            if len(chosen) == SLICE_QUERIES:
                break
            chosen.append(query_id)
        kept_rows.append(row)
    relevant = {row.split("\t")[1] for row in kept_rows}
    with (source / "corpus.jsonl").open(encoding="utf-8") as lines, (target / "corpus.jsonl").open("w") as out:
        for number, line in enumerate(lines):
            record = json.loads(line)
            if number < SLICE_EXTRA_DOCS or record["_id"] in relevant:
                out.write(json.dumps({**record, "bucket": number % 5}) + "\n")
    with (source / "queries.jsonl").open(encoding="utf-8") as lines, (target / "queries.jsonl").open("w") as out:
        for line in lines:
            if line.strip() and json.loads(line)["_id"] in chosen:
                out.write(line)
    (target / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(kept_rows) + "\n")
    return target
