"""Office Open XML files: Word (docx), PowerPoint (pptx) and Excel (xlsx), one document each.

- docx (python-docx): the body in order, headings as ``section`` paths,
  tables a line per row, lists, footnotes and endnotes (``docx_body``).
- pptx (python-pptx): a part per slide, labelled ``slide``: its title, its
  other text (groups and tables included) and its speaker notes.
- xlsx (openpyxl, read-only and streamed): a part per non-empty row,
  labelled ``sheet`` and ``row`` (``sheets``), cached formula results.

Metadata: ``source``, ``format``, and ``author``, ``created`` and
``modified`` from the core properties where set; ``slides`` (count) for a
presentation, ``sheets`` (names) for a workbook. The title is the core
title, else the first "Title" paragraph or the first slide's title, else
the file's stem. Packages are checked first (``packages``): a
password-protected file, a legacy binary one, a damaged ZIP or a part too
large to unpack is refused with a reason that says which.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docx.package
import openpyxl
import pptx.package
from docx.opc.constants import CONTENT_TYPE
from pptx.enum.shapes import MSO_SHAPE_TYPE

from indexer.loaders.common import Rejected
from indexer.loaders.docx_body import DocxBody
from indexer.loaders.located import BoundedText, located_document
from indexer.loaders.packages import check_package, library_errors
from indexer.loaders.props import ooxml_core
from indexer.loaders.sheets import SheetText, cell_text
from retriever.documents import Document

_WORKSHEET_PREFIX = "xl/worksheets/"  # streamed by openpyxl in read-only mode, bounded by rows and cells


def read_docx(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A Word document as one document, its headings as sections.

    Raises:
        Rejected: the file is encrypted, damaged, over a limit, or holds neither text nor title.
    """
    check_package(path, "docx")
    with library_errors("docx"):
        main_part = docx.package.Package.open(str(path)).main_document_part
        if main_part.content_type != CONTENT_TYPE.WML_DOCUMENT_MAIN:
            raise Rejected(f"not a Word document to read: its main part is {main_part.content_type}")
        document = main_part.document
        title, fields = ooxml_core(document.core_properties)
        body = DocxBody(document)
        built = body.read().finished()
    metadata = {"source": source, "format": "docx"} | fields
    yield located_document(built, source, title or body.title_paragraph, stem, metadata)


def read_pptx(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A presentation as one document, a part per slide (title, text, notes) labelled ``slide``.

    Raises:
        Rejected: the file is encrypted, damaged, over a limit, or holds neither text nor title.
    """
    check_package(path, "pptx")
    built = BoundedText("pptx")
    first_title = ""
    with library_errors("pptx"):
        presentation = pptx.package.Package.open(str(path)).main_document_part.presentation  # .ppsx and .pptm too
        title, fields = ooxml_core(presentation.core_properties)
        slides = 0
        for slides, slide in enumerate(presentation.slides, start=1):
            heading, texts = _slide_texts(slide)
            first_title = first_title or heading
            built.add("\n\n".join(text for text in (heading, *texts) if text), slide=slides)
    metadata = {"source": source, "format": "pptx", "slides": slides} | fields
    yield located_document(built, source, title or first_title, stem, metadata)


def _slide_texts(slide: Any) -> tuple[str, list[str]]:
    """``(title, [other text of each shape, ..., notes])`` of one slide, each trimmed."""
    title_shape = slide.shapes.title
    heading = _clean(title_shape.text_frame.text) if title_shape is not None else ""
    title_id = title_shape.shape_id if title_shape is not None else None
    texts = [text for text in _shape_texts(slide.shapes, title_id) if text]
    if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
        texts.append(_clean(slide.notes_slide.notes_text_frame.text))
    return " ".join(heading.split()), texts


def _shape_texts(shapes: Any, skip_id: int | None) -> Iterator[str]:
    """The text of each shape in order: text frames, tables (a line per row), groups' shapes."""
    for shape in shapes:
        if shape.shape_id == skip_id:
            continue
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _shape_texts(shape.shapes, skip_id)
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            yield _clean(shape.text_frame.text)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = (
                " | ".join(c for c in (" ".join(cell.text.split()) for cell in row.cells) if c)
                for row in shape.table.rows
            )
            yield "\n".join(row for row in rows if row)


def _clean(text: str) -> str:
    """python-pptx's text with its line-break character (vertical tab) as a newline, trimmed."""
    return text.replace("\v", "\n").strip()


def read_xlsx(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A workbook as one document, a part per non-empty row labelled ``sheet`` and ``row``.

    Sheets are streamed (openpyxl's read-only mode) within the bounds of
    ``sheets``; formulas give their cached results.

    Raises:
        Rejected: the file is encrypted, damaged, over a limit, or holds neither text nor title.
    """
    check_package(path, "xlsx", streamed=lambda name: name.startswith(_WORKSHEET_PREFIX))
    sheets = SheetText("xlsx")
    with path.open("rb") as handle, library_errors("xlsx"):  # a handle: openpyxl would refuse a name not *.xlsx
        workbook = openpyxl.load_workbook(handle, read_only=True, data_only=True, keep_links=False)
        try:
            title, fields = ooxml_core(workbook.properties)
            for worksheet in workbook.worksheets:
                worksheet.reset_dimensions()  # trust the cells, not the declared size
                sheets.start_sheet(worksheet.title)
                for row in worksheet.iter_rows(values_only=True):
                    sheets.add_row([cell_text(value) for value in row])
        finally:
            workbook.close()
    metadata = {"source": source, "format": "xlsx", "sheets": sheets.sheets} | fields
    yield located_document(sheets.built, source, title, stem, metadata)
