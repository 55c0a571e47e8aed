"""The registry of readers: a format name (``indexer.loaders.detect``) to the function that reads it.

Every reader is ``read(path, source, stem) -> Iterator[Document]``: ``path``
is the file to open, ``source`` its id and ``source`` metadata, ``stem`` the
title to fall back on. It raises ``Rejected`` (``common``) with a one-line
reason for bad content, or ``NotRead`` when it cannot read the file for a
reason outside it (a program it needs is not installed). Record files and
containers take a fourth argument, the ``ReadContext``.

Reader modules are imported when a file of their format is first read, so a
reader that is not there (yet), or one whose library is not installed, makes
its files ``NotRead`` with the reason, never an ``ImportError``. Every call of
a reader runs with Python warnings and library logging below ERROR held back
(``quietly``): what a library says about a file is no business of the
terminal; the reader's ``Rejected`` says what matters.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from indexer.loaders.common import NotRead, ReadContext, Rejected, error_line
from indexer.loaders.detect import COMPRESSIONS, EMPTY_MIME, UNKNOWN, Detected
from indexer.loaders.text import decode, text_document
from retriever.documents import Document

Item = TypeVar("Item")


@dataclass(frozen=True)
class Reader:
    """Where a format's reader lives.

    Attributes:
        candidates: ``(module, function)`` pairs, tried in order; the first
            that imports wins.
        context: Whether the function takes the ``ReadContext`` as a fourth argument.
    """

    candidates: tuple[tuple[str, str], ...]
    context: bool = False


def _at(module: str, function: str, context: bool = False) -> Reader:
    return Reader(((f"indexer.loaders.{module}", function),), context)


READERS: dict[str, Reader] = {
    "txt": _at("formats", "read_text"),
    "md": _at("formats", "read_markdown"),
    "html": _at("formats", "read_html"),
    "pdf": _at("pdf", "read_pdf"),
    "jsonl": _at("records", "read_jsonl", context=True),
    "csv": _at("records", "read_csv", context=True),
    "docx": _at("office", "read_docx"),
    "pptx": _at("office", "read_pptx"),
    "xlsx": _at("office", "read_xlsx"),
    "odt": _at("opendocument", "read_odt"),
    "ods": _at("opendocument", "read_ods"),
    "odp": _at("opendocument", "read_odp"),
    "epub": _at("ebook", "read_epub"),
    "rtf": _at("rtf", "read_rtf"),
    "eml": _at("mail", "read_eml"),
    "mbox": _at("mail", "read_mbox"),
    "msg": _at("mail", "read_msg"),
    "image": _at("scans", "read_image"),
    "gzip": _at("containers", "read_gzip", context=True),
    "bzip2": _at("containers", "read_bzip2", context=True),
    "xz": _at("containers", "read_xz", context=True),
    "zip": _at("containers", "read_zip", context=True),
    "tar": _at("containers", "read_tar", context=True),
}
_FOUND: dict[str, tuple[Callable, bool] | str] = {}  # format -> (function, takes context), or why there is none


def reader_for(fmt: str) -> tuple[Callable, bool]:
    """The reader of ``fmt`` and whether it takes the ``ReadContext``, importing its module on first use.

    Raises:
        NotRead: no reader for ``fmt`` exists here, or its library is not
            installed (the reason says which).
        Rejected: the reader's module fails to import for another reason.
    """
    if fmt not in _FOUND:
        _FOUND[fmt] = _import_reader(fmt)
    found = _FOUND[fmt]
    if isinstance(found, str):
        raise NotRead(found)
    return found


def _import_reader(fmt: str) -> tuple[Callable, bool] | str:
    """The first candidate reader of ``fmt`` that imports, or the reason none does."""
    entry = READERS.get(fmt)
    if entry is None:
        return f"no reader for {fmt}"
    for module_name, function in entry.candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that reader is not written yet: try the next one
            return f"the {fmt} reader needs the Python module {exc.name!r}, which is not installed"
        except Exception as exc:  # noqa: BLE001 - a broken reader module is its files' error, not the run's
            raise Rejected(f"the {fmt} reader cannot be loaded: {type(exc).__name__}: {error_line(exc)}") from None
        read = getattr(module, function, None)
        if callable(read):
            return read, entry.context
    return f"no reader for {fmt} yet"


def unread_reason(found: Detected) -> str | None:
    """Why a file ``detect`` found to be ``found`` is passed over for what it is; None when it is to be read.

    Empty files, formats nothing here reads (with their MIME type), formats
    whose reader is missing, and compressed files with nothing readable
    inside are passed over. A compressed file whose inside cannot be seen
    (damaged, truncated) is read, so that its reader names the fault.
    """
    if found.mime == EMPTY_MIME:
        return "empty file"
    if found.format == UNKNOWN:
        return _unknown(found.mime)
    inner = found.inner
    if inner is not None and inner.mime != EMPTY_MIME and inner.format not in COMPRESSIONS:
        if inner.format == UNKNOWN:
            return f"compressed, nothing inside to read ({inner.mime})"
        missing = _missing(inner.format)
        if missing:
            return f"compressed {inner.format}; {missing}"
    return _missing(found.format)


def _unknown(mime: str) -> str:
    if mime.startswith("image/"):
        return f"image ({mime}); only PNG, JPEG and TIFF images are read"
    return f"binary ({mime})"


def _missing(fmt: str) -> str | None:
    """Why ``fmt`` cannot be read here, or None when its reader is there."""
    try:
        reader_for(fmt)
    except NotRead as exc:
        return str(exc)
    except Rejected:
        return None  # the reader's import error is reported by reading the file
    return None


def read(fmt: str, path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document]:
    """The documents the reader of ``fmt`` gives for ``path``, read ``quietly``.

    Raises:
        NotRead: ``fmt`` has no reader here.
        Rejected: the content is bad (from the reader).
    """
    function, takes_context = reader_for(fmt)
    with _held_back():
        items = function(path, source, stem, context) if takes_context else function(path, source, stem)
    return quietly(items)


def quietly(items: Iterable[Item]) -> Iterator[Item]:
    """``items``, each one produced with Python warnings and logging below ERROR held back.

    Only the steps of ``items`` run held back: the caller's own code between
    two items warns and logs as usual.
    """
    iterator = iter(items)
    while True:
        with _held_back():
            try:
                item = next(iterator)
            except StopIteration:
                return
        yield item


class _held_back:
    """A context in which warnings are ignored and log records below ERROR are dropped (restored on exit)."""

    def __enter__(self) -> None:
        self.warnings = warnings.catch_warnings()
        self.warnings.__enter__()
        warnings.simplefilter("ignore")
        self.disabled = logging.root.manager.disable
        logging.disable(max(self.disabled, logging.WARNING))

    def __exit__(self, *exc) -> None:
        logging.disable(self.disabled)
        self.warnings.__exit__(*exc)


def read_text(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A plain text file as one document (any encoding ``text.decode`` finds)."""
    yield _text_file(path, source, stem, "txt")


def read_markdown(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A Markdown file as one document, titled by its first heading."""
    yield _text_file(path, source, stem, "md")


def read_html(path: Path, source: str, stem: str) -> Iterator[Document]:
    """An HTML (or XML) file as one document: its text, titled by ``<title>`` or the first ``<h1>``."""
    yield _text_file(path, source, stem, "html")


def _text_file(path: Path, source: str, stem: str, fmt: str) -> Document:
    text, encoding = decode(_read_bytes(path))
    defaults = {"source": source} | ({"encoding": encoding} if encoding else {})
    return text_document(text, source, fmt, stem, defaults)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
