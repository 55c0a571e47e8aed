"""EPUB books: chapters in reading order, headings as sections, Dublin Core metadata, DRM and damage refused."""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path

from bs4 import XMLParsedAsHTMLWarning
from ebooklib import epub

from indexer.loaders.ebook import read_epub
from tests.indexer.made_files import MARKDOWN, cut_in_half, located, needs_pandoc, pandoc, rejected

ENCRYPTION = """<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
  <enc:EncryptedData>
    <enc:EncryptionMethod Algorithm="{algorithm}"/>
    <enc:CipherData><enc:CipherReference URI="{target}"/></enc:CipherData>
  </enc:EncryptedData>
</encryption>
"""


def only(path: Path):
    (document,) = read_epub(path, str(path), path.stem)
    return document


def make_book(path: Path) -> Path:
    """Two chapters by ebooklib: the second has no heading of its own, so it stays in the first one's section."""
    book = epub.EpubBook()
    book.set_identifier("book-1")
    book.set_title("Rivers of the World")
    book.set_language("en")
    book.add_author("Ada Lovelace")
    book.add_author("Charles Babbage")
    book.add_metadata("DC", "date", "2024-03-05")
    first = epub.EpubHtml(title="Sources", file_name="one.xhtml", lang="en")
    first.content = "<h1>Sources</h1><p>Springs feed the streams.</p><h2>Glaciers</h2><p>Ice melts in summer.</p>"
    second = epub.EpubHtml(title="More", file_name="two.xhtml", lang="en")
    second.content = "<p>Meltwater keeps flowing.</p>"
    for chapter in (first, second):
        book.add_item(chapter)
    book.add_item(epub.EpubNav())
    book.spine = ["nav", first, second]
    epub.write_epub(str(path), book)
    return path


@needs_pandoc
def test_epub_from_pandoc_keeps_sections_and_metadata(tmp_path):
    path = pandoc(tmp_path, "epub", MARKDOWN, "--toc")
    document = only(path)
    assert document.title == "Field Notes"
    assert located(document, "Amazon | 6400") == {"section": ["Rivers", "Deltas"]}
    assert located(document, "Mountains rise") == {"section": ["Mountains"]}
    assert document.text.count("Deltas") == 1  # the table of contents (nav) is not read
    assert "first item about silt\nsecond item about sand" in document.text
    assert document.metadata["author"] == "Ada Lovelace"
    assert document.metadata["created"] == "2024-03-05"
    assert document.metadata["format"] == "epub"


def test_epub_sections_run_on_across_chapter_files(tmp_path):
    document = only(make_book(tmp_path / "rivers.epub"))
    assert document.title == "Rivers of the World"
    assert located(document, "Ice melts") == {"section": ["Sources", "Glaciers"]}
    assert located(document, "Meltwater keeps flowing") == {"section": ["Sources", "Glaciers"]}
    assert document.text.index("Springs") < document.text.index("Meltwater")
    assert document.metadata["author"] == "Ada Lovelace; Charles Babbage"
    assert document.metadata["language"] == "en"


def test_epub_xhtml_reads_without_xml_parsed_as_html_warnings(tmp_path):
    path = make_book(tmp_path / "rivers.epub")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        only(path)
    assert not [warning for warning in caught if issubclass(warning.category, XMLParsedAsHTMLWarning)]


def with_encryption(path: Path, algorithm: str, target: str) -> Path:
    locked = path.with_name(f"locked-{path.name}")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(locked, "w") as out:
        for info in source.infolist():
            out.writestr(info, source.read(info.filename))
        out.writestr("META-INF/encryption.xml", ENCRYPTION.format(algorithm=algorithm, target=target))
    return locked


def test_drm_encrypted_epub_is_refused(tmp_path):
    locked = with_encryption(
        make_book(tmp_path / "rivers.epub"), "http://www.w3.org/2001/04/xmlenc#aes128-cbc", "EPUB/one.xhtml"
    )
    assert rejected(read_epub, locked) == "DRM-protected (encrypted) EPUB; its chapters cannot be read"


def test_epub_with_obfuscated_fonts_only_is_read(tmp_path):
    book = with_encryption(
        make_book(tmp_path / "rivers.epub"), "http://www.idpf.org/2008/embedding", "EPUB/fonts/face.otf"
    )
    assert "Springs feed the streams." in only(book).text


def test_epub_cut_in_half_is_refused(tmp_path):
    path = make_book(tmp_path / "rivers.epub")
    assert rejected(read_epub, cut_in_half(path, tmp_path)).startswith("corrupt or truncated epub file")
