"""Uploaded files into a collection: the browser UI's upload and the HTTP API's ``POST /files``.

Uploads are read by the loaders of ``semsearch index`` and written by its batch
writer; ``AddReport`` says what went in and what was refused, and why.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

_SAFE_NAME = re.compile(r"[^\w.\- ()\[\]+,@]+", re.UNICODE)


@dataclass
class AddReport:
    """What an upload or paste did: the merged ``WriteReport`` numbers and one
    ``(file or id, reason)`` per problem."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    chunks: int = 0
    files: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, written: Any) -> None:
        self.added += written.added
        self.updated += written.updated
        self.unchanged += written.unchanged
        self.chunks += written.chunks

    @property
    def written(self) -> int:
        return len(self.added) + len(self.updated)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.unchanged)} unchanged"
            f" · {self.chunks} chunk{'s' if self.chunks != 1 else ''} embedded"
        )


def safe_file_name(name: str) -> str:
    """An uploaded file's name without folders or odd characters (extension kept)."""
    base = Path(str(name).replace("\\", "/")).name.strip()
    base = _SAFE_NAME.sub("_", base).strip(". ") or "upload"
    return base[:200]


def index_uploads(
    collection: Any,
    files: Sequence[tuple[str, bytes]],
    progress: Callable[[float, str], None] = lambda fraction, text: None,
    max_bytes: int | None = None,
) -> AddReport:
    """Index uploaded files (``(name, content)`` pairs) into ``collection``.

    Each file is written under its own name to a temporary folder and read by
    the same loaders as ``semsearch index``. Single-document files get their
    file name as id and as ``source`` (uploading a new version replaces the old
    one), and an archive's members ``"<name>::<member>"``; JSONL/CSV records
    keep their own ids. What each file is comes from its content and name, as
    for ``semsearch index``. Bad files and records are
    listed and skipped; the rest goes in, in batches, each one atomic commit,
    by the batch writer of ``semsearch index`` (``indexer.batches``).
    """
    report = AddReport()
    total = max(1, len(files))
    with tempfile.TemporaryDirectory(prefix="semsearch-upload-") as tmp:
        folder = Path(tmp).resolve()
        seen: set[str] = set()
        for number, (raw_name, content) in enumerate(files):
            name = safe_file_name(raw_name)
            report.files += 1
            progress(number / total, f"Reading {name} ({number + 1}/{len(files)})")
            docs = _read_upload(folder, name, content, seen, report, max_bytes)
            _write_upload(collection, name, docs, report, lambda done, text: progress((number + done) / total, text))
        progress(1.0, f"Done: {report.summary()}")
    return report


def _read_upload(
    folder: Path, name: str, content: bytes, seen: set[str], report: AddReport, max_bytes: int | None
) -> list[Any]:
    """The documents of the uploaded file ``name``, read in ``folder``; each problem goes to ``report.errors``."""
    from indexer.loaders import DEFAULT_MAX_BYTES, LoadError, load_path

    if name in seen:
        report.errors.append((name, "another uploaded file has the same name"))
        return []
    seen.add(name)
    path = folder / name  # what it is, load_path finds out from its content and name
    path.write_bytes(content)
    docs = []
    for item in load_path(path, max_bytes=max_bytes or DEFAULT_MAX_BYTES):
        if isinstance(item, LoadError):
            report.errors.append((_relabel(item.source, folder), item.reason))
        else:
            docs.append(_relabel_document(item, folder, name))
    path.unlink(missing_ok=True)
    return docs


def _write_upload(
    collection: Any, name: str, docs: list[Any], report: AddReport, progress: Callable[[float, str], None]
) -> None:
    """Upsert the documents of the uploaded file ``name`` in batches, telling ``progress`` the fraction sent.

    Refused documents are listed with their reasons; an error of the collection
    itself (locked, corrupt) is listed for the file, and its other documents left out."""
    from indexer.batches import BatchWriter
    from retriever.errors import SemsearchError

    sent = 0

    def starting(batch: list[Any]) -> None:
        nonlocal sent
        progress(sent / max(1, len(docs)), f"Indexing {name}: {sent + len(batch):,} of {len(docs):,} document(s)")
        sent += len(batch)

    def refused(doc: Any, reason: str) -> None:
        report.errors.append((f"{name} ({doc.id})" if doc.id != name else name, reason))

    try:
        BatchWriter(collection.upsert, lambda _, written: report.merge(written), refused, starting=starting).add_all(
            docs
        )
    except SemsearchError as exc:
        report.errors.append((name, str(exc)))


def _relabel(source: str, folder: Path) -> str:
    prefix = str(folder) + "/"
    return source[len(prefix) :] if source.startswith(prefix) else source


def _relabel_document(doc: Any, folder: Path, name: str) -> Any:
    """``doc`` with the uploaded file's name for its temporary path, in its id, ``source`` and ``archive``
    (an archive member's id and source are ``"<archive>::<member>"``)."""
    temp_path = str(folder / name)

    def relabel(value: Any) -> Any:
        if not isinstance(value, str) or not value.startswith(temp_path):
            return value
        rest = value[len(temp_path) :]
        return name + rest if not rest or rest.startswith("::") else value

    metadata = dict(doc.metadata)
    for key in ("source", "archive"):
        if key in metadata:
            metadata[key] = relabel(metadata[key])
    return replace(doc, id=relabel(doc.id), metadata=metadata)
