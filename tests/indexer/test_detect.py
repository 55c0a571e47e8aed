"""What a file is: its content, checked against its name, with the content winning where the name lies.

Files are made by the real tools (pandoc, the formats' own Python libraries,
Pillow, gzip and tar); a lying name is a real file renamed.
"""

from __future__ import annotations

import email.message
import mailbox
import shutil
import subprocess
from pathlib import Path

import pytest

from indexer.loaders import LoadError, formats, load_path
from indexer.loaders.detect import Detected, detect

needs_pandoc = pytest.mark.skipif(shutil.which("pandoc") is None, reason="pandoc is not installed")
MARKDOWN = "# Tea\n\nGreen tea is steamed right after picking.\n"


def pandoc(tmp_path: Path, name: str) -> Path:
    source = tmp_path / "source.md"
    source.write_text(MARKDOWN, encoding="utf-8")
    target = tmp_path / name
    subprocess.run(
        ["pandoc", "-s", "--metadata", "title=Tea", "-o", str(target), str(source)], check=True, capture_output=True
    )
    return target


def image(path: Path, fmt: str) -> Path:
    from PIL import Image

    Image.new("RGB", (32, 16), "white").save(path, format=fmt)
    return path


@needs_pandoc
@pytest.mark.parametrize(
    "name, fmt",
    [
        ("a.docx", "docx"),
        ("a.pptx", "pptx"),
        ("a.odt", "odt"),
        ("a.epub", "epub"),
        ("a.rtf", "rtf"),
        ("a.html", "html"),
    ],
)
def test_documents_made_by_pandoc_are_recognised(tmp_path, name, fmt):
    assert detect(pandoc(tmp_path, name)).format == fmt


@needs_pandoc
@pytest.mark.parametrize(
    "made, lie", [("a.docx", "report.pdf"), ("a.epub", "book.zip"), ("a.odt", "notes.txt"), ("a.rtf", "letter.txt")]
)
def test_the_content_wins_where_the_name_lies(tmp_path, made, lie):
    real = detect(pandoc(tmp_path, made)).format
    renamed = (tmp_path / made).rename(tmp_path / lie)
    assert detect(renamed).format == real


def test_spreadsheets_and_presentations_by_their_libraries(tmp_path):
    from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet
    from openpyxl import Workbook

    book = Workbook()
    book.active["A1"] = "tea"
    book.save(tmp_path / "sheet.xlsx")
    OpenDocumentSpreadsheet().save(str(tmp_path / "sheet.ods"))
    OpenDocumentPresentation().save(str(tmp_path / "slides.odp"))
    assert detect(tmp_path / "sheet.xlsx").format == "xlsx"
    assert detect(tmp_path / "sheet.ods").format == "ods"
    assert detect(tmp_path / "slides.odp").format == "odp"
    (tmp_path / "sheet.xlsx").rename(tmp_path / "sheet.csv")
    assert detect(tmp_path / "sheet.csv").format == "xlsx"


@pytest.mark.parametrize(
    "fmt, kind, names",
    [
        ("PNG", "png", ["a.png", "a.txt", "scan"]),
        ("JPEG", "jpeg", ["a.jpg", "a.csv"]),
        ("TIFF", "tiff", ["a.tif", "a.pdf"]),
    ],
)
def test_images_keep_their_concrete_kind_whatever_their_name(tmp_path, fmt, kind, names):
    for name in names:
        found = detect(image(tmp_path / name, fmt))
        assert (found.format, found.kind) == ("image", kind), name


def test_other_images_are_unknown_with_their_mime_type(tmp_path):
    found = detect(image(tmp_path / "anim.gif", "GIF"))
    assert found == Detected("unknown", "image/gif")
    assert "image/gif" in formats.unread_reason(found)


@pytest.mark.parametrize(
    "name",
    [
        "README",
        "CHANGES",
        "copyright",
        "guide.rst",
        "paper.tex",
        "run.log",
        "setup.cfg",
        "tool.py",
        "Makefile",
        "data.json",
    ],
)
def test_text_without_a_known_suffix_is_plain_text(tmp_path, name):
    path = tmp_path / name
    path.write_text("Some words of text.\nimport this = that\n", encoding="utf-8")
    assert detect(path).format == "txt"
    (doc,) = load_path(path)
    assert doc.text.startswith("Some words") and doc.metadata["format"] == "txt"


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("notes.md", "md"),
        ("notes.markdown", "md"),
        ("table.csv", "csv"),
        ("records.jsonl", "jsonl"),
        ("page.htm", "html"),
        ("notes.txt", "txt"),
    ],
)
def test_a_text_name_chooses_among_the_text_formats(tmp_path, name, fmt):
    path = tmp_path / name
    path.write_text('<p>{"id": 1, "text": "x"}</p>\n', encoding="utf-8")
    assert detect(path).format == fmt


def test_xml_without_a_known_suffix_is_read_as_html_quietly(tmp_path, capfd, recwarn):
    path = tmp_path / "changes.xml"
    path.write_text('<?xml version="1.0"?>\n<release><note>Fixed the tea timer.</note></release>\n')
    assert detect(path).format == "html"
    (doc,) = load_path(path)
    assert "Fixed the tea timer." in doc.text
    assert capfd.readouterr() == ("", "")  # BeautifulSoup's XMLParsedAsHTMLWarning is held back
    assert len(recwarn) == 0


def test_mail_is_recognised_by_its_headers(tmp_path):
    message = email.message.EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.org", "b@example.org", "Tea"
    message["Date"], message["Message-ID"] = "Mon, 1 Jan 2024 10:00:00 +0000", "<1@example.org>"
    message.set_content("Green tea is steamed.")
    (tmp_path / "message").write_bytes(bytes(message))
    assert detect(tmp_path / "message").format == "eml"
    box = mailbox.mbox(tmp_path / "inbox")
    box.add(message)
    box.flush()
    assert detect(tmp_path / "inbox").format == "mbox"


def test_compressed_files_say_what_is_inside(tmp_path):
    (tmp_path / "README").write_text("Read me first.\n", encoding="utf-8")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "a.txt").write_text("a\n", encoding="utf-8")
    subprocess.run(["tar", "czf", "folder.tar.gz", "folder"], cwd=tmp_path, check=True)
    subprocess.run(["gzip", "README"], cwd=tmp_path, check=True)
    readme = detect(tmp_path / "README.gz")
    assert (readme.format, readme.compression, readme.inner.format) == ("gzip", "gzip", "txt")
    tarball = detect(tmp_path / "folder.tar.gz")
    assert (tarball.format, tarball.compression) == ("tar", "gzip")
    (tmp_path / "folder.tar.gz").rename(tmp_path / "folder.gz")  # the name forgets the tar; the content does not
    assert detect(tmp_path / "folder.gz").format == "tar"


def test_compressed_binary_has_nothing_inside_to_read(tmp_path):
    shutil.copy(shutil.which("true"), tmp_path / "true")
    subprocess.run(["gzip", "true"], cwd=tmp_path, check=True)
    found = detect(tmp_path / "true.gz")
    assert found.inner.format == "unknown"
    reason = formats.unread_reason(found)
    assert reason.startswith("compressed, nothing inside to read") and found.inner.mime in reason


def test_an_executable_is_binary_with_its_mime_type(tmp_path):
    shutil.copy(shutil.which("true"), tmp_path / "true")
    found = detect(tmp_path / "true")
    assert found.format == "unknown" and found.mime.startswith("application/")
    (error,) = load_path(tmp_path / "true")
    assert error.unread and error.reason == f"binary ({found.mime})"


def test_unknown_bytes_with_a_known_name_go_to_that_reader(tmp_path):
    path = tmp_path / "archive.zip"
    path.write_bytes(
        b"\x00\x01\x02\x03" + bytes(range(256)) * 8
    )  # no signature: the name decides, the reader says why not
    assert detect(path).format == "zip"
    (error,) = load_path(path)
    assert not error.unread and "zip" in error.reason


def test_a_format_without_a_reader_is_passed_over_with_a_clear_reason(tmp_path, monkeypatch):
    monkeypatch.setitem(formats.READERS, "docx", formats.Reader((("indexer.loaders.not_written_yet", "read_docx"),)))
    monkeypatch.setattr(formats, "_FOUND", {})
    from docx import Document as WordDocument

    word = WordDocument()
    word.add_paragraph("Green tea is steamed.")
    word.save(tmp_path / "tea.docx")
    (error,) = load_path(tmp_path / "tea.docx")
    assert error == LoadError(str((tmp_path / "tea.docx").resolve()), "no reader for docx yet", unread=True)


def test_a_reader_whose_library_is_missing_names_it(tmp_path, monkeypatch):
    module = tmp_path / "reader_needing_a_library.py"
    module.write_text("import a_library_that_is_not_installed\n\ndef read(path, source, stem):\n    yield None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(formats.READERS, "rtf", formats.Reader((("reader_needing_a_library", "read"),)))
    monkeypatch.setattr(formats, "_FOUND", {})
    path = tmp_path / "letter.rtf"
    path.write_text("{\\rtf1\\ansi Dear reader.}", encoding="ascii")
    (error,) = load_path(path)
    assert error.unread and "a_library_that_is_not_installed" in error.reason


def test_a_readers_warnings_and_logging_never_reach_the_terminal(tmp_path, monkeypatch, capfd, caplog):
    module = tmp_path / "noisy_reader.py"
    module.write_text(
        "import logging, warnings\n"
        "from retriever.documents import Document\n\n"
        "def read(path, source, stem):\n"
        "    warnings.warn('a library complains about this file')\n"
        "    logging.getLogger('some.library').warning('so does its logger')\n"
        "    yield Document(source, path.read_text(), stem)\n"
        "    logging.getLogger('some.library').error('an error still gets through')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(formats.READERS, "rtf", formats.Reader((("noisy_reader", "read"),)))
    monkeypatch.setattr(formats, "_FOUND", {})
    path = tmp_path / "letter.rtf"
    path.write_text("{\\rtf1\\ansi Dear reader.}", encoding="ascii")
    with pytest.warns(UserWarning, match="outside the reader") as caught:
        (doc,) = load_path(path)
        import warnings

        warnings.warn("outside the reader")  # the caller's own warnings are untouched
    assert doc.text.startswith("{\\rtf1")
    assert [str(w.message) for w in caught] == ["outside the reader"]
    assert [record.getMessage() for record in caplog.records] == ["an error still gets through"]
    assert "complains" not in capfd.readouterr().err
