"""OpenDocument text, spreadsheets and presentations: text, sections, sheets and rows, slides, metadata, refusals."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from lxml import etree
from odf import dc, meta
from odf.draw import Frame, Page, TextBox
from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText
from odf.presentation import Notes
from odf.style import MasterPage, PageLayout
from odf.table import Table, TableCell, TableRow
from odf.text import H, P

from indexer.loaders import located as located_module
from indexer.loaders import sheets
from indexer.loaders.opendocument import read_odp, read_ods, read_odt
from tests.indexer.made_files import (
    cut_in_half,
    entity_bomb,
    located,
    needs_pandoc,
    pandoc,
    refused_or_unexpanded,
    rejected,
)


def only(read, path: Path):
    (document,) = read(path, str(path), path.stem)
    return document


def with_properties(document, title: str | None = None) -> None:
    if title:
        document.meta.addElement(dc.Title(text=title))
    document.meta.addElement(meta.InitialCreator(text="Ada Lovelace"))
    document.meta.addElement(meta.CreationDate(text="2024-03-05T10:30:00"))
    document.meta.addElement(dc.Date(text="2024-04-01T08:00:00.123456789"))


# --- odt --------------------------------------------------------------------------


@needs_pandoc
def test_odt_from_pandoc_keeps_sections_lists_tables_and_footnotes(tmp_path):
    path = pandoc(tmp_path, "odt")
    document = only(read_odt, path)
    assert document.title == "Field Notes"
    assert "- first item about silt\n- second item about sand" in document.text
    assert "Name | Length\nNile | 6650\nAmazon | 6400" in document.text
    assert "still water.[1]" in document.text and "[1] Footnote about deltas." in document.text
    assert located(document, "Amazon | 6400") == {"section": ["Rivers", "Deltas"]}
    assert located(document, "Mountains rise") == {"section": ["Mountains"]}
    assert document.metadata["author"] == "Ada Lovelace"
    assert document.metadata["format"] == "odt"


def test_odt_from_odfpy_reads_headings_spaces_and_properties(tmp_path):
    made = OpenDocumentText()
    with_properties(made, "Survey")
    made.text.addElement(H(outlinelevel=1, text="Coast"))
    paragraph = P(text="Cliffs  and\tcoves")  # odfpy writes the runs of spaces and the tab as text:s and text:tab
    made.text.addElement(paragraph)
    made.text.addElement(H(outlinelevel=2, text="Harbours"))
    made.text.addElement(P(text="Boats rest here."))
    made.save(str(tmp_path / "survey.odt"))
    document = only(read_odt, tmp_path / "survey.odt")
    assert document.title == "Survey"
    assert "Cliffs  and\tcoves" in document.text
    assert located(document, "Boats rest") == {"section": ["Coast", "Harbours"]}
    assert document.metadata["created"] == "2024-03-05T10:30:00"
    assert document.metadata["modified"] == "2024-04-01T08:00:00.123456"


@needs_pandoc
def test_odt_cut_in_half_is_refused(tmp_path):
    reason = rejected(read_odt, cut_in_half(pandoc(tmp_path, "odt"), tmp_path))
    assert reason.startswith("corrupt or truncated odt file")


def test_odt_whose_manifest_says_encrypted_is_refused(tmp_path):
    """As an office suite saves with a password: the manifest holds encryption data, content.xml is ciphertext."""
    made = OpenDocumentText()
    made.text.addElement(P(text="secret"))
    made.save(str(tmp_path / "plain.odt"))
    locked = tmp_path / "locked.odt"
    manifest_ns = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
    with zipfile.ZipFile(tmp_path / "plain.odt") as source, zipfile.ZipFile(locked, "w") as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "META-INF/manifest.xml":
                root = etree.fromstring(data)
                for entry in root.iter(f"{{{manifest_ns}}}file-entry"):
                    if entry.get(f"{{{manifest_ns}}}full-path") == "content.xml":
                        etree.SubElement(entry, f"{{{manifest_ns}}}encryption-data")
                data = etree.tostring(root, xml_declaration=True, encoding="UTF-8")
            elif info.filename == "content.xml":
                data = os.urandom(len(data))
            target.writestr(info, data)
    assert rejected(read_odt, locked) == "password-protected (encrypted) OpenDocument file"


def test_an_odp_given_as_odt_is_refused_by_its_body(tmp_path):
    make_presentation(tmp_path / "talk.odp")
    assert "not an OpenDocument text file" in rejected(read_odt, tmp_path / "talk.odp")


# --- ods --------------------------------------------------------------------------


def make_spreadsheet(path: Path, rows=None) -> Path:
    made = OpenDocumentSpreadsheet()
    with_properties(made, "River table")
    table = Table(name="Rivers")
    rows = rows or [("Name", "Length"), ("Nile", 6650), None, ("Amazon", 6400)]
    for values in rows:
        row = TableRow(numberrowsrepeated=5) if values is None else TableRow()
        for value in values or (None,):
            if value is None:
                cell = TableCell()
            elif isinstance(value, str):
                cell = TableCell(valuetype="string")
                cell.addElement(P(text=value))
            else:
                cell = TableCell(valuetype="float", value=value)
                cell.addElement(P(text=str(value)))
            row.addElement(cell)
        table.addElement(row)
    made.spreadsheet.addElement(table)
    second = Table(name="Notes")
    note_row = TableRow()
    note_row.addElement(TableCell(numbercolumnsrepeated=2))
    note = TableCell(valuetype="string")
    note.addElement(P(text="a note in column C"))
    note_row.addElement(note)
    second.addElement(note_row)
    made.spreadsheet.addElement(second)
    made.save(str(path))
    return path


def test_ods_gives_a_part_per_row_numbered_past_repeated_empty_rows(tmp_path):
    document = only(read_ods, make_spreadsheet(tmp_path / "rivers.ods"))
    assert document.title == "River table"
    assert document.text.splitlines() == [
        "Name | Length",
        "Name: Nile | Length: 6650",
        "Name: Amazon | Length: 6400",
        "a note in column C",
    ]
    assert located(document, "Name: Amazon") == {"sheet": "Rivers", "row": 8}  # rows 3 to 7 are one repeated row
    assert located(document, "a note") == {"sheet": "Notes", "row": 1}
    assert document.metadata["sheets"] == ["Rivers", "Notes"]
    assert document.metadata["author"] == "Ada Lovelace"


def test_ods_row_limit_names_the_sheet_and_row(tmp_path, monkeypatch):
    path = make_spreadsheet(tmp_path / "rivers.ods")
    monkeypatch.setattr(sheets, "MAX_SHEET_ROWS", 2)
    assert rejected(read_ods, path) == "ods has over 2 rows, the row limit (reached at sheet 'Rivers', row 8)"


def test_ods_character_limit(tmp_path, monkeypatch):
    path = make_spreadsheet(tmp_path / "rivers.ods")
    monkeypatch.setattr(located_module, "MAX_TEXT_CHARS", 30)
    assert rejected(read_ods, path).startswith("ods text is over the 30 character limit")


def test_ods_repeated_filled_cells_expand(tmp_path):
    made = OpenDocumentSpreadsheet()
    table = Table(name="Grid")
    row = TableRow()
    cell = TableCell(valuetype="string", numbercolumnsrepeated=3)
    cell.addElement(P(text="same"))
    row.addElement(cell)
    table.addElement(row)
    made.spreadsheet.addElement(table)
    made.save(str(tmp_path / "grid.ods"))
    assert only(read_ods, tmp_path / "grid.ods").text == "same | same | same"


def test_entity_expansion_in_an_ods_does_not_blow_up(tmp_path):
    path = make_spreadsheet(tmp_path / "rivers.ods")
    outcome = refused_or_unexpanded(read_ods, entity_bomb(path, tmp_path / "laughs.ods", ("content.xml",), "Nile"))
    assert outcome.startswith("corrupt or truncated ods file") or "Amazon" in outcome


# --- odp --------------------------------------------------------------------------


def make_presentation(path: Path) -> Path:
    made = OpenDocumentPresentation()
    with_properties(made)
    layout = PageLayout(name="layout")
    made.automaticstyles.addElement(layout)
    master = MasterPage(name="master", pagelayoutname=layout)
    made.masterstyles.addElement(master)
    for title, body, notes in (("Rivers", "Rivers carry silt.", "Mention the Nile."), ("Hills", "Hills are high.", "")):
        page = Page(masterpagename=master)
        page.addElement(text_frame(title, "title"))
        page.addElement(text_frame(body, None))
        if notes:
            speaker = Notes()
            speaker.addElement(text_frame(notes, "notes"))
            page.addElement(speaker)
        made.presentation.addElement(page)
    made.save(str(path))
    return path


def text_frame(text: str, kind: str | None) -> Frame:
    frame = Frame(width="20cm", height="4cm", x="1cm", y="1cm", **({"class": kind} if kind else {}))
    box = TextBox()
    box.addElement(P(text=text))
    frame.addElement(box)
    return frame


def test_odp_gives_a_part_per_slide_with_title_text_and_notes(tmp_path):
    document = only(read_odp, make_presentation(tmp_path / "talk.odp"))
    assert document.title == "Rivers"
    assert document.text.startswith("Rivers\n\nRivers carry silt.\n\nMention the Nile.")
    assert located(document, "Mention the Nile") == {"slide": 1}
    assert located(document, "Hills are high") == {"slide": 2}
    assert document.metadata["slides"] == 2
    assert document.metadata["author"] == "Ada Lovelace"


def test_ods_and_odp_cut_in_half_are_refused(tmp_path):
    spreadsheet = cut_in_half(make_spreadsheet(tmp_path / "rivers.ods"), tmp_path)
    presentation = cut_in_half(make_presentation(tmp_path / "talk.odp"), tmp_path)
    assert rejected(read_ods, spreadsheet).startswith("corrupt or truncated ods file")
    assert rejected(read_odp, presentation).startswith("corrupt or truncated odp file")
