"""Hybrid search's settings over the five visible sets at once, and whether a change would generalise.

    .venv/bin/python -m benchmarks.hybrid_settings [--alphas 0.65,0.7,0.75] [--weights 0.35,0.5,0.7]
        [--docs 2,3] [--datasets DIR]

For every combination of the fusion's ``alpha``, the feedback weight
(``feedback.FEEDBACK_WEIGHT``) and the feedback documents
(``feedback.FEEDBACK_DOCS``), nDCG@10 of default hybrid search on SciFact,
CISI, Cranfield, MEDLINE and TIME (the evaluation collections ``semsearch
eval`` builds; each query embedded once). Then leave one set out: the
setting with the best mean change over the other four, and what it does to
the one left out. A setting worth making the default gains on the sets it
was not chosen on, not only on average over those it was.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
from pathlib import Path

import numpy as np

DEFAULT_DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SETS = ("scifact", "cisi", "cranfield", "medline", "time")


@contextlib.contextmanager
def feedback_settings(weight: float, docs: int):
    """Pseudo-relevance feedback with ``weight`` and ``docs`` inside the block, the defaults after it."""
    from retriever.search import feedback

    saved = feedback.FEEDBACK_WEIGHT, feedback.FEEDBACK_DOCS
    feedback.FEEDBACK_WEIGHT, feedback.FEEDBACK_DOCS = weight, docs
    try:
        yield
    finally:
        feedback.FEEDBACK_WEIGHT, feedback.FEEDBACK_DOCS = saved


def ndcg_at_10(collection, dataset, vectors: np.ndarray, alpha: float) -> float:
    """nDCG@10 of hybrid search with ``alpha`` over every query of ``dataset`` (vectors ``(q, dim)``, in order)."""
    from retriever.evaluation import DEPTH, evaluate_run, run_queries

    vector_of = dict(zip(dataset.queries.values(), vectors))

    def search(text: str) -> list[str]:
        hits = collection.search(text, vector=vector_of[text], k=DEPTH, alpha=alpha, evidence="none")
        return [hit.id for hit in hits]

    return evaluate_run(run_queries(search, dataset.queries, progress=False), dataset.qrels)["ndcg@10"]


def leave_one_out(scores: dict[tuple, dict[str, float]], default: tuple) -> dict[str, tuple[tuple, float]]:
    """Per set: the setting with the best mean change over the other sets, and its change on this one."""
    out = {}
    for held in SETS:
        others = [name for name in SETS if name != held]
        gain = {key: np.mean([row[n] - scores[default][n] for n in others]) for key, row in scores.items()}
        chosen = max(gain, key=gain.get)
        out[held] = (chosen, scores[chosen][held] - scores[default][held])
    return out


def main(argv=None) -> int:
    from indexer.beir import open_collection
    from retriever.evaluation import load_beir
    from retriever.search import feedback
    from retriever.search.fusion import DEFAULT_ALPHA

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alphas", default="0.65,0.7,0.75")
    parser.add_argument("--weights", default="0.35,0.5,0.7")
    parser.add_argument("--docs", default="2,3")
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    args = parser.parse_args(argv)
    grid = list(
        itertools.product(
            *(
                [float(x) for x in args.alphas.split(",")],
                [float(x) for x in args.weights.split(",")],
                [int(x) for x in args.docs.split(",")],
            )
        )
    )
    default = (DEFAULT_ALPHA, feedback.FEEDBACK_WEIGHT, feedback.FEEDBACK_DOCS)
    grid = grid if default in grid else [default, *grid]
    loaded = {}
    for name in SETS:
        dataset = load_beir(args.datasets / name)
        collection = open_collection(dataset, None, None, False)
        loaded[name] = (collection, dataset, collection.embed(list(dataset.queries.values())))
    print(f"{'alpha':>5} {'weight':>6} {'docs':>4} " + " ".join(f"{n:>9}" for n in SETS) + f" {'mean':>7}")
    scores: dict[tuple, dict[str, float]] = {}
    for alpha, weight, docs in grid:
        with feedback_settings(weight, docs):
            scores[(alpha, weight, docs)] = {n: ndcg_at_10(*loaded[n], alpha) for n in SETS}
        row = scores[(alpha, weight, docs)]
        print(
            f"{alpha:>5} {weight:>6} {docs:>4} "
            + " ".join(f"{row[n]:>9.4f}" for n in SETS)
            + f" {np.mean(list(row.values())):>7.4f}"
            + ("  (default)" if (alpha, weight, docs) == default else "")
        )
    print("\nleave one set out: the best setting on the other four, and its change on the one left out")
    changes = leave_one_out(scores, default)
    for held, (chosen, change) in changes.items():
        print(f"  {held:<10} alpha {chosen[0]} weight {chosen[1]} docs {chosen[2]}: {change:+.4f}")
    print(f"  mean change on the set left out: {np.mean([c for _, c in changes.values()]):+.4f}")
    for collection, _, _ in loaded.values():
        collection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
