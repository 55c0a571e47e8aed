"""The rows of the Ray job: one per document or load error, from the readers to the driver.

A row is a dict of ``ROW_SCHEMA``'s columns. ``kind`` says what became of it:
``"doc"`` (read), ``"error"`` (skipped: ``reason`` says why), ``"unchanged"``,
``"metadata"`` (a catalog-only change, text kept) or ``"staged"`` (in the
staged segment ``folder``, which holds ``folder_docs`` rows). ``file`` is the
input's index in the walk; ``source`` is where the document came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from indexer.loaders import FieldMap, LoadError, load_path
from retriever.documents import Document

ROW_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("metadata", pa.string()),
        ("source", pa.string()),
        ("reason", pa.string()),
        ("file", pa.int64()),
        ("folder", pa.string()),
        ("folder_docs", pa.int64()),
    ]
)


def new_row(kind: str, file: int, source: str, **values: Any) -> dict[str, Any]:
    """A row of ``kind``: ``values`` over empty strings and ``folder_docs=0``."""
    row = {name: "" for name in ROW_SCHEMA.names}
    return row | {"kind": kind, "file": file, "source": source, "folder_docs": 0} | values


def document_row(doc: Document, file: int, source: str) -> dict[str, Any]:
    """The ``"doc"`` row of a document read from input ``file`` (metadata as JSON text)."""
    metadata = json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True)
    return new_row("doc", file, source, id=doc.id, title=doc.title, text=doc.text, metadata=metadata)


def row_document(row: dict[str, Any]) -> Document:
    """The document a ``"doc"`` (or ``"metadata"``) row carries."""
    return Document(row["id"], row["text"], row["title"], json.loads(row["metadata"]))


def load_files(batch: "pa.Table", fields: FieldMap, max_bytes: int, block_rows: int) -> Iterator["pa.Table"]:
    """Rows of inputs (a ``map_batches`` generator): a ``"doc"`` or ``"error"`` row per item of ``load_path``.

    Yields tables of at most ``block_rows`` rows, so that a large input (a
    BEIR corpus) streams rather than sits in memory whole.

    Args:
        batch: Columns ``file`` (index in the walk) and ``path`` (file or BEIR directory).
    """
    rows = []
    for item in batch.to_pylist():
        for loaded in load_path(Path(item["path"]), fields, max_bytes):
            if isinstance(loaded, LoadError):
                rows.append(new_row("error", item["file"], loaded.source, reason=loaded.reason))
            else:
                rows.append(document_row(loaded, item["file"], loaded.metadata.get("source", item["path"])))
            if len(rows) == block_rows:
                yield pa.Table.from_pylist(rows, schema=ROW_SCHEMA)
                rows = []
    if rows:
        yield pa.Table.from_pylist(rows, schema=ROW_SCHEMA)
