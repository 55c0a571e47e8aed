"""Formats that need a parser: the text and title of an HTML page, and of a PDF file."""

from __future__ import annotations

import io
import logging
import re

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
        pages = [page.extract_text() for page in reader.pages]
    except Rejected:
        raise
    except Exception as exc:  # pypdf raises many exception types on malformed files
        raise Rejected(f"malformed PDF: {error_line(exc)}") from None
    return (" ".join(title.split()) if isinstance(title, str) else ""), pages
