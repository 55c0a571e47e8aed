"""EPUB e-books (ebooklib): the chapters in reading order as one document, headings as sections.

The spine's XHTML documents are read in order (the navigation document
left out) with ``markup.html_parts``; their ``<h1>``-``<h6>`` headings give
the ``section`` paths, which run on from one chapter file into the next
(a chapter split over several files stays in its section).

Metadata: ``source``, ``format`` (``"epub"``), ``author`` (the
``dc:creator`` names, joined by ``"; "``), ``created`` (``dc:date``),
``modified`` (``dcterms:modified``) and ``language`` (``dc:language``)
where given; the title is ``dc:title``, else the stem. A book whose
chapters are encrypted (DRM) is refused as such; fonts obfuscated as the
EPUB standard allows do not count.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ebooklib
from ebooklib import epub

from indexer.loaders.common import Rejected
from indexer.loaders.located import BoundedText, located_document
from indexer.loaders.markup import html_parts
from indexer.loaders.packages import library_errors, open_package, parse_xml_part
from indexer.loaders.props import one_line, property_fields
from indexer.loaders.sections import SectionPath
from retriever.documents import Document

_ENCRYPTION = "META-INF/encryption.xml"
# Font obfuscation (IDPF, Adobe): fonts only, the text stays readable.
_FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_ENCRYPTION_METHOD = "{http://www.w3.org/2001/04/xmlenc#}EncryptionMethod"


def read_epub(path: Path, source: str, stem: str) -> Iterator[Document]:
    """An e-book as one document, its chapters' headings as sections.

    Raises:
        Rejected: the book is DRM-encrypted, damaged, over a limit, or holds neither text nor title.
    """
    with open_package(path, "epub") as package, library_errors("epub"):
        _refuse_drm(package)
    with library_errors("epub"):
        book = epub.read_epub(str(path), options={"ignore_ncx": True})
        title, fields = _book_metadata(book)
        built = _chapters_text(book)
    metadata = {"source": source, "format": "epub"} | fields
    yield located_document(built, source, title, stem, metadata)


def _chapters_text(book: Any) -> BoundedText:
    """The text of the spine's documents in order, a part per heading, labelled with its section."""
    built, path = BoundedText("epub"), SectionPath()
    for item_id, _linear in book.spine:
        item = book.get_item_with_id(item_id)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT or isinstance(item, epub.EpubNav):
            continue
        _, parts = html_parts(item.get_content().decode("utf-8", "replace"))
        for part in parts:
            built.add(part.text, section=path.enter(part.level, part.heading) if part.level else path.current)
    return built


def _book_metadata(book: Any) -> tuple[str, dict]:
    """``(title, {author, created, modified, language})`` from the package's Dublin Core metadata."""

    def values(namespace: str, name: str) -> list[str]:
        return [one_line(value) for value, _ in book.get_metadata(namespace, name) if one_line(value)]

    title = next(iter(values("DC", "title")), "")
    modified = next(
        (
            one_line(value)
            for value, attributes in book.get_metadata("OPF", None)
            if attributes.get("property") == "dcterms:modified" and value
        ),
        None,
    )
    fields = property_fields(values("DC", "creator"), next(iter(values("DC", "date")), None), modified)
    language = next(iter(values("DC", "language")), "")
    return title, fields | ({"language": language} if language else {})


def _refuse_drm(package: zipfile.ZipFile) -> None:
    """Refuse a book whose ``encryption.xml`` encrypts anything but fonts.

    Raises:
        Rejected: the book is DRM-protected.
    """
    if _ENCRYPTION not in package.namelist():
        return
    root = parse_xml_part(package.read(_ENCRYPTION))
    methods = {method.get("Algorithm", "") for method in root.iter(_ENCRYPTION_METHOD)}
    if methods - _FONT_OBFUSCATION:
        raise Rejected("DRM-protected (encrypted) EPUB; its chapters cannot be read")
