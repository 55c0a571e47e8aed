"""The text of a Word (docx) document's body, with its headings as sections.

Walks the body's XML as python-docx parsed it (entities unresolved), in
document order: paragraphs, tables (a line per row, cells joined by
``" | "``), content controls and text boxes. A paragraph is a heading when
its style is a "Heading N" style (or based on one) or has an outline level;
list paragraphs read ``"- item"``, indented by their level. A footnote or
endnote reference reads ``[n]`` in its paragraph, and the note's text
follows the paragraph as ``"[n] text"``. Deleted revisions, field codes and
the fallback copies of drawings are left out.
"""

from __future__ import annotations

import re
from typing import Any

from docx.enum.style import WD_STYLE_TYPE
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import parse_xml

from indexer.loaders.located import SectionedText

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_P, _TBL, _TR, _TC = f"{_W}p", f"{_W}tbl", f"{_W}tr", f"{_W}tc"
_CONTAINERS = {f"{_W}sdt", f"{_W}customXml", f"{_W}sdtContent", f"{_W}ins", f"{_W}smartTag"}
_SKIPPED = {f"{_W}{name}" for name in ("pPr", "rPr", "sdtPr", "delText", "instrText", "del", "moveFrom")} | {
    _MC_FALLBACK
}
_CHARACTERS = {f"{_W}tab": "\t", f"{_W}br": "\n", f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-"}
_NOTE_REFERENCES = {f"{_W}footnoteReference": "footnote", f"{_W}endnoteReference": "endnote"}
_NOTE_PARTS = {"footnote": RELATIONSHIP_TYPE.FOOTNOTES, "endnote": RELATIONSHIP_TYPE.ENDNOTES}
_HEADING_NAME = re.compile(r"heading\s*([1-9])", re.IGNORECASE)
_BODY_TEXT_LEVEL = 9  # w:outlineLvl 9 means "body text"


class DocxBody:
    """Reads one python-docx ``Document`` into a ``SectionedText``.

    Attributes:
        text: The sections and blocks read so far.
        title_paragraph: The text of the first paragraph in the "Title" style ("" if none).
    """

    def __init__(self, document: Any, what: str = "docx") -> None:
        self.text = SectionedText(what)
        self.title_paragraph = ""
        self._levels, self._list_styles, self._title_styles = _paragraph_styles(document.styles)
        self._notes = {kind: _notes(document.part, kind) for kind in _NOTE_PARTS}
        self._note_numbers: dict[tuple[str, str], int] = {}
        self._document = document

    def read(self) -> SectionedText:
        """Read the whole body; returns ``text``."""
        for element in self._document.element.body:
            self._block(element)
        return self.text

    def _block(self, element: Any) -> None:
        if element.tag == _P:
            self._paragraph(element)
        elif element.tag == _TBL:
            self._table(element)
        elif element.tag in _CONTAINERS:
            for child in element:
                self._block(child)

    def _paragraph(self, paragraph: Any) -> None:
        pieces: list[str] = []
        notes: list[tuple[int, str]] = []
        self._inline(paragraph, pieces, notes)
        text = "".join(pieces).strip()
        style = _style_id(paragraph)
        level = _outline_level(paragraph) or self._levels.get(style)
        if style in self._title_styles and text and not self.title_paragraph:
            self.title_paragraph = " ".join(text.split())
        if level:
            self.text.heading(level, text)
        elif (depth := _list_depth(paragraph, style in self._list_styles)) is not None:
            self.text.block("  " * depth + "- " + text, group="list")
        else:
            self.text.block(text)
        for number, note in notes:
            self.text.block(f"[{number}] {note}")

    def _table(self, table: Any) -> None:
        group = f"table {id(table)}"
        for row in table.iterchildren(_TR):  # a nested table is read inside its cell
            cells, notes = [], []
            for cell in row.iterchildren(_TC):
                pieces: list[str] = []
                self._inline(cell, pieces, notes)
                cells.append(" ".join("".join(pieces).split()))
            self.text.block(" | ".join(cell for cell in cells if cell), group=group)
            for number, note in notes:
                self.text.block(f"[{number}] {note}")

    def _inline(self, element: Any, pieces: list[str], notes: list[tuple[int, str]]) -> None:
        """Append the text under ``element`` to ``pieces``, and the notes it refers to to ``notes``."""
        for child in element:
            tag = child.tag
            if tag in _SKIPPED:
                continue
            if tag == f"{_W}t":
                pieces.append(child.text or "")
            elif tag in _CHARACTERS:
                pieces.append(_CHARACTERS[tag])
            elif tag in _NOTE_REFERENCES:
                self._note_reference(_NOTE_REFERENCES[tag], child.get(f"{_W}id", ""), pieces, notes)
            elif tag in (_P, _TC):
                if pieces:
                    pieces.append("\n")  # a paragraph inside a text box or cell starts a new line
                self._inline(child, pieces, notes)
            else:
                self._inline(child, pieces, notes)

    def _note_reference(self, kind: str, note_id: str, pieces: list[str], notes: list[tuple[int, str]]) -> None:
        note = self._notes[kind].get(note_id)
        if note is None:
            return
        key = (kind, note_id)
        first = key not in self._note_numbers
        number = self._note_numbers.setdefault(key, len(self._note_numbers) + 1)
        pieces.append(f"[{number}]")
        if first and note:
            notes.append((number, note))


def _notes(part: Any, kind: str) -> dict[str, str]:
    """``{note id: text}`` of the document's footnotes or endnotes; empty when it has none."""
    try:
        notes_part = part.part_related_by(_NOTE_PARTS[kind])
    except KeyError:
        return {}
    root = parse_xml(notes_part.blob)  # python-docx's parser: entities are not resolved
    found = {}
    for note in root.iterchildren(f"{_W}{kind}"):
        if note.get(f"{_W}type") in ("separator", "continuationSeparator", "continuationNotice"):
            continue
        lines = []
        for paragraph in note.iter(_P):
            pieces: list[str] = []
            _plain_inline(paragraph, pieces)
            lines.append(" ".join("".join(pieces).split()))
        found[note.get(f"{_W}id", "")] = " ".join(line for line in lines if line)
    return found


def _plain_inline(element: Any, pieces: list[str]) -> None:
    """The text under ``element``, without note references (a note's own text)."""
    for child in element:
        if child.tag in _SKIPPED or child.tag == _P:
            continue
        if child.tag == f"{_W}t":
            pieces.append(child.text or "")
        elif child.tag in _CHARACTERS:
            pieces.append(_CHARACTERS[child.tag])
        else:
            _plain_inline(child, pieces)


def _paragraph_styles(styles: Any) -> tuple[dict[str, int], set[str], set[str]]:
    """``(heading level by style id, list style ids, title style ids)`` of the paragraph styles."""
    levels, lists, titles = {}, set(), set()
    for style in styles:
        if style.type != WD_STYLE_TYPE.PARAGRAPH:
            continue
        chain = _base_chain(style)
        level = next((found for found in map(_style_level, chain) if found), None)
        if level:
            levels[style.style_id] = level
        if any(_has_numbering(item.element) or (item.name or "").lower().startswith("list ") for item in chain):
            lists.add(style.style_id)
        if (style.name or "").lower() == "title":
            titles.add(style.style_id)
    return levels, lists, titles


def _base_chain(style: Any, depth: int = 10) -> list[Any]:
    """``style`` and the styles it is based on, nearest first (at most ``depth``)."""
    chain = [style]
    while len(chain) < depth and (base := chain[-1].base_style) is not None and base not in chain:
        chain.append(base)
    return chain


def _style_level(style: Any) -> int | None:
    """The heading level a style gives: from its name ("Heading 2") or its outline level; None if none."""
    match = _HEADING_NAME.fullmatch((style.name or "").strip())
    return int(match.group(1)) if match else _outline_level(style.element)


def _outline_level(element: Any) -> int | None:
    """1-based heading level from ``w:pPr/w:outlineLvl`` of a paragraph or style; None for body text."""
    found = element.find(f"{_W}pPr/{_W}outlineLvl")
    value = found.get(f"{_W}val") if found is not None else None
    if value is None or not value.isdigit() or int(value) >= _BODY_TEXT_LEVEL:
        return None
    return int(value) + 1


def _style_id(paragraph: Any) -> str | None:
    found = paragraph.find(f"{_W}pPr/{_W}pStyle")
    return found.get(f"{_W}val") if found is not None else None


def _has_numbering(element: Any) -> bool:
    numbering = element.find(f"{_W}pPr/{_W}numPr/{_W}numId")
    return numbering is not None and numbering.get(f"{_W}val") not in (None, "0")


def _list_depth(paragraph: Any, list_style: bool) -> int | None:
    """The list level of a paragraph (0 outermost), or None when it is not a list item."""
    numbered = paragraph.find(f"{_W}pPr/{_W}numPr")
    if numbered is None:
        return 0 if list_style else None
    number_id = numbered.find(f"{_W}numId")
    if number_id is not None and number_id.get(f"{_W}val") == "0":
        return None  # numbering switched off for this paragraph
    level = numbered.find(f"{_W}ilvl")
    value = level.get(f"{_W}val", "0") if level is not None else "0"
    return int(value) if value.isdigit() else 0
