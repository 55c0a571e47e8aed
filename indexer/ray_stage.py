"""The Ray job's actors: classify documents against the catalog, stage what changed.

Each actor holds one ``Collection`` (and so one model, loaded on the first
document to embed) and writes staged segments with ``Collection.prepare``;
only the driver commits them (``indexer.ray_commit``).
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from indexer.batches import DOCUMENT_ERRORS, BatchWriter
from indexer.ray_rows import ROW_SCHEMA, row_document
from retriever import Collection
from retriever.encoding import threads as thread_settings

WORKER_BATCH_DOCS = 128  # most documents per actor call, and so per staged segment

Row = dict[str, Any]


class StageWorker:
    """An actor of the pool (a ``map_batches`` class): classifies, then stages what changed.

    Documents the catalog holds unchanged pass as ``"unchanged"``, catalog-only
    changes as ``"metadata"``; the rest are written as staged segments of at
    most ``MAX_BATCH_CHARS`` of text each, by the batch writer of the local
    job: a document that ``prepare`` refuses becomes an ``"error"`` row with
    its reason, and the rest of its group is still staged.

    A staged segment is handed to the driver by its name, and is staged for
    the driver (``owner``), so that it lives as long as the driver (which
    commits it), not as long as this actor (which Ray may stop before the
    commit). A killed driver's segments are removed by the next writer.

    Args:
        root: The collection directory.
        owner: ``"<host>-<pid>"`` of the driver.
        threads: Encoder threads for this actor, whichever backend runs (``None``:
            the backend's default, every core this process may use).
    """

    def __init__(self, root: str, owner: str, threads: int | None = None) -> None:
        if threads:  # actors share the cores: without this, each would run a thread per core
            os.environ[thread_settings.THREADS_ENV] = str(threads)  # read by the Embedder, for every runtime
        self.collection = Collection.open(root)
        self.owner = owner

    def __call__(self, batch: "pa.Table") -> "pa.Table":
        rows = batch.to_pylist()
        docs = [row for row in rows if row["kind"] == "doc"]
        changed = []
        for row, change in zip(docs, self._changes(docs)):
            if change == "unchanged":
                row.update(kind="unchanged", text="", title="")
            elif change == "metadata":
                row["kind"] = "metadata"
            else:
                changed.append(row)
        stager = BatchWriter(self._prepare, _staged, _refused, max_docs=WORKER_BATCH_DOCS, chars=_row_chars)
        stager.add_all(changed)
        return pa.Table.from_pylist(rows, schema=ROW_SCHEMA)

    def _changes(self, rows: list[Row]) -> list[str]:
        """What writing each row's document would do (``Collection.classify``), in one catalog lookup.

        A batch the collection refuses (a bad document, or an id twice: later
        copies are the driver's to skip) is classified one row at a time; a
        row refused alone counts as ``"text"``, for staging to report it.
        """
        try:
            return [change for _doc, change in self.collection.classify(map(row_document, rows))]
        except DOCUMENT_ERRORS:
            if len(rows) < 2:
                return ["text"] * len(rows)
        return [self._changes([row])[0] for row in rows]

    def _prepare(self, rows: list[Row]) -> str:
        return str(self.collection.prepare([row_document(row) for row in rows], owner=self.owner))


def _staged(rows: list[Row], folder: str) -> None:
    for row in rows:
        row.update(kind="staged", folder=folder, folder_docs=len(rows), text="", title="")


def _refused(row: Row, reason: str) -> None:
    row.update(kind="error", reason=reason, text="", title="")


def _row_chars(row: Row) -> int:
    return len(row["text"])
