"""``semsearch eval``: build or reuse a collection for a BEIR dataset, run its queries, score them."""

from __future__ import annotations

import re
import sys
import time
import warnings
from pathlib import Path

from indexer.job import index_paths
from retriever.collection import DEFAULT_MODE, Collection
from retriever.encoding.embedder import Embedder, InputTooLongWarning
from retriever.errors import FormatVersionError
from retriever.evaluation import DEPTH, METRICS, evaluate_run, load_beir, run_queries
from retriever.search.fusion import DEFAULT_ALPHA, DEFAULT_FUSION
from retriever.storage.manifest import MANIFEST
from retriever.storage.upgrade import upgrade

EVAL_ROOT = Path("~/.cache/semsearch/eval").expanduser()


def default_collection_dir(dataset_dir: Path, embedder: Embedder) -> Path:
    """``~/.cache/semsearch/eval/<dataset>-<model weights hash>``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", dataset_dir.resolve().name)
    return EVAL_ROOT / f"{slug}-{embedder.weights_sha256[:12]}"


def evaluate(
    dataset_dir: str | Path,
    *,
    split: str = "test",
    mode: str = DEFAULT_MODE,
    model: str | None = None,
    collection_dir: str | Path | None = None,
    fusion: str = DEFAULT_FUSION,
    alpha: float = DEFAULT_ALPHA,
    progress: bool = True,
) -> dict:
    """Evaluate one mode on one dataset split.

    The collection is built on first use and reused afterwards; a rerun
    re-indexes only corpus records that changed (and prunes vanished ones).

    Returns:
        ``{"dataset", "split", "mode", "model", "backend", "query_backend",
        "ndcg@10", "mrr@10", "recall@100", "map@100", "queries", "seconds"}``;
        the backends are the run-time encoder's (passages indexed in this
        run, and queries).
    """
    started = time.perf_counter()
    dataset = load_beir(dataset_dir, split)
    if collection_dir is None or not (Path(collection_dir) / MANIFEST).exists():
        embedder = Embedder(model)
        target = Path(collection_dir) if collection_dir else default_collection_dir(dataset.root, embedder)
        try:
            collection = Collection.open_or_create(target, embedder)
        except FormatVersionError:  # a cached collection from an older semsearch: convert, keep its vectors
            upgrade(target, progress=progress)
            collection = Collection.open(target, embedder)
    else:
        collection = Collection.open(collection_dir, model)
    with collection:
        index_paths(collection, [dataset.root], prune=True, progress=progress)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", InputTooLongWarning)
            run = run_queries(
                lambda text: [hit.id for hit in collection.search(text, k=DEPTH, mode=mode, fusion=fusion, alpha=alpha)],
                dataset.queries,
                progress=progress,
            )
        long_queries = sum(issubclass(w.category, InputTooLongWarning) for w in caught)
        if long_queries:
            print(
                f"semsearch: note: {long_queries} of {len(dataset.queries)} queries are longer than the model's "
                "window; the dense side embedded only their first window",
                file=sys.stderr,
            )
        model_name = collection.manifest.model["name"]
        encoder = collection.embedder.info()
    scores = evaluate_run(run, dataset.qrels)
    return {
        "dataset": dataset.name,
        "split": split,
        "mode": mode,
        "model": model_name,
        "backend": encoder["backend"],
        "query_backend": encoder["query_backend"],
        **{metric: round(scores[metric], 4) for metric in METRICS},
        "queries": len(dataset.queries),
        "seconds": round(time.perf_counter() - started, 1),
    }


def format_table(results: list[dict]) -> str:
    """A plain-text table of evaluation results, one row per result."""
    header = f"{'dataset':<12} {'mode':<7} " + " ".join(f"{m:>10}" for m in METRICS) + f" {'queries':>8} {'seconds':>8}"
    rows = [
        f"{r['dataset']:<12} {r['mode']:<7} " + " ".join(f"{r[m]:>10.4f}" for m in METRICS)
        + f" {r['queries']:>8} {r['seconds']:>8.1f}"
        for r in results
    ]
    return "\n".join([header, *rows])
