"""The text of OpenDocument XML elements: paragraphs, headings, lists, tables and notes.

``inline_text`` gives a paragraph's text as an office
suite shows it: ``text:s`` spaces, tabs and line breaks kept; tracked
deletions, comments and change marks left out; a footnote or endnote as
``[n]`` with its text returned apart, to follow the paragraph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
META = "urn:oasis:names:tc:opendocument:xmlns:meta:1.0"
DC = "http://purl.org/dc/elements/1.1/"


def qname(namespace: str, name: str) -> str:
    """``{namespace}name``, as lxml spells a tag or attribute."""
    return f"{{{namespace}}}{name}"


_PARAGRAPH, _HEADING, _LIST = qname(TEXT, "p"), qname(TEXT, "h"), qname(TEXT, "list")
PARAGRAPHS = (_PARAGRAPH, _HEADING)
ROW = qname(TABLE, "table-row")
_NOTE, _CITATION, _NOTE_BODY = qname(TEXT, "note"), qname(TEXT, "note-citation"), qname(TEXT, "note-body")
_SPACE, _TAB, _BREAK = qname(TEXT, "s"), qname(TEXT, "tab"), qname(TEXT, "line-break")
_SKIPPED = {
    qname(OFFICE, "annotation"),
    qname(OFFICE, "annotation-end"),
    qname(TEXT, "tracked-changes"),
    qname(TEXT, "change"),
    qname(TEXT, "change-start"),
    qname(TEXT, "change-end"),
    qname(TEXT, "deletion"),
    qname(TEXT, "table-of-content"),
    qname(TEXT, "alphabetical-index"),
    qname(TEXT, "illustration-index"),
    qname(TEXT, "table-index"),
    qname(TEXT, "object-index"),
    qname(TEXT, "user-index"),
    qname(TEXT, "bibliography"),
    qname(PRESENTATION, "notes"),
}
_MAX_SPACES = 1_000  # a text:s element's count, bounded


def inline_text(element: Any, notes: list[str] | None = None) -> str:
    """The text of a paragraph (or any element), with its notes' texts appended to ``notes``."""
    pieces: list[str] = []
    _inline(element, pieces, notes if notes is not None else [])
    return "".join(pieces)


def _inline(element: Any, pieces: list[str], notes: list[str]) -> None:
    if element.text:
        pieces.append(element.text)
    for child in element:
        tag = child.tag
        if tag == _SPACE:
            count = child.get(qname(TEXT, "c"), "1")
            pieces.append(" " * min(int(count) if count.isdigit() else 1, _MAX_SPACES))
        elif tag == _TAB:
            pieces.append("\t")
        elif tag == _BREAK:
            pieces.append("\n")
        elif tag == _NOTE:
            _note(child, pieces, notes)
        elif tag in PARAGRAPHS and pieces:
            pieces.append("\n")  # a paragraph inside a frame or text box starts a line
            _inline(child, pieces, notes)
        elif tag not in _SKIPPED and isinstance(tag, str):
            _inline(child, pieces, notes)
        if child.tail:
            pieces.append(child.tail)


def _note(note: Any, pieces: list[str], notes: list[str]) -> None:
    """A note: ``[citation]`` in the text, ``"[citation] body"`` appended to ``notes``."""
    citation = note.find(_CITATION)
    mark = " ".join(inline_text(citation).split()) if citation is not None else ""
    mark = mark or str(len(notes) + 1)
    body = note.find(_NOTE_BODY)
    text = " ".join(" ".join(inline_text(p).split()) for p in body.iter(*PARAGRAPHS)) if body is not None else ""
    pieces.append(f"[{mark}]")
    if text.strip():
        notes.append(f"[{mark}] {text.strip()}")


@dataclass(frozen=True)
class Block:
    """A paragraph, heading, list item or table row of an OpenDocument file.

    Attributes:
        kind: ``"p"``, ``"h"`` (a heading), ``"list"`` (a list item's
            paragraph, its text starting ``"- "``, indented by depth) or
            ``"row"`` (a table row, its non-blank cells joined by ``" | "``).
        text: The text.
        notes: The texts of the notes it refers to, ``"[n] text"`` each.
        level: A heading's outline level (1 outermost); 0 for other kinds.
    """

    kind: str
    text: str
    notes: list[str] = field(default_factory=list)
    level: int = 0


def blocks(element: Any) -> list[Block]:
    """The blocks under ``element`` in document order (indexes, comments, tracked deletions and a slide's
    speaker notes passed over)."""
    found: list[Block] = []
    _blocks(element, found, depth=0)
    return found


def _blocks(element: Any, found: list[Block], depth: int) -> None:
    for child in element:
        tag = child.tag
        if not isinstance(tag, str) or tag in _SKIPPED:
            continue
        notes: list[str] = []
        if tag == _HEADING:
            level = child.get(qname(TEXT, "outline-level"), "1")
            found.append(Block("h", inline_text(child, notes), notes, int(level) if level.isdigit() else 1))
        elif tag == _PARAGRAPH and depth:
            found.append(Block("list", "  " * (depth - 1) + "- " + inline_text(child, notes).strip(), notes))
        elif tag == _PARAGRAPH:
            found.append(Block("p", inline_text(child, notes), notes))
        elif tag == ROW:
            cells = [" ".join(inline_text(cell, notes).split()) for cell in child if _is_cell(cell)]
            found.append(Block("row", " | ".join(cell for cell in cells if cell), notes))
        else:
            _blocks(child, found, depth + (tag == _LIST))


def _is_cell(element: Any) -> bool:
    """Whether ``element`` is a table cell (a covered cell too: it is empty when merged away)."""
    return element.tag in (qname(TABLE, "table-cell"), qname(TABLE, "covered-table-cell"))
