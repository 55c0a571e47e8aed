"""The Ray job's driver side: account for result rows in walk order, commit staged segments in groups."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from indexer.loaders import FieldMap, LoadError, load_path
from indexer.ray_rows import row_document
from indexer.runs import IndexReport, Sightings
from retriever import Collection, WriteReport
from retriever.documents import Document


@dataclass
class Committer:
    """Checks rows in walk order, as the local job reads them, and commits staged segments in groups.

    Attributes:
        collection: The collection to commit into.
        report: The run's report, filled in as rows arrive and groups commit.
        fields, max_bytes, targets: The run's inputs, to read a document again
            (see ``_restage_overridden``).
        group_docs: Staged documents (or catalog-only updates) per commit.
        sightings: The ids read and the files that failed, for duplicates and ``prune``.
    """

    collection: Collection
    report: IndexReport
    fields: FieldMap
    max_bytes: int
    targets: list[Path]
    group_docs: int
    sightings: Sightings = field(default_factory=Sightings)
    first_file: dict[str, int] = field(default_factory=dict)  # id -> input it came from
    unchanged: list[str] = field(default_factory=list)
    metadata: list[Document] = field(default_factory=list)
    folders: dict[str, int] = field(default_factory=dict)  # staged folder -> rows of it not seen yet
    ready: list[str] = field(default_factory=list)  # staged folders whose every row was seen
    ready_docs: int = 0
    overridden: dict[str, dict[str, int]] = field(default_factory=dict)  # folder -> {id: input of the copy that wins}

    def take(self, row: dict[str, Any]) -> None:
        """Account for one result row; commit a group once enough staged documents are ready."""
        kind, doc_id, source = row["kind"], row["id"], row["source"]
        if kind == "error" and not doc_id:  # a file or record that did not load
            self.report.skipped.append(LoadError(source, row["reason"]))
            self.sightings.load_failed(self.report.skipped[-1])
            return
        if kind == "staged":
            self._count_staged(row["folder"], row["folder_docs"])
        duplicate = self.sightings.claim(doc_id, source)
        if duplicate is not None:
            self.report.skipped.append(duplicate)
            if kind == "staged":  # its segment carries this copy: the first one is staged again after it
                self.overridden.setdefault(row["folder"], {})[doc_id] = self.first_file[doc_id]
            return
        self.first_file[doc_id] = row["file"]
        if kind == "error":  # a document the collection refused, as in the local job
            self.report.skipped.append(LoadError(source, row["reason"]))
        elif kind == "unchanged":
            self.unchanged.append(doc_id)
        elif kind == "metadata":
            self.metadata.append(row_document(row))
        if self.ready_docs >= self.group_docs or len(self.metadata) >= self.group_docs:
            self.commit()

    def _count_staged(self, folder: str, docs: int) -> None:
        left = self.folders.get(folder, docs) - 1
        if left:
            self.folders[folder] = left
            return
        self.folders.pop(folder, None)
        self.ready.append(folder)
        self.ready_docs += docs

    def commit(self) -> None:
        """Publish the ready staged segments in one atomic commit (catalog-only updates in another)."""
        written = self.report.written
        written.unchanged += self.unchanged
        self.unchanged = []
        if self.metadata:
            written.merge(self.collection.upsert(self.metadata))
            self.metadata = []
        if self.ready:
            folders = self.ready + self._restage_overridden()
            written.merge(self.collection.commit_prepared(folders))
            self.ready, self.ready_docs = [], 0

    def finish(self) -> None:
        """Commit what is left, and count each id once (see ``tidy``).

        Raises:
            AssertionError: Rows of a staged segment never arrived.
        """
        self.commit()
        tidy(self.report.written)
        assert not self.folders, f"rows of staged segments never arrived: {sorted(self.folders)}"

    def _restage_overridden(self) -> list[str]:
        """Stage again, on the driver, the first copies of ids whose later duplicates are staged.

        ``commit_prepared`` lets a later segment win, so the first copy, read
        again from its input, goes last. Rare: only duplicate ids need it.
        """
        wanted: dict[int, set[str]] = defaultdict(set)
        for folder in self.ready:
            for doc_id, file in self.overridden.pop(folder, {}).items():
                wanted[file].add(doc_id)
        docs: dict[str, Document] = {}
        for file, ids in wanted.items():
            for item in load_path(self.targets[file], self.fields, self.max_bytes):
                if isinstance(item, Document) and item.id in ids and item.id not in docs:
                    docs[item.id] = item
        return [str(self.collection.prepare(list(docs.values())))] if docs else []


def tidy(written: WriteReport) -> None:
    """Each id once, and not as unchanged when it was written: duplicate ids restaged (see ``Committer``) count once."""
    written.added, written.updated = list(dict.fromkeys(written.added)), list(dict.fromkeys(written.updated))
    done = set(written.added) | set(written.updated)
    written.unchanged = [i for i in dict.fromkeys(written.unchanged) if i not in done]
