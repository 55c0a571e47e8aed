"""``make bench-quality`` (tagging part): few-shot tagging, frozen embeddings against TF-IDF.

One collection mixes the five visible BEIR corpora (SciFact, CISI, Cranfield,
MEDLINE, TIME); a document's label is the corpus it came from, known only to
this script. For 4, 8 and 32 labelled examples per corpus (``--seeds``
random draws each), both taggers are trained on the examples through the
product's own code (``retriever.tagging``: pooled stored vectors, the
collection's TF-IDF, the same logistic regression) and scored on every other
document: accuracy and macro-F1, and what ``--method auto`` would have picked.
Then ``Collection.tag`` labels the whole collection from 32 examples a
corpus, timed end to end (no text is encoded again). Both results are written
into the "Tagging" tables of docs/benchmarks.md (``benchmarks.results_page``: a
row per number of examples, and the ``Collection.tag`` row; ``--no-record``
leaves the page alone, ``--page`` names another copy).

    python -m benchmarks.tagging [--datasets DIR] [--seeds 5] [--shots 4,8,32] [--no-record] [--page FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import results_page
from indexer.beir import EVAL_ROOT
from retriever import Collection, Embedder
from retriever.encoding.backends.choice import describe_cpu
from retriever.jsonl import read_jsonl
from retriever.tagging.classifier import EMBEDDING, TFIDF, fit_logistic, probabilities
from retriever.tagging.evaluation import cross_validate
from retriever.tagging.examples import Example
from retriever.tagging.features import live_rows, segment_texts, segment_vectors
from retriever.tagging.fitting import fit_tfidf

CORPORA = ("scifact", "cisi", "cranfield", "medline", "time")
DEFAULT_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
OUT = Path("runs/bench/tagging.json")
#: The tables of docs/benchmarks.md a run writes: the comparison, a row per number of examples a corpus,
#: and ``Collection.tag``'s time, a row of the "what | result" table.
TABLE = "Tagging"
COLUMNS = (
    "examples a corpus",
    "frozen embeddings + LR, accuracy",
    "TF-IDF + LR, accuracy",
    "gap (points)",
    "macro-F1, embeddings / TF-IDF",
    "`auto`, accuracy",
    "command",
    "machine",
    "date",
)
TIMING_COLUMNS = ("what", "result", "command", "machine", "date")


def build(datasets: Path) -> Collection:
    """The mixed collection (ids ``<corpus>/<id>``), built once and reused from the eval cache."""
    embedder = Embedder()
    path = EVAL_ROOT / f"tagging-mix-{embedder.weights_sha256[:12]}"
    collection = Collection.open_or_create(path, embedder)
    for corpus in CORPORA:
        docs = [
            {"id": f"{corpus}/{r['_id']}", "title": r.get("title") or "", "text": r["text"]}
            for _, r in read_jsonl(datasets / corpus / "corpus.jsonl")
            if (r.get("text") or "").strip()
        ]
        for at in range(0, len(docs), 1000):
            collection.upsert(docs[at : at + 1000])
        print(f"{corpus}: {len(docs):,} documents", flush=True)
    return collection


def all_features(collection: Collection):
    """``(ids, labels, pooled vectors, tfidf rows, tfidf)`` of every live document."""
    tfidf = fit_tfidf(collection, [])
    ids, vectors, texts = [], [], []
    for segment, rows, keys in live_rows(collection.reader.current()):
        stored = collection.catalog.by_keys([int(k) for k in keys])
        docs = [stored[int(k)] for k in keys]
        ids += [d.id for d in docs]
        vectors.append(segment_vectors(segment, rows))
        texts += segment_texts(segment, rows, [d.title for d in docs])
    labels = np.asarray([doc_id.split("/", 1)[0] for doc_id in ids])
    return ids, labels, np.concatenate(vectors), tfidf.transform(texts)


def scores(truth: np.ndarray, guess: list) -> tuple[float, float]:
    from sklearn.metrics import f1_score

    return float(np.mean(truth == np.asarray(guess))), float(f1_score(truth, guess, average="macro"))


def trial(labels, features: dict, shots: int, seed: int) -> dict:
    """Train both on ``shots`` examples a corpus (draw ``seed``), score on the rest."""
    rng = np.random.default_rng(seed)
    chosen = np.concatenate([rng.choice(np.flatnonzero(labels == c), shots, replace=False) for c in CORPORA])
    rest = np.setdiff1d(np.arange(len(labels)), chosen)
    out = {}
    for method, rows in features.items():
        classes, coef, intercept = fit_logistic(rows[chosen], list(labels[chosen]))
        guess = [classes[i] for i in probabilities(rows[rest], coef, intercept).argmax(axis=1)]
        out[method] = scores(labels[rest], guess)
    auto = cross_validate({m: rows[chosen] for m, rows in features.items()}, list(labels[chosen])).chosen
    out["auto"] = out[auto]
    out["auto_chose"] = auto
    return out


def table_row(row: dict) -> dict:
    """The comparison table's row of one number of examples a corpus (a row of the report's ``rows``)."""
    emb, tf, auto = row[EMBEDDING], row[TFIDF], row["auto"]
    picked = sum(method == TFIDF for method in row["auto_chose"])
    return {
        "examples a corpus": str(row["shots"]),
        "frozen embeddings + LR, accuracy": f"{emb['accuracy']:.3f} ± {emb['accuracy_sd']:.3f}",
        "TF-IDF + LR, accuracy": f"{tf['accuracy']:.3f} ± {tf['accuracy_sd']:.3f}",
        "gap (points)": f"{100 * (emb['accuracy'] - tf['accuracy']):+.1f}",
        "macro-F1, embeddings / TF-IDF": f"{emb['macro_f1']:.3f} / {tf['macro_f1']:.3f}",
        "`auto`, accuracy": f"{auto['accuracy']:.3f}"
        + (f" (picked TF-IDF in {picked} of {row['seeds']} draws)" if picked else ""),
    }


def record(args, argv: list[str], rows: list[dict], report) -> None:
    """Write the comparison's rows and ``Collection.tag``'s time (``report``: a ``TagReport``) into the page."""
    command = results_page.command_line("benchmarks.tagging", argv)
    results_page.record(args, TABLE, COLUMNS, ("examples a corpus",), [table_row(row) for row in rows], command=command)
    timing = {
        "what": f"`Collection.tag` labelling all {report.documents:,} documents from 32 examples a corpus "
        "(pooling, fitting, predicting and the one commit)",
        "result": f"{report.seconds:.1f} s end to end",
    }
    results_page.record(args, TABLE, TIMING_COLUMNS, ("what",), [timing], command=command)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--shots", default="4,8,32")
    results_page.add_options(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    results_page.check(args, TABLE, COLUMNS)
    results_page.check(args, TABLE, TIMING_COLUMNS)
    collection = build(args.datasets)
    started = time.perf_counter()
    ids, labels, vectors, tfidf_rows = all_features(collection)
    print(f"features of {len(ids):,} documents: {time.perf_counter() - started:.1f} s", flush=True)
    features = {EMBEDDING: vectors, TFIDF: tfidf_rows}
    rows = []
    print(
        f"\n{'examples/corpus':>15} {'embedding acc':>14} {'tfidf acc':>10} {'gap':>6} "
        f"{'emb macro-F1':>13} {'tfidf macro-F1':>15} {'auto acc':>9}  auto chose"
    )
    for shots in (int(s) for s in args.shots.split(",")):
        runs = [trial(labels, features, shots, seed) for seed in range(args.seeds)]
        row = {"shots": shots, "seeds": args.seeds}
        for key in (EMBEDDING, TFIDF, "auto"):
            row[key] = {
                "accuracy": statistics.mean(r[key][0] for r in runs),
                "accuracy_sd": statistics.pstdev(r[key][0] for r in runs),
                "macro_f1": statistics.mean(r[key][1] for r in runs),
            }
        row["auto_chose"] = [r["auto_chose"] for r in runs]
        rows.append(row)
        emb, tf = row[EMBEDDING], row[TFIDF]
        print(
            f"{shots:>15} {emb['accuracy']:>8.3f}±{emb['accuracy_sd']:.3f} {tf['accuracy']:>4.3f}±{tf['accuracy_sd']:.3f} "
            f"{100 * (emb['accuracy'] - tf['accuracy']):>+5.1f} {emb['macro_f1']:>13.3f} {tf['macro_f1']:>15.3f} "
            f"{row['auto']['accuracy']:>9.3f}  {', '.join(row['auto_chose'])}",
            flush=True,
        )
    rng = np.random.default_rng(0)
    examples = [
        Example(str(c), doc_id=ids[i])
        for c in CORPORA
        for i in rng.choice(np.flatnonzero(labels == c), 32, replace=False)
    ]
    report = collection.tag("corpus_guess", examples, method=EMBEDDING)
    print(
        f"\nCollection.tag on {report.documents:,} documents (32 examples a corpus, embedding): "
        f"{report.seconds:.2f} s end to end, {report.written:,} written in generation {report.generation}"
    )
    print(f"CPU: {describe_cpu()}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {"rows": rows, "tag_seconds": report.seconds, "documents": report.documents, "cpu": describe_cpu()},
            indent=1,
        ),
        encoding="utf-8",
    )
    record(args, argv, rows, report)


if __name__ == "__main__":
    main()
