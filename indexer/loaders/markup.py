"""Formats that need a parser: the text and title of an HTML page, and of a PDF file."""

from __future__ import annotations

import io
import logging
import re
import time

from bs4 import BeautifulSoup
from pypdf import PasswordType, PdfReader

from indexer.loaders.common import Rejected, error_line
from retriever.documents import Document

_HTML_DROPPED_TAGS = ("script", "style", "noscript", "template", "head")

_HTML_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main",
    "nav", "ol", "p", "pre", "section", "summary", "table", "td", "th", "tr", "ul",
)

# Bounds on one PDF's extraction (beside the file size limit every single-document file has).
MAX_PDF_PAGES = 5_000
MAX_PDF_CHARS = 20_000_000  # about 4,000 pages of dense text
MAX_PDF_SECONDS = 120.0

logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed PDFs are reported as LoadError


def parse_html(markup: str) -> tuple[str, str]:
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


def pdf_document(data: bytes, source: str, stem: str) -> Document:
    """The document of a PDF file: its pages' text, separated by blank lines.

    Raises:
        Rejected: the PDF is malformed, locked by a password, or has no text.
    """
    title, pages = _read_pdf(data)
    text = "\n\n".join(pages)
    if not text.strip():
        raise Rejected("no extractable text (scanned PDF?)")
    metadata = {"source": source, "format": "pdf", "pages": len(pages)}
    return Document(id=source, text=text, title=title or stem, metadata=metadata)


def _read_pdf(data: bytes) -> tuple[str, list[str]]:
    """``(info title or "", text of each page)`` of a PDF.

    Raises:
        Rejected: pypdf cannot read the file, or it needs a password.
    """
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise Rejected("encrypted PDF, needs a password")
        title = reader.metadata.title if reader.metadata else None
        pages = _pdf_pages(reader)
    except Rejected:
        raise
    except Exception as exc:  # pypdf raises many exception types on malformed files
        raise Rejected(f"malformed PDF: {error_line(exc)}") from None
    return (" ".join(title.split()) if isinstance(title, str) else ""), pages


def _pdf_pages(reader: PdfReader) -> list[str]:
    """The text of each page, within ``MAX_PDF_PAGES``, ``MAX_PDF_CHARS`` and ``MAX_PDF_SECONDS``.

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
