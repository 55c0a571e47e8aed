"""OpenDocument files: text (odt), spreadsheets (ods) and presentations (odp), one document each.

The XML is read with lxml's safe parser (``odf_text``); a spreadsheet's
``content.xml`` is streamed row by row (``iterparse``), so a large one is
never held whole.

- odt: paragraphs, lists, tables (a line per row) and notes in order;
  ``text:h`` headings become ``section`` paths.
- ods: a part per non-empty row labelled ``sheet`` and ``row``, cells as
  shown (``sheets``: header names, bounds); repeated rows and cells are
  expanded, runs of empty ones skipped.
- odp: a part per slide labelled ``slide``: its title, other text and
  speaker notes.

Metadata: ``source``, ``format``, and from ``meta.xml`` ``author`` (the
initial creator, else the last one), ``created`` and ``modified``;
``sheets`` (names) or ``slides`` (count). The title is ``dc:title``, else
the first "Title" paragraph (odt) or the first slide's title (odp), else
the stem. A password-protected file is refused as such.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lxml import etree

from indexer.loaders.common import Rejected
from indexer.loaders.located import BoundedText, SectionedText, located_document
from indexer.loaders.odf_text import (
    DC,
    DRAW,
    META,
    OFFICE,
    PRESENTATION,
    TABLE,
    TEXT,
    Block,
    blocks,
    inline_text,
    qname,
)
from indexer.loaders.packages import library_errors, open_package, parse_xml_part
from indexer.loaders.props import one_line, property_fields
from indexer.loaders.sheets import SheetText
from retriever.documents import Document

CONTENT = "content.xml"
MAX_REPEATED_COLUMNS = 16_384  # the most columns a cell may repeat over (LibreOffice's widest sheet)
_ENCRYPTED = "password-protected (encrypted) OpenDocument file"
_TITLE_STYLES = ("Title",)


def read_odt(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A text document as one document, its headings as sections.

    Raises:
        Rejected: the file is encrypted, damaged, over a limit, or holds neither text nor title.
    """
    with open_package(path, "odt") as package, library_errors("odt"):
        _refuse_encrypted(package)
        title, fields = _meta(package)
        body = _body(package, "text")
        sectioned = SectionedText("odt")
        title_paragraph = _title_paragraph(body)
        for block in blocks(body):
            if block.kind == "h":
                sectioned.heading(block.level, block.text)
            else:
                sectioned.block(block.text, group=block.kind if block.kind != "p" else None)
            for note in block.notes:
                sectioned.block(note)
        built = sectioned.finished()
    metadata = {"source": source, "format": "odt"} | fields
    yield located_document(built, source, title or title_paragraph, stem, metadata)


def read_odp(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A presentation as one document, a part per slide (title, text, notes) labelled ``slide``.

    Raises:
        Rejected: the file is encrypted, damaged, over a limit, or holds neither text nor title.
    """
    built = BoundedText("odp")
    first_title = ""
    with open_package(path, "odp") as package, library_errors("odp"):
        _refuse_encrypted(package)
        title, fields = _meta(package)
        pages = _body(package, "presentation").iterchildren(qname(DRAW, "page"))
        slides = 0
        for slides, page in enumerate(pages, start=1):
            heading, texts = _slide_texts(page)
            first_title = first_title or heading
            built.add("\n\n".join(text for text in (heading, *texts) if text), slide=slides)
    metadata = {"source": source, "format": "odp", "slides": slides} | fields
    yield located_document(built, source, title or first_title, stem, metadata)


def _slide_texts(page: Any) -> tuple[str, list[str]]:
    """``(title, [text of the other frames, ..., notes])`` of one slide."""
    title_frames = [frame for frame in page.iter(qname(DRAW, "frame")) if _is_title(frame)]
    heading = " ".join(" ".join(inline_text(frame).split()) for frame in title_frames)
    for frame in title_frames:
        frame.getparent().remove(frame)
    texts = [_joined(blocks(page))]  # speaker notes are passed over here, and read next
    for notes in page.iterchildren(qname(PRESENTATION, "notes")):
        texts.append(_joined(blocks(notes)))
    return heading, [text for text in texts if text]


def _is_title(frame: Any) -> bool:
    return frame.get(qname(PRESENTATION, "class")) == "title"


def _joined(found: list[Block]) -> str:
    """Blocks as text: rows and list items on their own lines, paragraphs apart by a blank line."""
    out: list[str] = []
    for block in found:
        for text in (block.text.strip(), *block.notes):
            if text:
                out.append(("\n" if block.kind in ("row", "list") and out else "\n\n" if out else "") + text)
    return "".join(out)


def read_ods(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A spreadsheet as one document, a part per non-empty row labelled ``sheet`` and ``row``, streamed.

    Raises:
        Rejected: the file is encrypted, damaged, over a limit, or holds neither text nor title.
    """
    sheets = SheetText("ods")
    with open_package(path, "ods", streamed=lambda name: name == CONTENT) as package, library_errors("ods"):
        _refuse_encrypted(package)
        title, fields = _meta(package)
        with package.open(CONTENT) as content:
            _stream_rows(content, sheets)
    metadata = {"source": source, "format": "ods", "sheets": sheets.sheets} | fields
    yield located_document(sheets.built, source, title, stem, metadata)


def _stream_rows(content: Any, sheets: SheetText) -> None:
    """Feed the rows of every sheet in ``content.xml`` to ``sheets``, freeing each row once read."""
    table, row_tag = qname(TABLE, "table"), qname(TABLE, "table-row")
    events = etree.iterparse(
        content,
        events=("start", "end"),
        tag=(table, row_tag),
        resolve_entities=False,
        no_network=True,
        huge_tree=False,
        load_dtd=False,
    )
    depth = 0  # tables open: rows of a table nested in a cell are read with the cell
    for event, element in events:
        if element.tag == table:
            depth += 1 if event == "start" else -1
            if event == "start" and depth == 1:
                sheets.start_sheet(element.get(qname(TABLE, "name"), f"Sheet{len(sheets.sheets) + 1}"))
            continue
        if event != "end" or depth != 1:
            continue
        _sheet_row(element, sheets)
        element.clear()
        while element.getprevious() is not None:
            del element.getparent()[0]


def _sheet_row(row: Any, sheets: SheetText) -> None:
    """One ``table:table-row``, its repeats expanded (a run of empty rows only skipped)."""
    cells = _row_cells(row)
    repeat = _repeat(row, "number-rows-repeated")
    if not cells:
        sheets.skip_rows(repeat)
        return
    for _ in range(repeat):
        sheets.add_row(cells)


def _row_cells(row: Any) -> list[tuple[str, bool]]:
    """The cells of a row as ``(text, is_text)``, repeats expanded; trailing empty cells left out."""
    cells: list[tuple[str, bool]] = []
    empty_run = 0
    for cell in row:
        if cell.tag not in (qname(TABLE, "table-cell"), qname(TABLE, "covered-table-cell")):
            continue
        repeat = _repeat(cell, "number-columns-repeated")
        if repeat > MAX_REPEATED_COLUMNS:
            raise Rejected(f"ods cell repeated over {repeat:,} columns, over the {MAX_REPEATED_COLUMNS:,} column limit")
        text = " ".join(inline_text(cell).split())
        if not text:
            empty_run += repeat
            continue
        value_type = cell.get(qname(OFFICE, "value-type"))
        cells.extend([("", False)] * empty_run + [(text, value_type in (None, "string"))] * repeat)
        empty_run = 0
    return cells


def _repeat(element: Any, attribute: str) -> int:
    value = element.get(qname(TABLE, attribute), "1")
    return max(int(value), 1) if value.isdigit() else 1


def _refuse_encrypted(package: zipfile.ZipFile) -> None:
    """Refuse a package whose manifest says its parts are encrypted.

    Raises:
        Rejected: the manifest has ``encryption-data``.
    """
    try:
        manifest = package.read("META-INF/manifest.xml")
    except KeyError:
        return
    if b"encryption-data" in manifest:
        raise Rejected(_ENCRYPTED)


def _meta(package: zipfile.ZipFile) -> tuple[str, dict]:
    """``(title, {author, created, modified})`` from ``meta.xml``; empty when it is absent."""
    try:
        root = parse_xml_part(package.read("meta.xml"))
    except KeyError:
        return "", {}

    def value(namespace: str, name: str) -> str:
        found = root.find(f".//{qname(namespace, name)}")
        return one_line(found.text) if found is not None and found.text else ""

    author = value(META, "initial-creator") or value(DC, "creator")
    fields = property_fields(author, value(META, "creation-date"), value(DC, "date"))
    return value(DC, "title"), fields


def _body(package: zipfile.ZipFile, kind: str) -> Any:
    """The ``office:body/office:<kind>`` element of ``content.xml``.

    Raises:
        Rejected: the file has no such body (another OpenDocument kind, or damaged).
    """
    root = parse_xml_part(package.read(CONTENT))
    found = root.find(f"{qname(OFFICE, 'body')}/{qname(OFFICE, kind)}")
    if found is None:
        raise Rejected(f"no office:{kind} body in {CONTENT}: not an OpenDocument {kind} file")
    return found


def _title_paragraph(body: Any) -> str:
    """The text of the first paragraph in a "Title" style, or ""."""
    for paragraph in body.iter(qname(TEXT, "p")):
        if paragraph.get(qname(TEXT, "style-name")) in _TITLE_STYLES:
            return one_line(inline_text(paragraph))
    return ""
