"""Loaders: turn files on disk into ``Document`` records.

``walk`` finds the files under the caller's roots; ``load_path`` reads one file
(text, Markdown, HTML, PDF, JSONL or CSV) or one BEIR corpus directory and
yields a ``Document`` for each document in it, or a ``LoadError`` for each file
or record it cannot use. Bad content never raises: every problem becomes a
``LoadError`` with a one-line reason, and loading goes on with the next record.
"""

from __future__ import annotations

import codecs
import csv
import io
import logging
import os
import re
import stat
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import charset_normalizer
from bs4 import BeautifulSoup
from pypdf import PasswordType, PdfReader

from retriever.documents import Document, coerce_document
from retriever.errors import BadInputError
from retriever.unicode_policy import is_utf8
from retriever.jsonl import json_type, parse_json_object

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".jsonl", ".csv"}
)
DEFAULT_MAX_BYTES = 50 * 1024 * 1024

_MB = 1024 * 1024
_FILE_FORMATS = {
    ".txt": "txt",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_BEIR_CORPUS = "corpus.jsonl"
_AUTO_ID = ("id", "_id")
_AUTO_TITLE = "title"
_AUTO_TEXT = ("text", "body", "content")
# UTF-32 first: its little-endian mark starts with the UTF-16 one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_BINARY_SNIFF_BYTES = 8192
_HTML_DROPPED_TAGS = ("script", "style", "noscript", "template", "head")
_HTML_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main",
    "nav", "ol", "p", "pre", "section", "summary", "table", "td", "th", "tr", "ul",
)
_RECORD_SUFFIXES = (".jsonl", ".csv")

_ATX_HEADING = re.compile(r" {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*")
_CODE_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# At most 18 integer digits, no leading zeros: "02134" or a 20-digit code stays a string.
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(\.[0-9]+)?([eE][+-]?[0-9]+)?")

logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed PDFs are reported as LoadError


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


class _Rejected(Exception):
    """A file or record cannot be loaded; the message is the ``LoadError`` reason."""


def is_beir_dir(path: Path) -> bool:
    """Whether ``path`` is a directory holding a BEIR ``corpus.jsonl``."""
    path = Path(path)
    return path.is_dir() and (path / _BEIR_CORPUS).is_file()


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
        path, fields = path / _BEIR_CORPUS, replace(fields, id=fields.id or "_id")
    source = _absolute(path)
    if not is_utf8(source):
        yield LoadError(shown_path(source), "the file name is not valid UTF-8; rename the file")
        return
    try:
        suffix = _suffix(path)
        # Record files hold many documents, so the size limit is for single-document files.
        data = _read_bytes(path, max_bytes if suffix not in _RECORD_SUFFIXES else 2**63)
        if suffix == ".pdf":
            yield _pdf_document(data, source, path.stem)
            return
        text, encoding = _decode(data)
        defaults = {"source": source} | ({"encoding": encoding} if encoding else {})
        if suffix == ".jsonl":
            yield from _jsonl_documents(text, source, fields, defaults)
        elif suffix == ".csv":
            yield from _csv_documents(text, source, fields, defaults, max_bytes)
        else:
            yield _text_document(text, source, _FILE_FORMATS[suffix], path.stem, defaults)
    except _Rejected as exc:
        yield LoadError(source, str(exc))
    except Exception as exc:  # noqa: BLE001 - any surprise in one file is that file's error, not the run's
        yield LoadError(source, f"cannot load: {type(exc).__name__}: {_first_line(exc)}")


def shown_path(path: str | os.PathLike) -> str:
    """A path for messages: bytes that are not UTF-8 appear as ``\\xNN`` escapes."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        return text.decode("utf-8", "backslashreplace")
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def walk(
    roots: Sequence[Path],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Iterator[tuple[Path, Path]]:
    """``(root, path)`` for every file or BEIR directory to load, in sorted order.

    A root that is a file or a BEIR directory yields itself, unfiltered. A
    directory root is walked recursively, skipping hidden names (starting
    with "."), and yields the files with a supported suffix and the BEIR
    directories below it (whose other files are left to ``load_path``).
    ``include`` and ``exclude`` are ``fnmatch`` patterns, matched against the
    path relative to the root (POSIX form) and against the bare name: an
    entry is kept when it matches any include (or include is empty, the
    default) and no exclude (default none). A path reached from two roots is
    yielded once.

    Raises:
        BadInputError: a root does not exist (raised by the call, before any
            path is yielded).
    """
    roots = [Path(root) for root in roots]
    for root in roots:
        if not root.exists():
            raise BadInputError(f"{root}: no such file or directory")
    return _walk_roots(roots, include, exclude)


def _walk_roots(
    roots: list[Path], include: Sequence[str], exclude: Sequence[str]
) -> Iterator[tuple[Path, Path]]:
    """``walk`` after its roots were checked: each path once, first root wins."""
    seen: set[str] = set()
    for root in roots:
        whole = not root.is_dir() or is_beir_dir(root)
        for entry in [root] if whole else _walk_dir(root, include, exclude):
            key = _absolute(entry)
            if key not in seen:
                seen.add(key)
                yield root, entry


def _walk_dir(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[Path]:
    """Loadable files and BEIR directories under ``root``, sorted by relative path."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        beir = [name for name in dirnames if not name.startswith(".") and is_beir_dir(here / name)]
        dirnames[:] = [name for name in dirnames if not name.startswith(".") and name not in beir]
        files = [
            name
            for name in filenames
            if not name.startswith(".") and Path(name).suffix.lower() in SUPPORTED_SUFFIXES
        ]
        found.extend(here / name for name in beir + files)
    kept = [
        path
        for path in found
        if _selected(path.relative_to(root).as_posix(), path.name, include, exclude)
    ]
    return sorted(kept, key=lambda path: path.relative_to(root).parts)


def _selected(relative: str, name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a path matches any include (or there are none) and no exclude."""

    def matches(patterns: Sequence[str]) -> bool:
        return any(fnmatch(relative, pattern) or fnmatch(name, pattern) for pattern in patterns)

    return (not include or matches(include)) and not matches(exclude)


def _absolute(path: Path) -> str:
    """The absolute, symlink-free path; ``str(path.resolve())`` that cannot raise on a loop."""
    return os.path.realpath(path)


def _suffix(path: Path) -> str:
    """The lowercase suffix of a loadable file.

    Raises:
        _Rejected: ``path`` is a directory (not a BEIR corpus) or has an
            unsupported suffix.
    """
    if path.is_dir():
        raise _Rejected(f"a directory without {_BEIR_CORPUS}, so not a BEIR corpus")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise _Rejected(f"unsupported file type {suffix or '(no suffix)'!r}; supported: {supported}")
    return suffix


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file no larger than ``max_bytes``.

    Raises:
        _Rejected: the file cannot be read, is not a regular file, or is too big.
    """
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise _Rejected("not a regular file")
        if info.st_size > max_bytes:
            raise _Rejected(_too_big(info.st_size, max_bytes))
        return path.read_bytes()
    except OSError as exc:
        raise _Rejected(exc.strerror or _first_line(exc)) from None


def _too_big(size: int, limit: int) -> str:
    """The reason for refusing a file of ``size`` bytes; limits under 1 MB are given in bytes."""
    if limit >= _MB:
        return f"file is {size / _MB:.1f} MB, over the {limit / _MB:.0f} MB limit"
    return f"file is {size} bytes, over the {limit} byte limit"


def _decode(data: bytes) -> tuple[str, str | None]:
    """Text from bytes, and the encoding used when it is not UTF-8.

    A byte-order mark decides first; then strict UTF-8; then the encoding
    ``charset_normalizer`` finds, if it decodes the bytes.

    Raises:
        _Rejected: the bytes look binary or fit no encoding.
    """
    bom_codec = next((codec for bom, codec in _BOMS if data.startswith(bom)), None)
    if bom_codec is None and b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise _Rejected("binary file, not text")
    if bom_codec is not None:
        try:
            return data.decode(bom_codec), None if bom_codec == "utf-8-sig" else bom_codec
        except UnicodeDecodeError as exc:
            raise _Rejected(
                f"not valid {bom_codec} despite its byte-order mark ({exc.reason} at offset {exc.start})"
            ) from None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        utf8_error = exc
    guess = charset_normalizer.from_bytes(data).best()
    if guess is not None:
        try:
            return data.decode(guess.encoding), guess.encoding
        except (LookupError, UnicodeDecodeError):
            pass
    offset = utf8_error.start
    raise _Rejected(
        f"not valid UTF-8 (invalid byte 0x{data[offset]:02x} at offset {offset}) and no other encoding fits"
    )


def _text_document(
    text: str, source: str, fmt: str, stem: str, defaults: dict[str, Any]
) -> Document:
    """The document of a text, Markdown or HTML file, with ``defaults`` in its metadata.

    Raises:
        _Rejected: no text is left after extraction.
    """
    if fmt == "html":
        title, body = _parse_html(text)
    elif fmt == "md":
        title, body = _markdown_title(text), text
    else:
        title, body = "", text
    if not body.strip():
        raise _Rejected("empty document")
    metadata = defaults | {"format": fmt}
    return Document(id=source, text=body, title=title or stem, metadata=metadata)


def _markdown_title(text: str) -> str:
    """The text of the first ATX heading outside code fences, or ""."""
    fence = ""
    for line in text.splitlines():
        opener = _CODE_FENCE.match(line)
        if fence:
            closing = line.strip()
            if closing.startswith(fence) and closing == fence[0] * len(closing):
                fence = ""
        elif opener:
            fence = opener.group(1)
        elif heading := _ATX_HEADING.fullmatch(line):
            return heading.group(1)
    return ""


def _parse_html(markup: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML page; the title is "" when it has none.

    The title is the ``<title>`` text, else the first ``<h1>``. The text
    leaves out scripts, styles and the head, breaks lines at block elements
    and ``<br>`` (inline elements such as ``<b>`` stay in their sentence),
    trims every line and keeps at most one blank line in a row.
    """
    soup = BeautifulSoup(markup, "lxml")
    title = _html_title(soup)
    for tag in soup(_HTML_DROPPED_TAGS):
        tag.decompose()
    for tag in soup("br"):
        tag.replace_with("\n")
    for tag in soup(_HTML_BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    lines = (" ".join(line.split()) for line in soup.get_text().splitlines())
    return title, re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _html_title(soup: BeautifulSoup) -> str:
    """The head's ``<title>`` text, else the first ``<h1>`` text, else "", on one line."""
    candidates = [soup.head.find("title") if soup.head else None, soup.find("h1")]
    for tag in candidates:
        title = " ".join(tag.get_text(" ").split()) if tag else ""
        if title:
            return title
    return ""


def _pdf_document(data: bytes, source: str, stem: str) -> Document:
    """The document of a PDF file: its pages' text, separated by blank lines.

    Raises:
        _Rejected: the PDF is malformed, locked by a password, or has no text.
    """
    title, pages = _read_pdf(data)
    text = "\n\n".join(pages)
    if not text.strip():
        raise _Rejected("no extractable text (scanned PDF?)")
    metadata = {"source": source, "format": "pdf", "pages": len(pages)}
    return Document(id=source, text=text, title=title or stem, metadata=metadata)


def _read_pdf(data: bytes) -> tuple[str, list[str]]:
    """``(info title or "", text of each page)`` of a PDF.

    Raises:
        _Rejected: pypdf cannot read the file, or it needs a password.
    """
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise _Rejected("encrypted PDF, needs a password")
        title = reader.metadata.title if reader.metadata else None
        pages = [page.extract_text() for page in reader.pages]
    except _Rejected:
        raise
    except Exception as exc:  # pypdf raises many exception types on malformed files
        raise _Rejected(f"malformed PDF: {_first_line(exc)}") from None
    return (" ".join(title.split()) if isinstance(title, str) else ""), pages


def _jsonl_documents(
    text: str, source: str, fields: FieldMap, defaults: dict[str, Any]
) -> Iterator[Document | LoadError]:
    """A document or error per non-blank line of a JSONL file, streamed.

    Raises:
        _Rejected: the file holds no records.
    """
    if not text.strip():
        raise _Rejected("no records")
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            record = _json_object(line)
            doc = _record_document(record, _record_keys(record, fields), defaults)
            _claim_id(doc.id, lineno, first_line)
        except _Rejected as exc:
            yield LoadError(f"{source}:{lineno}", str(exc))
        else:
            yield doc


def _json_object(line: str) -> dict[str, Any]:
    """One JSONL line parsed as a JSON object.

    Raises:
        _Rejected: the line is not valid JSON or not an object.
    """
    try:
        return parse_json_object(line)
    except ValueError as exc:
        raise _Rejected(str(exc)) from None


def _csv_documents(
    text: str, source: str, fields: FieldMap, defaults: dict[str, Any], max_bytes: int
) -> Iterator[Document | LoadError]:
    """A document or error per row of a CSV file with a header row, streamed.

    Metadata values that look like numbers become numbers. Rows are numbered
    by the line they end on.

    Raises:
        _Rejected: the header is malformed or lacks the id or text column, or
            the file holds no rows.
    """
    # A field can be as long as the file; the default 128 KiB limit would cut long texts.
    csv.field_size_limit(max(csv.field_size_limit(), min(max_bytes, 2**31 - 1)))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header = _csv_header(reader)
    try:
        keys = _record_keys(header, fields)
    except _Rejected as exc:
        raise _Rejected(f"{exc}; the columns are {', '.join(map(repr, header))}") from None
    first_line: dict[str, int] = {}
    rows = 0
    while True:
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            rows += 1
            yield LoadError(f"{source}:{reader.line_num}", f"malformed CSV: {_first_line(exc)}")
            continue
        if not values:
            continue
        rows += 1
        try:
            doc = _record_document(_csv_record(header, values, keys), keys, defaults)
            _claim_id(doc.id, reader.line_num, first_line)
        except _Rejected as exc:
            yield LoadError(f"{source}:{reader.line_num}", str(exc))
        else:
            yield doc
    if not rows:
        raise _Rejected("no records")


def _csv_header(reader: Iterator[list[str]]) -> list[str]:
    """The first non-blank row of a CSV reader.

    Raises:
        _Rejected: the file has no rows or the header row is malformed.
    """
    try:
        for row in reader:
            if row:
                return row
    except csv.Error as exc:
        raise _Rejected(f"malformed CSV header: {_first_line(exc)}") from None
    raise _Rejected("no records")


def _csv_record(header: list[str], values: list[str], keys: tuple[str, str, str]) -> dict[str, Any]:
    """A CSV row as a record; values outside the id, title and text columns may become numbers.

    Raises:
        _Rejected: the row has more or fewer fields than the header.
    """
    if len(values) != len(header):
        raise _Rejected(f"row has {len(values)} fields, the header has {len(header)}")
    return {
        name: value if name in keys else _number_or_string(value)
        for name, value in zip(header, values)
    }


def _number_or_string(value: str) -> str | int | float:
    """``value`` as an int or float when it is written as one, else unchanged."""
    number = _NUMBER.fullmatch(value)
    if number is None:
        return value
    return float(value) if number.group(1) or number.group(2) else int(value)


def _record_keys(available: Container[str], fields: FieldMap) -> tuple[str, str, str]:
    """``(id, title, text)`` field names for a record or CSV header.

    Raises:
        _Rejected: no id or no text field is present.
    """
    id_key = _first_present(available, (fields.id,) if fields.id else _AUTO_ID, "--id-field")
    text_key = _first_present(available, (fields.text,) if fields.text else _AUTO_TEXT, "--text-field")
    return id_key, fields.title or _AUTO_TITLE, text_key


def _first_present(available: Container[str], candidates: Sequence[str], option: str) -> str:
    """The first of ``candidates`` in ``available``.

    Raises:
        _Rejected: none is present; the reason names them and ``option``.
    """
    for name in candidates:
        if name in available:
            return name
    quoted = [repr(name) for name in candidates]
    names = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    raise _Rejected(f"no {names} field (name one with {option})")


def _record_document(
    record: dict[str, Any], keys: tuple[str, str, str], defaults: dict[str, Any]
) -> Document:
    """A document from a JSONL or CSV record; other fields override ``defaults`` in its metadata.

    Raises:
        _Rejected: the id is not a non-empty string or an integer, the text is
            not a non-empty string, or the title is neither a string nor null.
    """
    id_key, title_key, text_key = keys
    doc_id, text, title = record[id_key], record[text_key], record.get(title_key)
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str):
        raise _Rejected(f"{id_key!r} is {json_type(doc_id)}, not a string or integer")
    if not doc_id.strip():
        raise _Rejected(f"{id_key!r} is empty")
    if not isinstance(text, str):
        raise _Rejected(f"{text_key!r} is {json_type(text)}, not a string")
    if not text.strip():
        raise _Rejected(f"{text_key!r} is empty")
    if title is not None and not isinstance(title, str):
        raise _Rejected(f"{title_key!r} is {json_type(title)}, not a string")
    extra = {name: value for name, value in record.items() if name not in keys}
    try:  # the rules every write path applies (id characters, UTF-8, plain JSON metadata)
        return coerce_document(Document(id=doc_id, text=text, title=title or "", metadata=defaults | extra))
    except BadInputError as exc:
        raise _Rejected(str(exc)) from None


def _claim_id(doc_id: str, lineno: int, first_line: dict[str, int]) -> None:
    """Record that ``doc_id`` is used on ``lineno``.

    Raises:
        _Rejected: an earlier line of the same file already used it.
    """
    if doc_id in first_line:
        raise _Rejected(f"duplicate id {doc_id!r} (first on line {first_line[doc_id]})")
    first_line[doc_id] = lineno


def _first_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's message, else its type name."""
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__
