"""Tests for indexer.loaders.pdf: text layers, OCR of the pages without one, page locations, metadata, bad PDFs."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone
from pathlib import Path

import img2pdf
import numpy as np
import pypdfium2
import pytest
from PIL import Image
from pypdf import PdfReader, PdfWriter

from indexer.loaders.common import NotRead, Rejected
from indexer.loaders.ocr import NO_TESSERACT, OcrProgress, OcrSettings, configure_ocr, set_ocr_progress
from indexer.loaders.pdf import MAX_RENDER_DPI, MIN_RENDER_DPI, page_image, pdf_document, read_pdf
from retriever.documents import Document
from retriever.locations import describe, location_at
from tests.indexer.test_loaders import write_pdf
from tests.indexer.test_ocr import DPI, SCANS, default_ocr, found, render_page

__all__ = ["default_ocr"]  # the autouse fixture: default OCR settings around every test here

TEXT_PAGES = [
    ["Quarterly revenue grew in the northern region", "while costs stayed flat."],
    ["The committee approved the budget for bridges", "and the harbour extension."],
]


def read_one(path: Path) -> Document:
    (doc,) = read_pdf(path, str(path), path.stem)
    return doc


def scanned_pdf(path: Path, scans: list[list[str]], dpi: int = DPI, noise: float = 0.0, layout=None) -> Path:
    """A PDF of one scanned image page per entry of ``scans``, made by img2pdf from PNGs said to be at ``dpi``,
    speckled when ``noise`` > 0 (see ``render_page``), placed on the page by img2pdf's ``layout`` (default: the
    page is the image)."""
    images = []
    for lines in scans:
        buffer = io.BytesIO()
        render_page(lines, noise=noise).save(buffer, format="PNG", dpi=(dpi, dpi))
        images.append(buffer.getvalue())
    path.write_bytes(img2pdf.convert(images, layout_fun=layout) if layout else img2pdf.convert(images))
    return path


def page_images(path: Path, dpi: int = 300, rotation: int = 0) -> list[tuple[Image.Image, int]]:
    """Each page of the PDF at ``path`` as the image OCR reads and its dpi, ``dpi`` where it has no scan; each page
    first turned by ``rotation`` degrees (its /Rotate entry)."""
    document = pypdfium2.PdfDocument(path)
    try:
        pages = []
        for page in document:
            page.set_rotation(rotation)
            pages.append(page_image(page, OcrSettings(dpi=dpi)))
        return pages
    finally:
        document.close()


def page_dpis(path: Path, dpi: int = 300) -> list[int]:
    """The resolution each page of the PDF at ``path`` is read at by OCR."""
    return [page_dpi for _image, page_dpi in page_images(path, dpi)]


def merged_pdf(path: Path, parts: list[Path], info: dict[str, str] | None = None) -> Path:
    """The pages of ``parts`` in order in one PDF, with ``info`` as its information dictionary."""
    writer = PdfWriter()
    for part in parts:
        writer.append(PdfReader(part))
    if info:
        writer.add_metadata(info)
    with path.open("wb") as out:
        writer.write(out)
    return path


def text_pages(tmp_path: Path) -> list[Path]:
    return [write_pdf(tmp_path / f"text{number}.pdf", lines) for number, lines in enumerate(TEXT_PAGES, start=1)]


def page_of(doc: Document, phrase: str) -> dict | None:
    return location_at(doc.metadata, doc.text.lower().index(phrase.lower()))


# --- text layers -------------------------------------------------------------------


def test_every_page_is_a_part_with_its_page_number(tmp_path):
    path = merged_pdf(tmp_path / "report.pdf", text_pages(tmp_path))
    doc = read_one(path)
    assert doc.id == str(path) and doc.title == "report"
    assert doc.metadata["format"] == "pdf" and doc.metadata["pages"] == 2
    assert doc.metadata["locations"]["page"] == [1, 2]
    assert page_of(doc, "northern region") == {"page": 1}
    assert describe(page_of(doc, "harbour extension")) == "page 2"
    assert "ocr_pages" not in doc.metadata  # nothing needed OCR


def test_information_dictionary_fields(tmp_path):
    info = {
        "/Title": "  Annual   Report ",
        "/Author": "Ada Lovelace",
        "/CreationDate": "D:20240131120000+01'00'",
        "/ModDate": "D:20240215083000Z",
    }
    doc = read_one(merged_pdf(tmp_path / "annual.pdf", text_pages(tmp_path), info))
    assert doc.title == "Annual Report"
    assert doc.metadata["author"] == "Ada Lovelace"
    assert doc.metadata["created"] == datetime(2024, 1, 31, 12, tzinfo=timezone(timedelta(hours=1))).isoformat()
    assert doc.metadata["modified"] == datetime(2024, 2, 15, 8, 30, tzinfo=timezone.utc).isoformat()


def test_a_pdf_without_information_has_only_its_own_fields(tmp_path):
    doc = read_one(write_pdf(tmp_path / "plain.pdf", ["Some text"]))
    assert doc.title == "plain"
    assert not {"author", "created", "modified", "title"} & set(doc.metadata)


def test_text_and_blank_pages_need_no_tesseract(tmp_path):
    configure_ocr(OcrSettings(tesseract=str(tmp_path / "no-such-tesseract")))
    text = write_pdf(tmp_path / "plain.pdf", ["Readable without OCR"])
    doc = read_one(merged_pdf(tmp_path / "with-blank.pdf", [text, write_pdf(tmp_path / "blank.pdf", []), text]))
    assert doc.metadata["pages"] == 3 and doc.metadata["locations"]["page"] == [1, 3]
    assert "ocr_pages" not in doc.metadata  # a blank page is not given to Tesseract


# --- scans -------------------------------------------------------------------------


def test_a_scanned_pdf_is_read_through_ocr(tmp_path):
    path = scanned_pdf(tmp_path / "scan.pdf", [lines for lines, _words in SCANS[:2]])
    doc = read_one(path)
    for lines, words in SCANS[:2]:
        assert found(doc.text, words) >= len(words) - 1
    assert doc.metadata["ocr_pages"] == 2 and doc.metadata["ocr_empty_pages"] == 0
    assert 80 <= doc.metadata["ocr_confidence"] <= 100
    assert page_of(doc, "thunderstorms") == {"page": 2}


def test_a_noisy_150_dpi_scanned_pdf_is_read_at_its_own_resolution(tmp_path):
    lines, words = SCANS[1]
    path = scanned_pdf(tmp_path / "fax.pdf", [lines], dpi=150, noise=25.0)
    assert page_dpis(path) == [150]  # not enlarged to the default 300 dpi, which blows the grain up with the text
    doc = read_one(path)
    assert found(doc.text, words) >= len(words) - 2
    assert doc.metadata["ocr_empty_pages"] == 0 and doc.metadata["ocr_skew"] == 0.0


def test_a_scanned_page_is_read_from_its_own_pixels(tmp_path):
    page = render_page(SCANS[0][0], noise=20.0)
    path = tmp_path / "scan.pdf"
    buffer = io.BytesIO()
    page.save(buffer, format="PNG", dpi=(150, 150))
    path.write_bytes(img2pdf.convert([buffer.getvalue()]))
    ((image, dpi),) = page_images(path)
    assert dpi == 150 and image.size == page.size
    assert np.array_equal(np.asarray(image.convert("L")), np.asarray(page))  # not resampled: its grain intact
    ((turned, turned_dpi),) = page_images(path, rotation=90)  # a page turned by /Rotate is rendered upright
    assert turned_dpi == 150 and abs(turned.width - page.height) <= 1 and abs(turned.height - page.width) <= 1


def test_a_bilevel_scanned_pdf_is_read(tmp_path):
    lines, words = SCANS[2]
    buffer = io.BytesIO()
    render_page(lines).point(lambda level: 255 if level > 128 else 0).convert("1").save(
        buffer, format="TIFF", compression="group4", dpi=(DPI, DPI)
    )  # a fax: CCITT group 4 in the PDF
    path = tmp_path / "fax.pdf"
    path.write_bytes(img2pdf.convert([buffer.getvalue()]))
    assert found(read_one(path).text, words) >= len(words) - 1


def test_the_render_resolution_follows_the_scan_within_bounds(tmp_path):
    lines = SCANS[0][0]
    assert page_dpis(scanned_pdf(tmp_path / "s200.pdf", [lines], dpi=200)) == [200]
    assert page_dpis(scanned_pdf(tmp_path / "s1200.pdf", [lines], dpi=1200)) == [MAX_RENDER_DPI]
    assert page_dpis(scanned_pdf(tmp_path / "s75.pdf", [lines], dpi=75)) == [MIN_RENDER_DPI]
    letter = (img2pdf.in_to_pt(8.5), img2pdf.in_to_pt(11))
    width = (img2pdf.ImgSize.abs, img2pdf.in_to_pt(2))
    small = img2pdf.get_layout_fun(letter, (width, None))  # a 2-inch picture on a Letter page
    assert page_dpis(scanned_pdf(tmp_path / "small.pdf", [lines], layout=small), dpi=250) == [250]
    assert page_dpis(write_pdf(tmp_path / "text.pdf", ["No pictures here"]), dpi=250) == [250]


def test_a_mixed_pdf_ocrs_only_its_scanned_pages(tmp_path):
    text1, text2 = text_pages(tmp_path)
    scan1 = scanned_pdf(tmp_path / "scan1.pdf", [SCANS[0][0]])
    scan2 = scanned_pdf(tmp_path / "scan2.pdf", [SCANS[2][0]])
    seen: list[OcrProgress] = []
    set_ocr_progress(seen.append)
    doc = read_one(merged_pdf(tmp_path / "mixed.pdf", [text1, scan1, text2, scan2]))
    assert doc.metadata["pages"] == 4 and doc.metadata["ocr_pages"] == 2
    assert [(event.page, event.done, event.total) for event in seen] == [(2, 1, 2), (4, 2, 2)]
    assert "Quarterly revenue grew in the northern region" in doc.text  # the text layer, untouched
    assert page_of(doc, "northern region") == {"page": 1}
    assert page_of(doc, "monastery") == {"page": 2}
    assert page_of(doc, "harbour extension") == {"page": 3}
    assert page_of(doc, "cathedrals") == {"page": 4}


def test_a_scanned_pdf_without_tesseract_is_one_line(tmp_path):
    configure_ocr(OcrSettings(tesseract=str(tmp_path / "no-such-tesseract")))
    with pytest.raises(NotRead) as raised:
        read_one(scanned_pdf(tmp_path / "scan.pdf", [SCANS[0][0]]))
    assert str(raised.value) == NO_TESSERACT


def test_scanned_pages_over_the_ocr_limit_are_refused(tmp_path):
    configure_ocr(OcrSettings(max_pages=1))
    parts = [scanned_pdf(tmp_path / "scan.pdf", [SCANS[0][0]]), *text_pages(tmp_path)]
    merged = merged_pdf(tmp_path / "long.pdf", [parts[0], parts[1], parts[0]])
    with pytest.raises(Rejected, match=r"^2 pages need OCR, over the 1 page OCR limit$"):
        read_one(merged)


def test_ocr_time_limit_names_the_page_reached(tmp_path):
    merged = merged_pdf(tmp_path / "slow.pdf", [*text_pages(tmp_path), scanned_pdf(tmp_path / "s.pdf", [SCANS[1][0]])])
    with pytest.raises(Rejected) as raised:
        pdf_document(merged.read_bytes(), "slow", "slow", OcrSettings(max_seconds=1e-9))
    assert str(raised.value) == "OCR took over 1e-09 s (stopped at page 3; 0 of 1 pages read)"


def test_a_blank_pdf_has_no_text(tmp_path):
    with pytest.raises(Rejected, match=r"^no extractable text: no text layer, and its page is blank$"):
        read_one(write_pdf(tmp_path / "blank.pdf", []))


# --- bad PDFs ----------------------------------------------------------------------


def test_an_encrypted_pdf_is_refused(tmp_path):
    with pytest.raises(Rejected, match=r"^encrypted PDF, needs a password$"):
        read_one(write_pdf(tmp_path / "locked.pdf", ["secret text"], password="hunter2"))


def test_a_pdf_encrypted_without_a_user_password_is_read(tmp_path):
    writer = PdfWriter(clone_from=write_pdf(tmp_path / "open.pdf", ["Printable but protected"]))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    path = tmp_path / "protected.pdf"
    with path.open("wb") as out:
        writer.write(out)
    assert "Printable but protected" in read_one(path).text


def test_a_malformed_pdf_is_refused_in_one_line(tmp_path):
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"this is not a PDF at all, just some bytes\n" * 3)
    with pytest.raises(Rejected) as raised:
        read_one(path)
    assert str(raised.value).startswith("malformed PDF: ") and "\n" not in str(raised.value)


def test_an_unreadable_file_is_refused(tmp_path):
    with pytest.raises(Rejected, match="No such file"):
        read_one(tmp_path / "gone.pdf")
