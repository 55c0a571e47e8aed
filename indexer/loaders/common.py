"""What every loader shares: the error and field-map types, the supported suffixes, paths in messages.

A loader that cannot use a file or record raises ``Rejected`` with a one-line
reason; ``load_path`` turns it into a ``LoadError``, so bad content never
raises out of loading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".jsonl", ".csv"}
)
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
BEIR_CORPUS = "corpus.jsonl"


@dataclass(frozen=True)
class LoadError:
    """A file or record that could not be loaded.

    Attributes:
        source: The file's absolute path, or ``"<path>:<line>"`` for a record
            of a JSONL or CSV file.
        reason: One line naming the cause.
    """

    source: str
    reason: str


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


class Rejected(Exception):
    """A file or record cannot be loaded; the message is the ``LoadError`` reason."""


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


def error_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's message, else its type name."""
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__
