"""One pass of the folder watcher: files read again, what changed written in batches, what is gone deleted.

A pass reads files through ``load_path`` into the one batch writer
(``indexer.batches.BatchWriter``): each batch is classified against the
catalog first (content hash), so a document whose content is stored already
is neither embedded nor committed, and the rest is upserted in one commit.
When the reading is done, the documents that the pass's *owners* held and
that it did not read again are deleted in one commit: the documents of a
deleted file, the records gone from a changed CSV or JSONL file, the files
of a folder moved away.

A document belongs to the file named by its ``metadata["source"]`` (the part
before ``::`` for a member of an archive, ``source_file``), or by its
``metadata["archive"]``; a pass checks the documents of the files it read
and of the folders (or vanished paths) it was given, and everything below
those (``owned_ids``, found through the catalog's indexed metadata). A file that failed to load, wholly or in part, and
a folder the walk could not read keep their documents, as ``semsearch index
--prune`` keeps them.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from indexer.batches import DEFAULT_BATCH_DOCS, BatchWriter
from indexer.loaders import DEFAULT_MAX_BYTES, FieldMap, LoadError, load_path, shown_path
from indexer.runs import IndexReport, Sightings
from retriever import Collection, WriteReport
from retriever.documents import Document
from retriever.filters import MAX_STRING_CHARS

MEMBER_SEPARATOR = "::"  # "archive::member": a member's source names its archive first
DELETE_BATCH_IDS = 10_000  # ids per delete commit
MAX_IN = 500  # paths per $in list of a catalog look-up (the filter language allows 1,000)


@dataclass(frozen=True)
class SyncOptions:
    """What the watcher reads and how it writes, as ``semsearch index`` takes them.

    Attributes:
        include: Glob patterns a file must match (default: every file).
        exclude: Glob patterns that leave a file out (default none).
        fields: Record fields holding id, title and text in JSONL/CSV (default: automatic).
        max_bytes: Larger single-document files are skipped (default 50 MB).
        batch_docs: Most documents per commit (default 128).
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    fields: FieldMap = FieldMap()
    max_bytes: int = DEFAULT_MAX_BYTES
    batch_docs: int = DEFAULT_BATCH_DOCS


def source_file(source: str) -> str:
    """The file a document's ``metadata["source"]`` names: itself, or the archive of ``archive::member``."""
    return source.split(MEMBER_SEPARATOR, 1)[0]


def containers(source: str) -> list[str]:
    """``source`` and each archive it lies in, outermost first: ``a.zip::b.tar::c`` gives ``a.zip``,
    ``a.zip::b.tar`` and ``a.zip::b.tar::c``."""
    parts = source.split(MEMBER_SEPARATOR)
    return [MEMBER_SEPARATOR.join(parts[: i + 1]) for i in range(len(parts))]


def owned_by(source: str, owners: set[str]) -> bool:
    """Whether the file of ``source`` is one of ``owners`` or lies below one of them."""
    path = source_file(source)
    while True:
        if path in owners:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def owned_ids(collection: Collection, files: Iterable[str] = (), folders: Iterable[str] = ()) -> dict[str, str]:
    """``{id: source}`` of the stored documents of ``files``, and of ``folders`` and everything below them.

    Args:
        files: Absolute real paths of files: their documents are found by
            indexed look-ups of the metadata (``source``, or ``archive`` for a
            member), whatever the size of the collection; an archive's
            members' own archives by a scan of the catalog's sources.
        folders: Absolute real paths of folders: found as the files are, and
            by one scan of the catalog's sources for everything below them.
    """
    wanted = {str(path).rstrip(os.sep) or os.sep for path in [*files, *folders]}
    below = {str(path).rstrip(os.sep) or os.sep for path in folders}
    short = sorted(name for name in wanted if len(name) < MAX_STRING_CHARS)
    found: dict[str, str] = {}
    for path in (wanted - set(short)) | ({os.path.commonpath(sorted(below))} if below else set()):
        found |= collection.catalog.ids_by_source(path)  # a prefix scan: below folders, and paths too long to look up
    keys = [_keys_of(collection.catalog, short[start : start + MAX_IN]) for start in range(0, len(short), MAX_IN)]
    rows = list(collection.catalog.by_keys(np.unique(np.concatenate(keys)).tolist()).values()) if keys else []
    found |= {row.id: row.meta["source"] for row in rows if isinstance(row.meta.get("source"), str)}
    members = {
        row.id: row.meta["archive"]
        for row in rows
        if isinstance(row.meta.get("archive"), str) and row.meta["archive"] in wanted
    }
    for archive in set(members.values()):  # members of archives inside it: their "archive" is the inner one
        found |= collection.catalog.ids_by_source(archive + MEMBER_SEPARATOR)
    return {doc_id: source for doc_id, source in found.items() if doc_id in members or owned_by(source, wanted)}


def _keys_of(catalog, paths: list[str]) -> np.ndarray:
    """Keys of the documents whose ``source`` or ``archive`` is one of ``paths`` (indexed look-ups)."""
    return catalog.matching_keys({"$or": [{"source": {"$in": paths}}, {"archive": {"$in": paths}}]})


def upsert_changed(collection: Collection, docs: Sequence[Document]) -> WriteReport:
    """Upsert the documents whose content differs from the stored one; the others are reported unchanged.

    Classifying first keeps a batch of unchanged documents from taking the
    write lock at all.

    Raises:
        BadInputError: A document is bad, or an id appears twice (the batch writer then writes them one by one).
    """
    plan = collection.classify(docs)
    changed = [doc for doc, kind in plan if kind != "unchanged"]
    report = collection.upsert(changed) if changed else WriteReport()
    report.unchanged += [doc.id for doc, kind in plan if kind == "unchanged"]
    return report


class SyncPass:
    """Files read again into ``collection`` in batches, then what their owners no longer hold deleted.

    Args:
        collection: The collection written.
        options: What to read and the batch size.
        stop: When set, reading stops before the next file and the pass is abandoned (``read`` returns False).
        on_write: Told each commit that changed something (its ``WriteReport``).

    Attributes:
        report: What the pass did so far: files read, ids written and deleted, what was skipped.
    """

    def __init__(
        self,
        collection: Collection,
        options: SyncOptions,
        stop: threading.Event | None = None,
        on_write: Callable[[WriteReport], None] | None = None,
    ) -> None:
        self.collection = collection
        self.options = options
        self.stop = stop or threading.Event()
        self.on_write = on_write
        self.report = IndexReport()
        self.sightings = Sightings()
        self.batches = BatchWriter(self._upsert, self._written, self._refused, max_docs=options.batch_docs)
        self.started = time.perf_counter()

    def read(self, paths: Iterable[Path]) -> bool:
        """Read each of ``paths`` (a file or a BEIR folder) and queue its documents; False when stopped first.

        What cannot be read goes to ``report.skipped``, what is passed over for
        what it is (an empty file, a format nothing reads) to ``report.not_read``;
        either way the file's stored documents stay.
        """
        for path in paths:
            if self.stop.is_set():
                return False
            self.report.files += 1
            for item in self._items(path):
                if isinstance(item, LoadError):
                    self.report.add_error(item)
                else:
                    self.batches.add(item)
        return True

    def skipped(self, errors: Iterable[LoadError]) -> None:
        """Report what a walk could not read; the folders among them keep their documents."""
        for error in errors:
            self.report.skipped.append(error)
            self.sightings.walk_failed(error)

    def finish(self, files: Iterable[str] = (), folders: Iterable[str] = ()) -> IndexReport:
        """Write the last batch, then delete the documents of ``files`` and ``folders`` (see ``owned_ids``)
        that this pass did not read again.

        Returns:
            The pass's report (``written.deleted`` holds the deleted ids).
        """
        self.batches.flush()
        stale = self.stale(owned_ids(self.collection, files, folders))
        for start in range(0, len(stale), DELETE_BATCH_IDS):
            self._note(self.collection.delete(stale[start : start + DELETE_BATCH_IDS]))
        self.report.seconds = time.perf_counter() - self.started
        return self.report

    def stale(self, owned: Mapping[str, str]) -> list[str]:
        """The ids of ``owned`` (``{id: source}``) not read in this pass, but those of files (or archives) that
        failed or were passed over, and those below folders the walk could not read."""
        failed = self.sightings.failed
        failed_folders = tuple(self.sightings.failed_folders)
        return sorted(
            doc_id
            for doc_id, source in owned.items()
            if doc_id not in self.sightings.seen
            and failed.isdisjoint(containers(shown_path(source)))
            and not shown_path(source).startswith(failed_folders)
        )

    def _items(self, path: Path) -> Iterator[Document | LoadError]:
        """The documents of ``path`` not read before in this pass, and an error for each one left out.

        A file that fails in any way while it is read is that file's error;
        what it gave until then stays, and its stored documents are kept.
        """
        try:
            for item in load_path(path, self.options.fields, self.options.max_bytes):
                if isinstance(item, LoadError):
                    self.sightings.load_failed(item)
                    yield item
                    continue
                source = item.metadata.get("source", str(path)) if isinstance(item.metadata, dict) else str(path)
                duplicate = self.sightings.claim(item.id, source)
                yield item if duplicate is None else duplicate
        except Exception as exc:  # noqa: BLE001 - a file that fails in any way is that file's error
            self.sightings.failed.add(shown_path(os.path.realpath(path)))  # as the sources name it
            yield LoadError(shown_path(path), f"cannot load: {type(exc).__name__}: {exc}")

    def _upsert(self, docs: list[Document]) -> WriteReport:
        return upsert_changed(self.collection, docs)

    def _written(self, _docs: list[Document], result: WriteReport) -> None:
        self._note(result)

    def _note(self, result: WriteReport) -> None:
        self.report.written.merge(result)
        if self.on_write is not None and (result.added or result.updated or result.deleted):
            self.on_write(result)

    def _refused(self, doc: Document, reason: str) -> None:
        source = doc.metadata.get("source", doc.id) if isinstance(doc.metadata, dict) else doc.id
        error = LoadError(shown_path(str(source)), reason)
        self.sightings.load_failed(error)  # its stored version stays
        self.report.add_error(error)
