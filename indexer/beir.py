"""A BEIR dataset as a collection: build or reuse one for the corpus, run the split's queries, score them.

``semsearch eval``, the training recipes and ``benchmarks/quality.py`` all
measure through ``evaluate``, so every quality figure comes from one code
path. The metrics themselves live in ``retriever.evaluation``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Iterator

from indexer.job import index_paths
from retriever.collection import DEFAULT_MODE, Collection
from retriever.encoding.embedder import Embedder, InputTooLongWarning
from retriever.errors import FormatVersionError
from retriever.evaluation import DEPTH, METRICS, BeirDataset, Run, evaluate_run, load_beir, run_queries
from retriever.search.fusion import DEFAULT_ALPHA, DEFAULT_FUSION
from retriever.storage.atomic import atomic_write_text
from retriever.storage.manifest import MANIFEST
from retriever.upgrading import upgrade

#: Where ``evaluate`` keeps a dataset's collection when given none (read at call time).
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
    feedback: bool = True,
    index_codes: str | None = None,
    progress: bool = True,
) -> dict:
    """Evaluate one mode on one dataset split.

    The collection is built on first use and reused afterwards; a rerun
    re-indexes only corpus records that changed (and prunes vanished ones).

    Args:
        dataset_dir: A BEIR dataset (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).
        split: The qrels split scored (default ``"test"``).
        mode: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (default ``DEFAULT_MODE``).
        model: Model of a new collection (default: the packaged all-MiniLM-L6-v2).
        collection_dir: The collection to build or reuse (default: ``default_collection_dir``).
        fusion, alpha, feedback: Hybrid's, as for ``Collection.search``.
        index_codes: Search a copy of the collection whose vector indexes hold these codes
            (``IndexPolicy.codes``; ``"always"`` compresses every segment), kept beside it as
            ``<collection>-codes-<codes>`` and made from a snapshot of it (no re-embedding).
        progress: Show progress bars.

    Returns:
        ``{"dataset", "split", "mode", "model", "backend", "query_backend",
        "ndcg@10", "mrr@10", "recall@100", "map@100", "queries", "seconds"}``;
        the backends are the run-time encoder's (passages indexed in this
        run, and queries).

    Raises:
        BadInputError: the dataset is missing a file or is malformed.
    """
    started = time.perf_counter()
    dataset = load_beir(dataset_dir, split)
    with open_collection(dataset, collection_dir, model, progress) as collection:
        index_paths(collection, [dataset.root], prune=True, progress=progress)
        with _with_codes(collection, index_codes) as searched:
            run = search_queries(
                searched, dataset, mode=mode, fusion=fusion, alpha=alpha, progress=progress, feedback=feedback
            )
        model_name = collection.model["name"]
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


@contextlib.contextmanager
def _with_codes(collection: Collection, index_codes: str | None) -> Iterator[Collection]:
    """``collection`` itself, or its copy ``<root>-codes-<codes>`` whose indexes hold ``index_codes``: a snapshot
    of its current generation, compacted with those codes (made again once the collection has moved on, as
    ``<copy>.source`` records)."""
    if index_codes is None:
        yield collection
        return
    copy = collection.root.with_name(f"{collection.root.name}-codes-{index_codes}")
    source, marker = f"{collection.manifest.uuid}:{collection.reader.current().generation}", copy.with_suffix(".source")
    if copy.exists() and not (marker.is_file() and marker.read_text(encoding="utf-8") == source):
        shutil.rmtree(copy)
    if not copy.exists():
        collection.snapshot(copy)
        with Collection.open(copy, collection.embedder) as fresh:
            fresh.compact(index_codes=index_codes)
        atomic_write_text(marker, source)
    with Collection.open(copy, collection.embedder) as searched:
        yield searched


def open_collection(
    dataset: BeirDataset, collection_dir: str | Path | None, model: str | None, progress: bool
) -> Collection:
    """The collection of ``dataset``: ``collection_dir`` opened, or created (or upgraded) there or in the cache.

    An existing ``collection_dir`` is opened with ``model`` (a different one
    is refused); otherwise the collection is made with ``model``'s embedder,
    under ``default_collection_dir`` when no directory is given. A cached
    collection from an older semsearch is converted, its vectors kept.
    """
    if collection_dir is not None and (Path(collection_dir) / MANIFEST).exists():
        return Collection.open(collection_dir, model)
    embedder = Embedder(model)
    target = Path(collection_dir) if collection_dir else default_collection_dir(dataset.root, embedder)
    try:
        return Collection.open_or_create(target, embedder)
    except FormatVersionError:
        upgrade(target, progress=progress)
        return Collection.open(target, embedder)


def search_queries(
    collection: Collection,
    dataset: BeirDataset,
    *,
    mode: str,
    fusion: str,
    alpha: float,
    progress: bool,
    feedback: bool = True,
) -> Run:
    """The top ``DEPTH`` document ids of every query of ``dataset``, best first.

    A query longer than the model's window is embedded by its first window
    only; how many were is noted once on stderr.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputTooLongWarning)
        run = run_queries(
            lambda text: [
                hit.id
                for hit in collection.search(
                    text, k=DEPTH, mode=mode, fusion=fusion, alpha=alpha, evidence="none", feedback=feedback
                )
            ],
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
    return run
