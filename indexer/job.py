"""The batch indexing job: walk, load, upsert in atomic batches, prune, report.

Each batch is one atomic commit, so a killed job keeps every finished batch;
running the same command again skips unchanged documents (content hash) and
finishes the rest, ending in the same state as an uninterrupted run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

from tqdm.auto import tqdm

from indexer.batches import DEFAULT_BATCH_DOCS, MAX_BATCH_CHARS, BatchWriter
from indexer.loaders import DEFAULT_MAX_BYTES, FieldMap, LoadError, load_path, shown_path
from indexer.loaders.ocr import OcrProgress, set_ocr_progress
from indexer.runs import IndexReport, Sightings, walk_targets
from retriever import Collection, WriteReport
from retriever.documents import Document
from retriever.errors import BadInputError
from retriever.sharding import ShardedCollection

__all__ = ["DEFAULT_BATCH_DOCS", "ENGINES", "MAX_BATCH_CHARS", "IndexReport", "index_paths"]

ENGINES = ("local", "ray")


def index_paths(
    collection: Collection | ShardedCollection,
    paths: Sequence[str | Path],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    fields: FieldMap = FieldMap(),
    prune: bool = False,
    batch_docs: int = DEFAULT_BATCH_DOCS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: bool = True,
    engine: str = "local",
    ray_address: str | None = None,
    workers: int | None = None,
) -> IndexReport:
    """Index files, directories and BEIR corpora into ``collection`` (a ``ShardedCollection`` too: each batch
    is routed by id and its shards written side by side, ``retriever.sharding``; not with ``engine="ray"``).

    Args:
        paths: Files or directories; a directory holding ``corpus.jsonl`` is a
            BEIR corpus.
        include: Glob patterns a file must match (default: every file; what
            each one is decides how it is read, see ``indexer.loaders.load_path``).
        exclude: Glob patterns that leave a file out.
        fields: Record fields holding id, title and text in JSONL/CSV.
        prune: Remove documents whose source lies under ``paths`` but was not
            seen in this run (deleted files, vanished records). Sources that
            failed to load are not pruned.
        batch_docs: Most documents per atomic commit (default 128; a batch
            also holds at most ``MAX_BATCH_CHARS`` of text, unless one
            document alone is longer: see ``indexer.batches``).
        max_bytes: Single-document files (and archive members) larger than
            this are skipped (default 50 MB).

    Returns:
        The run's report: what was written, what failed (``skipped``) and what
        was passed over for what it is (``not_read``: hidden names, formats
        nothing here reads, empty files), the last two grouped by type and
        reason in ``summary()`` and ``to_dict()``.
        progress: Show a progress bar on stderr.
        engine: ``"local"`` (default: this process) or ``"ray"`` (Ray Data and an
            actor pool, see ``indexer.ray_job``; needs ``pip install 'semsearch[ray]'``).
        ray_address: With ``engine="ray"``, a running cluster to join; ``None``
            starts Ray on this machine.
        workers: With ``engine="ray"``, actors embedding in parallel (default:
            the cores of this machine, or the CPUs of the cluster).
    """
    if engine not in ENGINES:
        raise BadInputError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    options = dict(
        include=include,
        exclude=exclude,
        fields=fields,
        prune=prune,
        batch_docs=batch_docs,
        max_bytes=max_bytes,
        progress=progress,
    )
    if engine == "ray" and isinstance(collection, ShardedCollection):
        raise BadInputError("the Ray engine does not write sharded collections yet; use engine='local'")
    if engine == "ray":
        from indexer.ray_job import index_paths_ray  # Ray is an optional extra

        return index_paths_ray(collection, paths, address=ray_address, workers=workers, **options)
    return _index_here(collection, paths, **options)


def _index_here(
    collection: Collection,
    paths: Sequence[str | Path],
    *,
    include: Sequence[str],
    exclude: Sequence[str],
    fields: FieldMap,
    prune: bool,
    batch_docs: int,
    max_bytes: int,
    progress: bool,
) -> IndexReport:
    """``index_paths`` in this process: read the files in walk order, upsert in batches, prune."""
    if batch_docs < 1:
        raise BadInputError(f"batch size must be at least 1, got {batch_docs}")
    started = time.perf_counter()
    report = IndexReport()
    roots = [Path(p).expanduser() for p in paths]
    sightings = Sightings()
    targets = walk_targets(roots, include, exclude, report, sightings)
    bar = tqdm(unit="doc", desc="indexing", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    batch = _upserts(collection, report, bar, batch_docs)
    previous_hook = set_ocr_progress(_ocr_postfix(bar) if progress else None)
    try:
        for _root, path in targets:
            report.files += 1
            bar.set_postfix(file=f"{report.files}/{len(targets)}", refresh=False)
            for item in _read(path, fields, max_bytes, sightings):
                if isinstance(item, LoadError):
                    report.add_error(item)
                    bar.update(1)
                else:
                    batch.add(item)
        batch.flush()
        if prune:
            report.written.merge(sightings.prune(collection, roots))
    finally:
        set_ocr_progress(previous_hook)
        bar.close()
        report.seconds = time.perf_counter() - started
    return report


def _ocr_postfix(bar: tqdm) -> Callable[[OcrProgress], None]:
    """A hook showing a scan's OCR progress (pages done of its total, pages per second) on the run's bar."""

    def show(step: OcrProgress) -> None:
        bar.set_postfix(ocr=f"{step.done}/{step.total} pages, {step.pages_per_second:.1f}/s", refresh=True)

    return show


def _read(path: Path, fields: FieldMap, max_bytes: int, sightings: Sightings) -> Iterator[Document | LoadError]:
    """The documents of ``path`` not read before in this run, and an error for each one left out.

    A file that fails in any way while it is read is that file's error: what
    it gave until then stays, and ``prune`` spares its documents.
    """
    try:
        for item in load_path(path, fields, max_bytes):
            if isinstance(item, LoadError):
                sightings.load_failed(item)
                yield item
                continue
            duplicate = sightings.claim(item.id, item.metadata.get("source", str(path)))
            yield item if duplicate is None else duplicate
    except Exception as exc:  # noqa: BLE001 - a file that fails in any way is that file's error
        sightings.failed.add(shown_path(path))
        yield LoadError(shown_path(path), f"cannot load: {type(exc).__name__}: {exc}")


def _upserts(collection: Collection, report: IndexReport, bar: tqdm, max_docs: int) -> BatchWriter:
    """A batch writer that upserts into ``collection``, recording in ``report`` and moving ``bar``."""

    def written(docs: list[Document], result: WriteReport) -> None:
        report.written.merge(result)
        bar.update(len(docs))
        bar.set_postfix(chunks=report.written.chunks, skipped=len(report.skipped), refresh=False)

    def refused(doc: Document, reason: str) -> None:
        source = doc.metadata.get("source", doc.id) if isinstance(doc.metadata, dict) else doc.id
        report.skipped.append(LoadError(shown_path(str(source)), reason))
        bar.update(1)

    return BatchWriter(collection.upsert, written, refused, max_docs=max_docs)
