"""``load_path``: one file, or one BEIR corpus directory, to documents and load errors.

A file's format is recognised by ``detect`` (its content and its name) and
read by that format's reader from the registry (``formats``); what comes out
of a container (``containers``) is read the same way, by ``read_file``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from indexer.loaders.common import (
    BEIR_CORPUS,
    DEFAULT_MAX_BYTES,
    STREAMING_FORMATS,
    FieldMap,
    LoadError,
    NotRead,
    ReadContext,
    Rejected,
    error_line,
    is_beir_dir,
    real_path,
    shown_path,
    too_big,
)
from indexer.loaders.detect import detect
from indexer.loaders.formats import read, unread_reason
from retriever.documents import Document
from retriever.unicode_policy import is_utf8


def load_path(
    path: Path, fields: FieldMap = FieldMap(), max_bytes: int = DEFAULT_MAX_BYTES
) -> Iterator[Document | LoadError]:
    """Documents from one file, or from one BEIR corpus directory.

    A file's format is recognised by its content and its name
    (``indexer.loaders.detect``; content wins where the name lies): text,
    Markdown, HTML, PDF and the formats of the other readers give one
    document each, with the file's absolute path as id; JSONL and CSV give
    one document per record; a compressed file is read inside, and an
    archive gives the documents of its members, each with the source
    ``"<archive>::<member>"``. A BEIR directory gives the records of its
    ``corpus.jsonl``, with ids from ``_id`` unless ``fields.id`` names
    another field.

    Args:
        path: The file or BEIR directory.
        fields: Record fields for id, title and text (default: automatic).
        max_bytes: Larger single-document files (and archive members) are
            refused unread (default 50 MB); files that hold many documents
            (JSONL, CSV, mailboxes, archives) are streamed, whatever their size.

    Yields:
        A ``Document`` per document, or a ``LoadError`` per file, member or
        record that cannot be loaded; a file passed over for what it is (a
        format nothing here reads, an empty file) gives a ``LoadError`` with
        ``unread=True``. Nothing is raised for bad content.
    """
    path = Path(path)
    if is_beir_dir(path):
        path, fields = path / BEIR_CORPUS, replace(fields, id=fields.id or "_id")
    source = real_path(path)
    if not is_utf8(source):
        yield LoadError(shown_path(source), "the file name is not valid UTF-8; rename the file")
        return
    yield from read_file(path, source, path.stem, ReadContext(fields, max_bytes, read_member=read_file))


def read_file(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """The documents of one file, its format detected; a ``LoadError`` (with ``source``) for each problem.

    Never raises for bad content: ``NotRead`` becomes a ``LoadError`` with
    ``unread=True``, ``Rejected`` and any other failure a ``LoadError``.

    Args:
        path: The file to open (for an archive member, its extracted copy).
        source: The id and ``source`` of what it gives.
        stem: The title to fall back on.
        context: Fields, size limit and nesting (``ReadContext``).
    """
    try:
        if path.is_dir():
            raise Rejected(f"a directory without {BEIR_CORPUS}, so not a BEIR corpus")
        size = _regular_size(path)
        found = detect(path)
        reason = unread_reason(found)
        if reason:
            raise NotRead(reason)
        if found.format not in STREAMING_FORMATS and size > context.max_bytes:
            raise Rejected(too_big(size, context.max_bytes))
        yield from read(found.format, path, source, stem, context)
    except NotRead as exc:
        yield LoadError(source, str(exc), unread=True)
    except Rejected as exc:
        yield LoadError(source, str(exc))
    except Exception as exc:  # noqa: BLE001 - any surprise in one file is that file's error, not the run's
        yield LoadError(source, f"cannot load: {type(exc).__name__}: {error_line(exc)}")


def unread_file_reason(path: Path) -> str | None:
    """Why ``load_path`` would pass over the file at ``path`` for what it is (see ``formats.unread_reason``).

    None for a file to read, and for one that cannot be examined (not a
    regular file, unreadable), whose error ``load_path`` reports.
    """
    try:
        _regular_size(path)
        return unread_reason(detect(path))
    except Rejected:
        return None


def _regular_size(path: Path) -> int:
    """The size of ``path``, a regular file (so opening it cannot hang).

    Raises:
        Rejected: it cannot be examined, or is not a regular file.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    if not stat.S_ISREG(info.st_mode):
        raise Rejected("not a regular file")
    return info.st_size
