"""RTF files (striprtf) as one document, with headings as sections and table rows on lines.

striprtf turns RTF into plain text but drops its structure, so three kinds
of control words are first given marks that pass through it as text:
``\\outlinelevelN`` (a heading paragraph, as Word, LibreOffice and pandoc
write them), ``\\trowd`` (a table row begins) and ``\\cell`` / ``\\row``.
After stripping, a marked line is a heading of level N + 1 (its text the
``section`` of what follows), and a row's cells are joined by ``" | "``.
Marks inside groups striprtf leaves out (style sheets, the info group)
vanish with them. Footnotes, being such a group, are not read.

Metadata: ``source``, ``format`` (``"rtf"``), and from the ``\\info`` group
``author``, ``created`` (``\\creatim``) and ``modified`` (``\\revtim``),
as local times without a zone; the title is ``\\title``, else the stem.
A file that does not start with ``{\\rtf``, or whose groups do not close
(a truncated file), is refused.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from striprtf.striprtf import rtf_to_text

from indexer.loaders.common import Rejected, error_line
from indexer.loaders.located import SectionedText, located_document
from indexer.loaders.props import one_line, property_fields
from retriever.documents import Document

_HEADING, _ROW_START, _CELL, _ROW_END = "\x01", "\x02", "\x03", "\x04"
_MARKS = {0: None, 1: None, 2: None, 3: None, 4: None}
# An escaped backslash first, so that "\\\\cell" (a backslash, then the word "cell") is not taken for \cell.
_MARKED_WORDS = re.compile(r"\\\\|\\outlinelevel(\d+) ?|\\trowd(?![a-z])|\\(cell|row)(?![a-z]) ?")
_HEADING_LINE = re.compile("\x01(\\d+)\x01")
_BRACES = re.compile(r"\\[\\{}]|[{}]")
_DATA_GROUP = re.compile(r"\{\\(?:\*\\)?(?:pict|objdata|datastore|themedata|colorschememapping)(?![a-z])")
_CODE_PAGE = re.compile(rb"\\ansicpg(\d+)")
_INFO_TEXT = re.compile(r"\{\\(title|author)\s?((?:[^{}\\]|\\[^a-z]|\\[a-z]+-?\d* ?)*)\}")
_INFO_TIME = re.compile(r"\{\\(creatim|revtim)((?:\\[a-z]+\d+ ?)+)\}")
_TIME_PART = re.compile(r"\\(yr|mo|dy|hr|min|sec)(\d+)")
_MAX_HEADING_LEVEL = 9
_BULLETS = ("\u2022", "\u00b7", "\u25aa", "\u25e6")  # a list item's line, as writers render bullets


def read_rtf(path: Path, source: str, stem: str) -> Iterator[Document]:
    """An RTF file as one document, its outline-level headings as sections.

    Raises:
        Rejected: not RTF, truncated, over the character limit, or neither text nor title.
    """
    markup = _rtf_markup(path)
    title, fields = _info(markup)
    try:
        stripped = rtf_to_text(_marked(_without_data_groups(markup)), errors="replace")
    except Exception as exc:  # noqa: BLE001 - striprtf fails in many ways on broken control words
        raise Rejected(f"corrupt RTF file ({type(exc).__name__}: {error_line(exc)})") from None
    built = _structured(stripped).finished()
    metadata = {"source": source, "format": "rtf"} | fields
    yield located_document(built, source, title, stem, metadata)


def _rtf_markup(path: Path) -> str:
    """The file's RTF source, decoded by its code page, its groups checked to close.

    Raises:
        Rejected: unreadable, no ``{\\rtf`` header, or unbalanced braces.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    if not data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf"):
        raise Rejected("not an RTF file (it does not start with {\\rtf)")
    found = _CODE_PAGE.search(data, 0, 4096)
    codec = f"cp{int(found.group(1))}" if found else "cp1252"
    try:
        codecs.lookup(codec)
    except LookupError:
        codec = "cp1252"
    markup = data.decode(codec, errors="replace")
    depth = 0
    for brace in _BRACES.finditer(markup):
        token = brace.group()
        depth += 1 if token == "{" else -1 if token == "}" else 0
        if depth < 0:
            raise Rejected("corrupt RTF file (a group closes that was never opened)")
    if depth:
        raise Rejected(f"truncated or corrupt RTF file ({depth} groups left open)")
    return markup


def _without_data_groups(markup: str) -> str:
    """The RTF without its picture, OLE object, theme and data store groups: hex data, no text, and slow to tokenize."""
    kept, position = [], 0
    for found in _DATA_GROUP.finditer(markup):
        if found.start() < position:
            continue  # inside a group already cut
        kept.append(markup[position : found.start()])
        position = _group_end(markup, found.start())
    kept.append(markup[position:])
    return "".join(kept)


def _group_end(markup: str, start: int) -> int:
    """The offset just past the group that opens at ``start`` (the end of ``markup`` when it never closes)."""
    depth = 0
    for brace in _BRACES.finditer(markup, start):
        token = brace.group()
        depth += 1 if token == "{" else -1 if token == "}" else 0
        if depth == 0:
            return brace.end()
    return len(markup)


def _marked(markup: str) -> str:
    """The RTF with a mark before each heading paragraph's text, at each row's start, cell end and row end."""

    def mark(found: re.Match) -> str:
        text = found.group()
        if text == "\\\\":
            return text
        if found.group(1) is not None:
            return f"{text.rstrip()} {_HEADING}{found.group(1)}{_HEADING}"
        if found.group(2) is not None:
            return _CELL if found.group(2) == "cell" else _ROW_END
        return text + " " + _ROW_START

    return _MARKED_WORDS.sub(mark, markup.translate(_MARKS))


def _structured(stripped: str) -> SectionedText:
    """The marked plain text as sections: heading lines, paragraphs and table rows."""
    sectioned = SectionedText("rtf")
    segments = stripped.split(_ROW_END)
    for index, segment in enumerate(segments):
        if index == len(segments) - 1:
            _paragraphs(segment, sectioned)
            break
        before, _, row = segment.partition(_ROW_START)
        if not row:
            before, row = "", before
        _paragraphs(before, sectioned)
        cells = (" ".join(cell.replace(_ROW_START, " ").split()) for cell in row.split(_CELL))
        sectioned.block(" | ".join(cell for cell in cells if cell), group="table")
    return sectioned


def _paragraphs(text: str, sectioned: SectionedText) -> None:
    """Each line of ``text`` as a paragraph, or as a heading when it carries a heading mark."""
    for line in text.replace(_ROW_START, "").replace(_CELL, " ").splitlines():
        heading = _HEADING_LINE.search(line)
        if heading is None:
            sectioned.block(line, group="list" if line.lstrip().startswith(_BULLETS) else None)
            continue
        level = min(int(heading.group(1)), _MAX_HEADING_LEVEL - 1) + 1
        sectioned.heading(level, _HEADING_LINE.sub("", line))


def _info(markup: str) -> tuple[str, dict]:
    """``(title, {author, created, modified})`` from the ``\\info`` group, where it has them."""
    group = _info_group(markup)
    texts = {
        name: one_line(rtf_to_text("{\\rtf1 " + value + "}", errors="replace"))
        for name, value in _INFO_TEXT.findall(group)
    }
    times = {name: _info_time(value) for name, value in _INFO_TIME.findall(group)}
    return texts.get("title", ""), property_fields(texts.get("author"), times.get("creatim"), times.get("revtim"))


def _info_group(markup: str) -> str:
    """The ``{\\info ...}`` group ("" when there is none), so body text is never read as metadata."""
    start = markup.find("{\\info")
    return markup[start : _group_end(markup, start)] if start >= 0 else ""


def _info_time(value: str) -> datetime | None:
    """A ``\\creatim``/``\\revtim`` value (``\\yr2024\\mo3\\dy5\\hr10\\min30``) as a naive datetime, or None."""
    parts = {name: int(number) for name, number in _TIME_PART.findall(value)}
    try:
        return datetime(
            parts["yr"],
            parts.get("mo", 1),
            parts.get("dy", 1),
            parts.get("hr", 0),
            parts.get("min", 0),
            parts.get("sec", 0),
        )
    except (KeyError, ValueError):
        return None
