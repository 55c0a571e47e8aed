"""What every loader shares: the error and field-map types, the supported suffixes, paths in messages.

A loader that cannot use a file or record raises ``Rejected`` with a one-line
reason; ``load_path`` turns it into a ``LoadError``, so bad content never
raises out of loading. ``NotRead`` says a file is passed over for what it is
(a type nothing here reads, an empty file), not for a fault in it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retriever.documents import Document

# The suffixes read by name. A file is recognised by its content too (``indexer.loaders.detect``): one
# whose content is text is read as plain text whatever its suffix, or without one (README, CHANGES, source code).
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".tex",
        ".log",
        ".html",
        ".htm",
        ".pdf",
        ".jsonl",
        ".csv",
        ".docx",
        ".pptx",
        ".xlsx",
        ".odt",
        ".ods",
        ".odp",
        ".epub",
        ".rtf",
        ".eml",
        ".mbox",
        ".msg",
        ".png",
        ".jpg",
        ".jpeg",
        ".tif",
        ".tiff",
        ".gz",
        ".bz2",
        ".xz",
        ".zip",
        ".tar",
        ".tgz",
    }
)
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
BEIR_CORPUS = "corpus.jsonl"
# Formats holding many documents, read as streams: the size limit applies to each record or member, not the file.
STREAMING_FORMATS = frozenset({"jsonl", "csv", "mbox", "zip", "tar", "gzip", "bzip2", "xz"})
_MB = 1024 * 1024


@dataclass(frozen=True)
class LoadError:
    """A file or record that could not be loaded.

    Attributes:
        source: The file's absolute path, ``"<path>:<line>"`` for a record
            of a JSONL or CSV file, ``"<archive>::<member>"`` for a member
            of an archive.
        reason: One line naming the cause.
        unread: True when the file was passed over for what it is (a type
            nothing here reads, an empty file, a hidden name), which is no
            fault of the file; False (default) for a file or record that
            failed.
    """

    source: str
    reason: str
    unread: bool = False


@dataclass(frozen=True)
class FieldMap:
    """Which record fields hold the id, title and text in JSONL and CSV files.

    Attributes:
        id: The id field; None (default) tries ``id``, then ``_id``.
        title: The title field; None (default) means ``title``. An absent
            title is "".
        text: The text field; None (default) tries ``text``, ``body``,
            then ``content``.
    """

    id: str | None = None
    title: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class ReadContext:
    """What a reader that needs more than ``(path, source, stem)`` is given: record files and containers.

    Attributes:
        fields: Record fields for id, title and text (JSONL, CSV).
        max_bytes: The largest single-document file, or archive member, read.
        archives: The sources of the archives the file being read is inside,
            outermost first (empty for a file on disk).
        compressed: Whether the file came out of a compressed file (.gz, .bz2, .xz).
        read_member: Reads a file taken out of a container as
            ``read_member(path, source, stem, context)``: its format
            detected again, a ``LoadError`` for each problem, never raising.
    """

    fields: FieldMap = FieldMap()
    max_bytes: int = DEFAULT_MAX_BYTES
    archives: tuple[str, ...] = ()
    compressed: bool = False
    read_member: Callable[[Path, str, str, ReadContext], Iterator[Document | LoadError]] | None = None


class Rejected(Exception):
    """A file or record cannot be loaded; the message is the ``LoadError`` reason."""


class NotRead(Rejected):
    """A file is passed over for what it is, not for a fault; it becomes a ``LoadError`` with ``unread=True``."""


def is_beir_dir(path: Path) -> bool:
    """Whether ``path`` is a directory holding a BEIR ``corpus.jsonl``."""
    path = Path(path)
    return path.is_dir() and (path / BEIR_CORPUS).is_file()


def real_path(path: Path) -> str:
    """The absolute, symlink-free path; ``str(path.resolve())`` that cannot raise on a loop."""
    return os.path.realpath(path)


def shown_path(path: str | os.PathLike) -> str:
    """A path for messages: bytes that are not UTF-8 appear as ``\\xNN`` escapes."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        return text.decode("utf-8", "backslashreplace")
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def too_big(size: int, limit: int) -> str:
    """The reason for refusing a file of ``size`` bytes; limits under 1 MB are given in bytes."""
    if limit >= _MB:
        return f"file is {size / _MB:.1f} MB, over the {limit / _MB:.0f} MB limit"
    return f"file is {size} bytes, over the {limit} byte limit"


def error_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's message, else its type name."""
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__


MEMBER_SEPARATOR = "::"  # between an archive's source and a member's path inside it


def member_source(archive_source: str, member: str) -> str:
    """The source (and id) of an archive member: ``"<archive source>::<member path>"``."""
    return f"{archive_source}{MEMBER_SEPARATOR}{member}"


def outermost_file(source: str) -> str:
    """The file on disk a source comes from: the part before the first ``"::"`` (``source`` itself when none)."""
    return source.split(MEMBER_SEPARATOR, 1)[0]
