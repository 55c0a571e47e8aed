"""PDF files: each page's text layer, OCR for the pages without one, a page location per page.

A PDF gives one document (id: its source). Every page is one part of the
text, labelled with its page number in ``metadata["locations"]`` (see
``retriever.locations``), so a hit says "page 12". Pages whose text layer is
blank are read by Tesseract (``indexer.loaders.ocr``); pages with text keep
their text layer and are never OCR'd. A scanned page that is one image
filling the page is read from that image's own pixels; any other page is
rendered with pypdfium2 at the resolution of its largest image (within
``MIN_RENDER_DPI`` to ``MAX_RENDER_DPI``), or at ``OcrSettings.dpi`` when it
has none covering most of it (``page_image``).

Metadata: ``source``, ``format`` ("pdf"), ``pages``, ``author``, ``created``
and ``modified`` (ISO 8601) where the PDF's information dictionary has them,
``locations``, and after OCR ``ocr_pages``, ``ocr_empty_pages``,
``ocr_confidence`` and ``ocr_skew`` (see ``OcrRun.metadata``). The title is
the information dictionary's, else the file's stem.
"""

from __future__ import annotations

import io
import itertools
import logging
import math
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pypdfium2
from PIL import Image
from pypdf import PasswordType, PdfReader

from indexer.loaders.common import Rejected, error_line
from indexer.loaders.ocr import OcrRun, OcrSettings, ocr_settings
from retriever.documents import Document
from retriever.locations import LOCATIONS_KEY, LocatedText

# Bounds on one PDF's text (beside the file size limit every single-document file has; OCR has its own).
MAX_PDF_PAGES = 5_000
MAX_PDF_CHARS = 20_000_000  # about 4,000 pages of dense text
MAX_PDF_SECONDS = 120.0  # text layer extraction; OCR is bounded by OcrSettings.max_seconds

# The resolution a scanned page is rendered at for OCR follows its image's, within these bounds.
MIN_RENDER_DPI = 150
MAX_RENDER_DPI = 400
SCAN_SHARE = 0.5  # the least share of a page an image covers to count as the page's scan
WHOLE_PAGE_SHARE = 0.95  # the least share of a page its only image covers to be read as it is, unrendered
MAX_PAGE_IMAGES = 1_000

_POINTS_PER_INCH = 72

logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed PDFs are reported as LoadError


def read_pdf(path: Path, source: str, stem: str) -> Iterator[Document]:
    """The one document of the PDF file at ``path``.

    Args:
        path: The file (its size already checked by the caller).
        source: The document's id and ``metadata["source"]``.
        stem: The title when the PDF names none.

    Raises:
        Rejected: the file cannot be read, is malformed or locked by a password,
            passes a bound, has no text even after OCR, or needs OCR that cannot run.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    yield pdf_document(data, source, stem)


def pdf_document(data: bytes, source: str, stem: str, settings: OcrSettings | None = None) -> Document:
    """The document of a PDF's bytes: one part per page, its text layer or, where that is blank, its OCR.

    Args:
        data: The PDF file's bytes.
        source: The document's id and ``metadata["source"]``.
        stem: The title when the PDF names none.
        settings: OCR settings (default: those in force, ``ocr.ocr_settings()``).

    Raises:
        Rejected: as ``read_pdf``.
    """
    reader = _open(data)
    info, layers = _read_guarded(lambda: (_info(reader), _page_texts(reader)))
    scanned = [number for number, text in enumerate(layers, start=1) if not text.strip()]
    ocr_texts, ocr_fields = _ocr_pages(data, scanned, source, settings) if scanned else ({}, {})
    built = LocatedText()
    for number, text in enumerate(layers, start=1):
        built.add(ocr_texts.get(number, text), page=number)
    if len(built) > MAX_PDF_CHARS:
        raise Rejected(f"PDF text is over the {MAX_PDF_CHARS} character limit (after OCR of {len(scanned)} pages)")
    if not built.parts:
        raise Rejected(_no_text_reason(len(layers), ocr_fields))
    title = info.pop("title", "")
    metadata = {"source": source, "format": "pdf", "pages": len(layers)} | info | ocr_fields
    metadata[LOCATIONS_KEY] = built.locations()
    return Document(id=source, text=built.text, title=title or stem, metadata=metadata)


def _open(data: bytes) -> PdfReader:
    """A reader over ``data``, decrypted when the PDF's user password is empty.

    Raises:
        Rejected: pypdf cannot read the file, or it needs a password.
    """
    reader = _read_guarded(lambda: PdfReader(io.BytesIO(data)))
    if _read_guarded(lambda: reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED):
        raise Rejected("encrypted PDF, needs a password")
    return reader


def _read_guarded(step: Any) -> Any:
    """``step()``, with any pypdf failure turned into ``Rejected("malformed PDF: ...")``."""
    try:
        return step()
    except Rejected:
        raise
    except Exception as exc:  # pypdf raises many exception types on malformed files
        raise Rejected(f"malformed PDF: {error_line(exc)}") from None


def _info(reader: PdfReader) -> dict[str, Any]:
    """``title``, ``author``, ``created`` and ``modified`` (ISO 8601) from the information dictionary, where set.

    A field that is missing or unreadable (a malformed date) is left out.
    """
    fields: dict[str, Any] = {}
    try:
        info = reader.metadata
    except Exception:  # noqa: BLE001 - an unreadable information dictionary is left out, the text still counts
        return fields
    if info is None:
        return fields
    for name, read in (
        ("title", lambda: info.title),
        ("author", lambda: info.author),
        ("created", lambda: info.creation_date),
        ("modified", lambda: info.modification_date),
    ):
        try:
            value = read()
        except Exception:  # noqa: BLE001 - a malformed field is left out, the text still counts
            continue
        if isinstance(value, datetime):
            fields[name] = value.isoformat()
        elif isinstance(value, str) and value.strip():
            fields[name] = " ".join(value.split())
    return fields


def _page_texts(reader: PdfReader) -> list[str]:
    """The text layer of each page, within ``MAX_PDF_PAGES``, ``MAX_PDF_CHARS`` and ``MAX_PDF_SECONDS``.

    Time is checked between pages, so one page's extraction is bounded only
    by the file's size limit.

    Raises:
        Rejected: a limit is passed (the reason names it).
    """
    total = len(reader.pages)
    if total > MAX_PDF_PAGES:
        raise Rejected(f"PDF has {total} pages, over the {MAX_PDF_PAGES} page limit")
    started, chars, pages = time.monotonic(), 0, []
    for number, page in enumerate(reader.pages, start=1):
        pages.append(page.extract_text())
        chars += len(pages[-1])
        if chars > MAX_PDF_CHARS:
            raise Rejected(f"PDF text is over the {MAX_PDF_CHARS} character limit (at page {number} of {total})")
        if time.monotonic() - started > MAX_PDF_SECONDS and number < total:
            raise Rejected(
                f"PDF text extraction took over {MAX_PDF_SECONDS:g} s (stopped after {number} of {total} pages)"
            )
    return pages


def _ocr_pages(
    data: bytes, numbers: list[int], source: str, settings: OcrSettings | None
) -> tuple[dict[int, str], dict[str, Any]]:
    """``({page number: OCR text}, OCR metadata)`` for the pages ``numbers`` (from 1), rendered with pypdfium2.

    Raises:
        Rejected: an OCR bound is passed, OCR cannot run, or pdfium cannot render the file.
    """
    run = OcrRun(source, len(numbers), settings or ocr_settings())
    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        raise Rejected(f"cannot render the PDF for OCR: {error_line(exc)}") from None
    try:
        texts = {}
        for number in numbers:
            run.check_time(number)
            texts[number] = _read_page(document, number, run)
    finally:
        document.close()
    return texts, run.metadata()


def _read_page(document: pypdfium2.PdfDocument, number: int, run: OcrRun) -> str:
    """Page ``number`` as ``page_image`` gives it, read by ``run``.

    Raises:
        Rejected: pdfium cannot render the page, or OCR fails.
    """
    try:
        page = document[number - 1]
        try:
            image, dpi = page_image(page, run.settings)
        finally:
            page.close()
    except (pypdfium2.PdfiumError, IndexError, ValueError) as exc:  # pdfium may see fewer pages than pypdf
        raise Rejected(f"cannot render page {number} for OCR: {error_line(exc)}") from None
    return run.read(image, number, dpi=dpi)


def page_image(page: pypdfium2.PdfPage, settings: OcrSettings) -> tuple[Image.Image, int]:
    """A page as the image to OCR, and its resolution in dpi.

    A page that is one upright image filling it (the usual scanned page) is
    that image's own pixels, when its resolution is within ``MIN_RENDER_DPI``
    to ``MAX_RENDER_DPI`` and its size within ``settings.max_pixels``. Any
    other page is rendered in grayscale at ``_render_dpi`` (less where the
    pixel bound needs it).

    Raises:
        pypdfium2.PdfiumError: pdfium cannot decode or render the page.
    """
    scan = _whole_page_scan(page, settings)
    if scan is not None:
        return scan
    width, height = page.get_size()
    scale = _render_dpi(page, settings.dpi) / _POINTS_PER_INCH
    if width * height * scale * scale > settings.max_pixels:
        scale = math.sqrt(settings.max_pixels / (width * height)) * 0.999
    bitmap = page.render(scale=scale, grayscale=True)
    try:
        return bitmap.to_pil().copy(), round(scale * _POINTS_PER_INCH)
    finally:
        bitmap.close()


def _whole_page_scan(page: pypdfium2.PdfPage, settings: OcrSettings) -> tuple[Image.Image, int] | None:
    """The page's own image and its dpi when the page is nothing but one upright image covering
    ``WHOLE_PAGE_SHARE`` of it, at a resolution within the render bounds and pixels within the settings'; else None."""
    if page.get_rotation():
        return None
    objects = list(itertools.islice(page.get_objects(max_depth=1), 2))
    if len(objects) != 1 or objects[0].type != pypdfium2.raw.FPDF_PAGEOBJ_IMAGE:
        return None
    image = objects[0]
    across, skew_x, skew_y, up, _left, _bottom = image.get_matrix().get()
    width, height = page.get_size()
    if skew_x or skew_y or across <= 0 or up <= 0 or across * up < WHOLE_PAGE_SHARE * width * height:
        return None
    pixels_across, pixels_up = image.get_px_size()
    dpi = round(math.sqrt(pixels_across * pixels_up / (across * up)) * _POINTS_PER_INCH)
    if not MIN_RENDER_DPI <= dpi <= MAX_RENDER_DPI or pixels_across * pixels_up > settings.max_pixels:
        return None
    return image.get_bitmap(render=False).to_pil().copy(), dpi  # pdfium's own bitmap, freed by pypdfium2


def _render_dpi(page: pypdfium2.PdfPage, dpi: int) -> int:
    """The resolution to render a page at: its scan's own, within ``MIN_RENDER_DPI`` to ``MAX_RENDER_DPI``.

    A page's scan is its largest image when that covers at least
    ``SCAN_SHARE`` of the page; its resolution is its pixels over the inches
    it covers (square root of the ratio of areas, so a turned or stretched
    image counts too). A page without such an image is rendered at ``dpi``.
    At most ``MAX_PAGE_IMAGES`` of a page's images are looked at.
    """
    width, height = page.get_size()
    page_area = width * height
    largest, pixels = 0.0, 0
    for seen, image in enumerate(page.get_objects(filter=[pypdfium2.raw.FPDF_PAGEOBJ_IMAGE], max_depth=3)):
        if seen >= MAX_PAGE_IMAGES:
            break
        left, bottom, right, top = image.get_bounds()
        area = max(0.0, right - left) * max(0.0, top - bottom)
        if area > largest:
            image_width, image_height = image.get_px_size()
            largest, pixels = area, image_width * image_height
    if page_area <= 0 or largest < SCAN_SHARE * page_area or not pixels:
        return dpi
    own = math.sqrt(pixels / largest) * _POINTS_PER_INCH
    return round(min(max(own, MIN_RENDER_DPI), MAX_RENDER_DPI))


def _no_text_reason(pages: int, ocr_fields: dict[str, Any]) -> str:
    """Why a PDF of ``pages`` pages gave no text: no text layer, and OCR read nothing (or every page was blank)."""
    read = ocr_fields.get("ocr_pages", 0)
    if read:
        return f"no extractable text: no text layer, and OCR read nothing on {read} of {pages} pages"
    return "no extractable text: no text layer, and " + ("its page is blank" if pages == 1 else "its pages are blank")
