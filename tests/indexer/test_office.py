"""Word, PowerPoint and Excel files: text, structure (sections, slides, sheets and rows), metadata, and refusals."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from pptx.util import Inches

from indexer.loaders import located as located_module
from indexer.loaders import packages, sheets
from indexer.loaders.office import read_docx, read_pptx, read_xlsx
from tests.indexer.made_files import (
    cut_in_half,
    entity_bomb,
    located,
    needs_pandoc,
    pandoc,
    refused_or_unexpanded,
    rejected,
)

CREATED = dt.datetime(2024, 3, 5, 10, 30, tzinfo=dt.timezone.utc)
OUTLOOK_ITEM = Path(__file__).parent / "data" / "outlook" / "attachments.msg"  # an OLE2 file that is not encrypted


def only(read, path: Path):
    (document,) = read(path, str(path), path.stem)
    return document


# --- docx -------------------------------------------------------------------------


@needs_pandoc
def test_docx_from_pandoc_keeps_sections_lists_tables_and_footnotes(tmp_path):
    path = pandoc(tmp_path, "docx")
    document = only(read_docx, path)
    assert document.id == str(path)
    assert document.title == "Field Notes"
    assert "- first item about silt\n- second item about sand" in document.text
    assert "Name | Length\nNile | 6650\nAmazon | 6400" in document.text
    assert "river meets still water.[1]" in document.text
    assert "[1] Footnote about deltas." in document.text
    assert located(document, "Amazon | 6400") == {"section": ["Rivers", "Deltas"]}
    assert located(document, "Footnote about deltas") == {"section": ["Rivers", "Deltas"]}
    assert located(document, "Rivers carry sediment") == {"section": ["Rivers"]}
    assert located(document, "Mountains rise") == {"section": ["Mountains"]}
    assert document.metadata["format"] == "docx" and document.metadata["source"] == str(path)
    assert document.metadata["author"] == "Ada Lovelace"


def test_docx_core_properties_become_metadata(tmp_path):
    made = docx.Document()
    made.core_properties.author = "Grace Hopper"
    made.core_properties.title = "Compiler notes"
    made.core_properties.created = CREATED
    made.core_properties.modified = CREATED + dt.timedelta(days=1)
    made.add_heading("Parsing", level=1)
    made.add_paragraph("Tokens come first.")
    made.add_heading("Grammars", level=2)
    made.add_paragraph("Rules come next.", style="List Bullet")
    table = made.add_table(rows=2, cols=2)
    for row, values in zip(table.rows, (("Phase", "Output"), ("lex", "tokens"))):
        for cell, value in zip(row.cells, values):
            cell.text = value
    path = tmp_path / "notes.docx"
    made.save(path)
    document = only(read_docx, path)
    assert document.title == "Compiler notes"
    assert document.metadata["author"] == "Grace Hopper"
    assert document.metadata["created"] == "2024-03-05T10:30:00+00:00"
    assert document.metadata["modified"] == "2024-03-06T10:30:00+00:00"
    assert "- Rules come next." in document.text
    assert "Phase | Output\nlex | tokens" in document.text
    assert located(document, "lex | tokens") == {"section": ["Parsing", "Grammars"]}
    assert located(document, "Tokens come first") == {"section": ["Parsing"]}


def test_docx_title_falls_back_to_title_paragraph_then_stem(tmp_path):
    made = docx.Document()
    made.add_paragraph("The Annual Report", style="Title")
    made.add_paragraph("Body text.")
    made.save(tmp_path / "report.docx")
    untitled = docx.Document()
    untitled.add_paragraph("Just text.")
    untitled.save(tmp_path / "plain.docx")
    assert only(read_docx, tmp_path / "report.docx").title == "The Annual Report"
    assert only(read_docx, tmp_path / "plain.docx").title == "plain"


def test_docx_with_a_title_and_no_text_is_kept_and_without_either_is_refused(tmp_path):
    titled = docx.Document()
    titled.core_properties.title = "Only a title"
    titled.save(tmp_path / "titled.docx")
    empty = docx.Document()
    empty.save(tmp_path / "empty.docx")
    document = only(read_docx, tmp_path / "titled.docx")
    assert (document.title, document.text) == ("Only a title", "")
    assert rejected(read_docx, tmp_path / "empty.docx") == "no text"


def test_docx_cut_in_half_is_refused_as_truncated(tmp_path):
    made = docx.Document()
    made.add_paragraph("Some text " * 200)
    made.save(tmp_path / "whole.docx")
    reason = rejected(read_docx, cut_in_half(tmp_path / "whole.docx", tmp_path))
    assert reason.startswith("corrupt or truncated docx file")


@pytest.mark.parametrize("suffix", ["docx", "xlsx", "pptx"])
def test_password_protected_office_files_are_refused_as_such(tmp_path, suffix):
    ooxml = pytest.importorskip("msoffcrypto.format.ooxml", reason="msoffcrypto-tool makes the encrypted files")
    plain = tmp_path / f"plain.{suffix}"
    if suffix == "docx":
        made = docx.Document()
        made.add_paragraph("secret plans")
        made.save(plain)
    elif suffix == "xlsx":
        workbook = openpyxl.Workbook()
        workbook.active["A1"] = "secret plans"
        workbook.save(plain)
    else:
        pptx.Presentation().save(plain)
    encrypted = tmp_path / f"locked.{suffix}"
    with plain.open("rb") as source, encrypted.open("wb") as target:
        ooxml.OOXMLFile(source).encrypt("pa55word", target)
    read = {"docx": read_docx, "xlsx": read_xlsx, "pptx": read_pptx}[suffix]
    assert rejected(read, encrypted) == "password-protected (encrypted) Office file"


def test_a_legacy_binary_office_file_under_a_docx_name_is_refused(tmp_path):
    path = tmp_path / "old.docx"
    path.write_bytes(OUTLOOK_ITEM.read_bytes())
    assert "legacy binary Office (OLE2) file" in rejected(read_docx, path)


def test_entity_expansion_in_a_docx_does_not_blow_up(tmp_path):
    made = docx.Document()
    made.add_paragraph("PLACEHOLDER and more text")
    made.save(tmp_path / "base.docx")
    bomb = entity_bomb(tmp_path / "base.docx", tmp_path / "laughs.docx", ("word/document.xml",), "PLACEHOLDER")
    outcome = refused_or_unexpanded(read_docx, bomb)
    assert outcome.startswith("corrupt or truncated docx file") or "more text" in outcome


def test_entity_expansion_in_an_xlsx_does_not_blow_up(tmp_path):
    path = make_workbook(tmp_path / "rivers.xlsx")
    members = ("xl/worksheets/sheet1.xml", "xl/sharedStrings.xml")
    outcome = refused_or_unexpanded(read_xlsx, entity_bomb(path, tmp_path / "laughs.xlsx", members, "Nile"))
    assert outcome.startswith("corrupt or truncated xlsx file") or "Amazon" in outcome


def test_a_part_that_unpacks_past_the_limit_is_refused_unread(tmp_path, monkeypatch):
    made = docx.Document()
    made.add_paragraph("word " * 5000)
    made.save(tmp_path / "big.docx")
    monkeypatch.setattr(packages, "MAX_PART_BYTES", 10_000)
    reason = rejected(read_docx, tmp_path / "big.docx")
    assert "part 'word/document.xml' unpacks to" in reason and "limit" in reason


def test_docx_text_over_the_character_limit_is_refused(tmp_path, monkeypatch):
    made = docx.Document()
    made.add_heading("Long", level=1)
    for _ in range(50):
        made.add_paragraph("twenty characters ok")
    made.save(tmp_path / "long.docx")
    monkeypatch.setattr(located_module, "MAX_TEXT_CHARS", 500)
    reason = rejected(read_docx, tmp_path / "long.docx")
    assert reason.startswith("docx text is over the 500 character limit") and "Long" in reason


# --- pptx -------------------------------------------------------------------------


def make_presentation(path: Path) -> Path:
    deck = pptx.Presentation()
    deck.core_properties.author = "Ada Lovelace"
    deck.core_properties.created = CREATED
    for title, body, notes in (
        ("Rivers", "Rivers carry silt to the sea.", "Mention the Nile."),
        ("Mountains", "Plates collide and rise.", ""),
    ):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    for row, values in zip(table.rows, (("Peak", "Height"), ("Everest", "8849"))):
        for cell, value in zip(row.cells, values):
            cell.text = value
    deck.save(path)
    return path


def test_pptx_gives_a_part_per_slide_with_title_text_table_and_notes(tmp_path):
    path = make_presentation(tmp_path / "talk.pptx")
    document = only(read_pptx, path)
    assert document.title == "Rivers"  # no core title: the first slide's
    assert located(document, "Rivers carry silt") == {"slide": 1}
    assert located(document, "Mention the Nile.") == {"slide": 1}
    assert located(document, "Plates collide") == {"slide": 2}
    assert located(document, "Everest | 8849") == {"slide": 2}
    assert document.text.startswith("Rivers\n\nRivers carry silt to the sea.")
    assert document.metadata["slides"] == 2
    assert document.metadata["author"] == "Ada Lovelace"
    assert document.metadata["created"] == "2024-03-05T10:30:00+00:00"


@needs_pandoc
def test_pptx_from_pandoc_numbers_its_slides(tmp_path):
    document = only(read_pptx, pandoc(tmp_path, "pptx"))
    assert document.title == "Field Notes"
    slide_of_mountains = located(document, "Mountains rise")["slide"]
    assert located(document, "Rivers carry sediment")["slide"] < slide_of_mountains


def test_pptx_cut_in_half_is_refused(tmp_path):
    path = make_presentation(tmp_path / "talk.pptx")
    assert rejected(read_pptx, cut_in_half(path, tmp_path)).startswith("corrupt or truncated pptx file")


# --- xlsx -------------------------------------------------------------------------


def make_workbook(path: Path) -> Path:
    workbook = openpyxl.Workbook()
    rivers = workbook.active
    rivers.title = "Rivers"
    rivers.append(["Name", "Length", "Surveyed"])
    rivers.append(["Nile", 6650, dt.datetime(2024, 3, 5)])
    rivers.append([])
    rivers.append(["Amazon", 6400.5, None])
    notes = workbook.create_sheet("Notes")
    notes["B3"] = "only a note"
    workbook.properties.creator = "Ada Lovelace"
    workbook.properties.title = "River table"
    workbook.properties.created = dt.datetime(2024, 3, 5, 10, 30)
    workbook.save(path)
    return path


def test_xlsx_gives_a_part_per_row_named_by_sheet_and_row(tmp_path):
    document = only(read_xlsx, make_workbook(tmp_path / "rivers.xlsx"))
    assert document.title == "River table"
    lines = document.text.splitlines()
    assert lines[:3] == [
        "Name | Length | Surveyed",
        "Name: Nile | Length: 6650 | Surveyed: 2024-03-05",
        "Name: Amazon | Length: 6400.5",
    ]
    assert located(document, "Name: Amazon") == {"sheet": "Rivers", "row": 4}
    assert located(document, "only a note") == {"sheet": "Notes", "row": 3}
    assert document.metadata["sheets"] == ["Rivers", "Notes"]
    assert document.metadata["author"] == "Ada Lovelace"
    assert document.metadata["created"] == "2024-03-05T10:30:00+00:00"


def test_xlsx_without_a_header_row_joins_cells(tmp_path):
    workbook = openpyxl.Workbook()
    for row in ([1, 2, 3], [4, "five", 6]):
        workbook.active.append(row)
    workbook.save(tmp_path / "numbers.xlsx")
    assert only(read_xlsx, tmp_path / "numbers.xlsx").text == "1 | 2 | 3\n4 | five | 6"


def test_xlsx_row_and_cell_limits_say_which_stopped_it_and_where(tmp_path, monkeypatch):
    path = make_workbook(tmp_path / "rivers.xlsx")
    monkeypatch.setattr(sheets, "MAX_SHEET_ROWS", 3)
    assert rejected(read_xlsx, path) == "xlsx has over 3 rows, the row limit (reached at sheet 'Rivers', row 4)"
    monkeypatch.setattr(sheets, "MAX_SHEET_ROWS", 1000)
    monkeypatch.setattr(sheets, "MAX_SHEET_CELLS", 5)
    assert rejected(read_xlsx, path) == "xlsx has over 5 cells, the cell limit (reached at sheet 'Rivers', row 2)"


def test_xlsx_character_limit(tmp_path, monkeypatch):
    path = make_workbook(tmp_path / "rivers.xlsx")
    monkeypatch.setattr(located_module, "MAX_TEXT_CHARS", 40)
    assert rejected(read_xlsx, path) == "xlsx text is over the 40 character limit (at sheet Rivers, row 2)"


def test_xlsx_sheets_are_streamed_not_loaded(tmp_path, monkeypatch):
    """The reader opens workbooks read-only: openpyxl then parses a sheet as its rows are asked for."""
    opened = []
    real_load = openpyxl.load_workbook

    def recording_load(*args, **kwargs):
        opened.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(openpyxl, "load_workbook", recording_load)
    only(read_xlsx, make_workbook(tmp_path / "rivers.xlsx"))
    assert opened and opened[0]["read_only"] is True


def test_xlsx_cut_in_half_is_refused(tmp_path):
    path = make_workbook(tmp_path / "rivers.xlsx")
    assert rejected(read_xlsx, cut_in_half(path, tmp_path)).startswith("corrupt or truncated xlsx file")


def test_an_empty_workbook_without_title_has_no_text(tmp_path):
    openpyxl.Workbook().save(tmp_path / "empty.xlsx")
    assert rejected(read_xlsx, tmp_path / "empty.xlsx") == "no text"


def test_office_files_load_end_to_end_by_content(tmp_path):
    """Through ``load_path``: the format is found from the content, whatever the name says."""
    load_path = pytest.importorskip("indexer.loaders").load_path
    path = make_workbook(tmp_path / "rivers.xlsx")
    renamed = tmp_path / "rivers.dat"
    renamed.write_bytes(path.read_bytes())
    (document,) = load_path(renamed)
    assert document.metadata["format"] == "xlsx"
    assert located(document, "Name: Amazon") == {"sheet": "Rivers", "row": 4}


def test_zip_that_is_not_a_package_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "hello")
    path = tmp_path / "fake.docx"
    path.write_bytes(buffer.getvalue())
    assert rejected(read_docx, path).startswith("corrupt or truncated docx file")
