"""``load_path``: one file, or one BEIR corpus directory, to documents and load errors."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from indexer.loaders.common import (
    BEIR_CORPUS,
    DEFAULT_MAX_BYTES,
    SUPPORTED_SUFFIXES,
    FieldMap,
    LoadError,
    Rejected,
    error_line,
    is_beir_dir,
    real_path,
    shown_path,
)  # fmt: skip
from indexer.loaders.markup import pdf_document
from indexer.loaders.records import csv_documents, jsonl_documents
from indexer.loaders.streams import text_lines
from indexer.loaders.text import decode, text_document
from retriever.documents import Document
from retriever.unicode_policy import is_utf8

_MB = 1024 * 1024
_FILE_FORMATS = {
    ".txt": "txt",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_RECORD_SUFFIXES = (".jsonl", ".csv")


def load_path(
    path: Path,
    fields: FieldMap = FieldMap(),
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Iterator[Document | LoadError]:
    """Documents from one file, or from one BEIR corpus directory.

    Files are dispatched on their lowercase suffix: ``.txt``, ``.md``,
    ``.markdown``, ``.html``, ``.htm`` and ``.pdf`` give one document each, with
    the file's absolute path as id; ``.jsonl`` and ``.csv`` give one document
    per record. A BEIR directory gives the records of its ``corpus.jsonl``,
    with ids from ``_id`` unless ``fields.id`` names another field.

    Args:
        path: The file or BEIR directory.
        fields: Record fields for id, title and text (default: automatic).
        max_bytes: Larger single-document files are refused unread
            (default 50 MB); JSONL and CSV files of any size are streamed.

    Yields:
        A ``Document`` per document, or a ``LoadError`` per file or record
        that cannot be loaded. Nothing is raised for bad content.
    """
    path = Path(path)
    if is_beir_dir(path):
        path, fields = path / BEIR_CORPUS, replace(fields, id=fields.id or "_id")
    source = real_path(path)
    if not is_utf8(source):
        yield LoadError(shown_path(source), "the file name is not valid UTF-8; rename the file")
        return
    try:
        suffix = _suffix(path)
        if suffix in _RECORD_SUFFIXES:
            yield from _records(path, suffix, source, fields, max_bytes)
            return
        data = _read_bytes(path, max_bytes)
        if suffix == ".pdf":
            yield pdf_document(data, source, path.stem)
            return
        text, encoding = decode(data)
        defaults = {"source": source} | ({"encoding": encoding} if encoding else {})
        yield text_document(text, source, _FILE_FORMATS[suffix], path.stem, defaults)
    except Rejected as exc:
        yield LoadError(source, str(exc))
    except Exception as exc:  # noqa: BLE001 - any surprise in one file is that file's error, not the run's
        yield LoadError(source, f"cannot load: {type(exc).__name__}: {error_line(exc)}")


def _suffix(path: Path) -> str:
    """The lowercase suffix of a loadable file.

    Raises:
        Rejected: ``path`` is a directory (not a BEIR corpus) or has an
            unsupported suffix.
    """
    if path.is_dir():
        raise Rejected(f"a directory without {BEIR_CORPUS}, so not a BEIR corpus")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise Rejected(f"unsupported file type {suffix or '(no suffix)'!r}; supported: {supported}")
    return suffix


def _records(
    path: Path, suffix: str, source: str, fields: FieldMap, max_bytes: int
) -> Iterator[Document | LoadError]:
    """The records of a JSONL or CSV file of any size, decoded and parsed as they are read.

    Raises:
        Rejected: the file is not a regular file, cannot be opened, or fits no encoding.
    """
    _check_regular(path, 2**63)  # record files hold many documents: the size limit is for single ones
    with text_lines(path, newline="\n" if suffix == ".jsonl" else "") as (lines, encoding):
        defaults = {"source": source} | ({"encoding": encoding} if encoding else {})
        if suffix == ".jsonl":
            yield from jsonl_documents(lines, source, fields, defaults)
        else:
            yield from csv_documents(lines, source, fields, defaults, max_bytes)


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file no larger than ``max_bytes``.

    Raises:
        Rejected: the file cannot be read, is not a regular file, or is too big.
    """
    _check_regular(path, max_bytes)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None


def _check_regular(path: Path, max_bytes: int) -> None:
    """Check that ``path`` is a regular file (so opening it cannot hang) no larger than ``max_bytes``.

    Raises:
        Rejected: it cannot be examined, is not a regular file, or is too big.
    """
    try:
        info = path.stat()
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    if not stat.S_ISREG(info.st_mode):
        raise Rejected("not a regular file")
    if info.st_size > max_bytes:
        raise Rejected(_too_big(info.st_size, max_bytes))


def _too_big(size: int, limit: int) -> str:
    """The reason for refusing a file of ``size`` bytes; limits under 1 MB are given in bytes."""
    if limit >= _MB:
        return f"file is {size / _MB:.1f} MB, over the {limit / _MB:.0f} MB limit"
    return f"file is {size} bytes, over the {limit} byte limit"
