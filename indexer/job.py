"""The batch indexing job: walk, load, upsert in atomic batches, prune, report.

Each batch is one atomic commit, so a killed job keeps every finished batch;
running the same command again skips unchanged documents (content hash) and
finishes the rest, ending in the same state as an uninterrupted run.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from tqdm.auto import tqdm

from indexer.loaders import DEFAULT_MAX_BYTES, FieldMap, LoadError, load_path, shown_path, walk
from retriever import Collection, WriteReport
from retriever.documents import Document
from retriever.errors import BadInputError

DEFAULT_BATCH_DOCS = 128
ENGINES = ("local", "ray")
MAX_BATCH_CHARS = 400_000  # about 400 chunks: bounds memory and keeps progress moving
# What one bad document can raise; it is skipped with its reason. Other errors
# (the collection locked or corrupt) stop the run: every document would fail.
DOCUMENT_ERRORS = (ValueError, TypeError, RecursionError, OverflowError)  # BadInputError is a ValueError


@dataclass
class IndexReport:
    """What an indexing run did.

    Attributes:
        files: Files (or BEIR corpora) read.
        written: Added, updated, unchanged and deleted ids, and chunks embedded.
        skipped: Files, records or documents left out, each with its reason.
        seconds: Wall time of the run.
    """

    files: int = 0
    written: WriteReport = field(default_factory=WriteReport)
    skipped: list[LoadError] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def indexed(self) -> int:
        return len(self.written.added) + len(self.written.updated)

    def summary(self) -> str:
        """A human summary: counts, speed, then one line per skipped item."""
        w = self.written
        rate = self.indexed / self.seconds if self.seconds > 0 else 0.0
        lines = [
            f"indexed {self.indexed} document(s) from {self.files} file(s): {len(w.added)} new, "
            f"{len(w.updated)} updated, {len(w.unchanged)} unchanged, {len(w.deleted)} removed; "
            f"{w.chunks} chunk(s) embedded in {self.seconds:.1f} s ({rate:.1f} docs/s)"
        ]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)}:")
            lines += [f"  {error.source}: {error.reason}" for error in self.skipped]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        w = self.written
        return {
            "files": self.files,
            "added": len(w.added),
            "updated": len(w.updated),
            "unchanged": len(w.unchanged),
            "deleted": len(w.deleted),
            "chunks": w.chunks,
            "seconds": round(self.seconds, 3),
            "skipped": [{"source": e.source, "reason": e.reason} for e in self.skipped],
        }


def index_paths(
    collection: Collection,
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
    """Index files, directories and BEIR corpora into ``collection``.

    Args:
        paths: Files or directories; a directory holding ``corpus.jsonl`` is a
            BEIR corpus.
        include: Glob patterns a file must match (default: every supported file).
        exclude: Glob patterns that leave a file out.
        fields: Record fields holding id, title and text in JSONL/CSV.
        prune: Remove documents whose source lies under ``paths`` but was not
            seen in this run (deleted files, vanished records). Sources that
            failed to load are not pruned.
        batch_docs: Most documents per atomic commit (default 128; a batch
            also commits once it holds ``MAX_BATCH_CHARS`` of text).
        max_bytes: Files larger than this are skipped (default 50 MB).
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
    if engine == "ray":
        from indexer.ray_job import index_paths_ray  # Ray is an optional extra

        return index_paths_ray(
            collection, paths, include=include, exclude=exclude, fields=fields, prune=prune,
            batch_docs=batch_docs, max_bytes=max_bytes, progress=progress, address=ray_address, workers=workers,
        )  # fmt: skip
    if batch_docs < 1:
        raise BadInputError(f"batch size must be at least 1, got {batch_docs}")
    started = time.perf_counter()
    report = IndexReport()
    roots = [Path(p).expanduser() for p in paths]
    targets = list(walk(roots, include, exclude))
    seen: dict[str, str] = {}  # id -> source that produced it in this run
    failed_sources: set[str] = set()
    bar = tqdm(unit="doc", desc="indexing", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    batch = _Batch(collection, report, bar, batch_docs)
    try:
        for _root, path in targets:
            report.files += 1
            bar.set_postfix(file=f"{report.files}/{len(targets)}", refresh=False)
            try:
                for item in load_path(path, fields, max_bytes):
                    if isinstance(item, LoadError):
                        batch.skip(item)
                        failed_sources.add(_source_of(item))
                        continue
                    source = item.metadata.get("source", str(path))
                    if item.id in seen:
                        batch.skip(LoadError(source, f"duplicate id {item.id!r} (already read from {seen[item.id]})"))
                        continue
                    seen[item.id] = source
                    batch.add(item)
            except Exception as exc:  # noqa: BLE001 - a file that fails in any way is that file's error
                batch.skip(LoadError(shown_path(path), f"cannot load: {type(exc).__name__}: {exc}"))
                failed_sources.add(shown_path(path))
        batch.flush()
        if prune:
            report.written.merge(_prune(collection, roots, seen, failed_sources))
    finally:
        bar.close()
        report.seconds = time.perf_counter() - started
    return report


class _Batch:
    """Documents waiting for one atomic commit; flushes at ``max_docs`` or ``MAX_BATCH_CHARS``."""

    def __init__(self, collection: Collection, report: IndexReport, bar: tqdm, max_docs: int):
        self.collection, self.report, self.bar, self.max_docs = collection, report, bar, max_docs
        self.docs: list[Document] = []
        self.chars = 0

    def add(self, doc: Document) -> None:
        self.docs.append(doc)
        self.chars += len(doc.text)
        if len(self.docs) >= self.max_docs or self.chars >= MAX_BATCH_CHARS:
            self.flush()

    def skip(self, error: LoadError) -> None:
        self.report.skipped.append(error)
        self.bar.update(1)

    def flush(self) -> None:
        """Upsert the batch in one commit; if a document is bad, retry one by one."""
        if not self.docs:
            return
        try:
            self.report.written.merge(self.collection.upsert(self.docs))
        except DOCUMENT_ERRORS:
            for doc in self.docs:
                try:
                    self.report.written.merge(self.collection.upsert([doc]))
                except DOCUMENT_ERRORS as exc:
                    source = doc.metadata.get("source", doc.id) if isinstance(doc.metadata, dict) else doc.id
                    reason = str(exc) if isinstance(exc, BadInputError) else f"{type(exc).__name__}: {exc}"
                    self.report.skipped.append(LoadError(shown_path(str(source)), reason))
        self.bar.update(len(self.docs))
        self.bar.set_postfix(chunks=self.report.written.chunks, skipped=len(self.report.skipped), refresh=False)
        self.docs, self.chars = [], 0


def _prune(
    collection: Collection, roots: Iterable[Path], seen: dict[str, str], failed_sources: set[str]
) -> WriteReport:
    """Delete documents from under ``roots`` that this run did not see."""
    gone: list[str] = []
    for root in roots:
        root = root.resolve()
        prefix = str(root) + ("/" if root.is_dir() else "")
        for doc_id, source in collection.catalog.ids_by_source(prefix).items():
            if root.is_file() and source != str(root):
                continue
            if doc_id not in seen and source not in failed_sources:
                gone.append(doc_id)
    return collection.delete(gone) if gone else WriteReport()


def _source_of(error: LoadError) -> str:
    """The file behind a load error (``path`` or ``path:line``)."""
    head, _, tail = error.source.rpartition(":")
    return head if head and tail.isdigit() else error.source
