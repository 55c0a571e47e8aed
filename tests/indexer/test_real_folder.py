"""A folder as people keep one, indexed by ``semsearch index``: a file per format, each found by its own word.

The files are made by the tools people make them with (``benchmarks.format_files``:
pandoc, python-pptx, openpyxl, ``email`` and ``mailbox``, Pillow scans and
img2pdf, LibreOffice for the text PDF), a few sentences each, every one with
a word no other file holds. Paged files (the text PDF, the scanned PDF, the
TIFF, the presentation) hold their word on the second page or slide, after
more text than one chunk of the tiny model's window, so the chunk that holds
it starts on that page.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from app.cli import main
from benchmarks.format_files import FileSpec, SourceText, libreoffice_available, make_folder
from benchmarks.scan_images import ScanStyle, fonts_available
from retriever import Collection

pytestmark = pytest.mark.skipif(
    not (shutil.which("pandoc") and shutil.which("tesseract") and fonts_available()),
    reason="needs pandoc, tesseract and a TrueType face under /usr/share/fonts to make and read the files",
)

FIRST_PAGE = (
    "The survey team met at dawn to review the plan for the week. Each member carried notes, maps and a small "
    "camera, and they agreed to record every finding in the shared log before noon."
)
SECOND_PAGE = (
    "After lunch the group walked along the northern ridge and counted the nests they could see from the path. "
    "The weather stayed calm, and the light was good enough for clear photographs of every slope. Near the end of "
    "the day the leader wrote a short summary of what they had seen, and the others checked it against their own "
    "records before they packed up their bags and walked back down to the village. The last entry of the day "
    "mentions the {word} found beside the old stone wall."
)
SHORT = "A short note kept with the other papers of the office. It mentions the {word} only once, here."
# format -> the word only that file holds
WORDS = {
    "docx": "harpsichord",
    "odt": "marmalade",
    "epub": "lighthouse",
    "rtf": "wheelbarrow",
    "html": "porcupine",
    "xlsx": "trombone",
    "eml": "dandelion",
    "png": "saxophone",
    "jpg": "thermostat",
    "pptx": "cinnamon",
    "tiff": "buttermilk",
    "scan-pdf": "grasshopper",
    "pdf": "kingfisher",
}
MAILBOX_WORDS = ("blacksmith", "gooseberry")
PAGED = {"pdf": "page", "scan-pdf": "page", "tiff": "page", "pptx": "slide"}
STYLES = {
    "png": ScanStyle(dpi=200),
    "jpg": ScanStyle(dpi=200, degrees=1.5),
    "tiff": ScanStyle(dpi=200, noise=6.0),
    "scan-pdf": ScanStyle(dpi=300, degrees=-1.0),
}


def source(fmt: str, word: str) -> SourceText:
    if fmt in PAGED:
        return SourceText(fmt, f"Field notes {fmt}", (FIRST_PAGE, SECOND_PAGE.format(word=word)))
    return SourceText(fmt, f"Office note {fmt}", (SHORT.format(word=word),))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The made folder, and the formats it holds (the text PDF only where LibreOffice is installed)."""
    root = tmp_path_factory.mktemp("real-folder")
    formats = [fmt for fmt in WORDS if fmt != "pdf" or libreoffice_available()]
    specs = [FileSpec(fmt, f"note-{fmt}", (source(fmt, WORDS[fmt]),), STYLES.get(fmt)) for fmt in formats]
    mails = tuple(SourceText(f"mail{n}", f"Letter {n}", (SHORT.format(word=w),)) for n, w in enumerate(MAILBOX_WORDS))
    specs.append(FileSpec("mbox", "letters", mails))
    made = make_folder(specs, root / "files", root / "work")
    return root / "files", {item.format: item for item in made}


@pytest.fixture(scope="module")
def indexed(folder, tiny_model_dir, tmp_path_factory):
    """``semsearch index FOLDER -c COL --json``: the exit code, its report and the collection's path."""
    files, _made = folder
    collection = tmp_path_factory.mktemp("real-folder-collection") / "col"
    capture = tmp_path_factory.mktemp("real-folder-report") / "report.json"
    with capture.open("w") as out, pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", out)
        code = main(["index", str(files), "-c", str(collection), "--model", str(tiny_model_dir), "--json", "-q"])
    return code, json.loads(capture.read_text()), collection


def test_every_file_is_indexed_without_a_load_error(folder, indexed):
    files, made = folder
    code, report, _collection = indexed
    assert (code, report["skipped"], report["not_read"]) == (0, [], [])
    assert report["files"] == len(made) == len(list(files.iterdir()))
    assert report["added"] == len(made) - 1 + len(MAILBOX_WORDS)


def test_each_file_is_found_by_its_own_word(folder, indexed, tiny_model_dir):
    files, made = folder
    with Collection.open(indexed[2], tiny_model_dir) as collection:
        for fmt, word in WORDS.items():
            if fmt not in made:
                continue
            hits = collection.search(word, k=3, mode="bm25")
            assert [hit.id for hit in hits] == [os.path.realpath(files / made[fmt].path)], (fmt, word)
        for number, word in enumerate(MAILBOX_WORDS, start=1):
            (hit,) = collection.search(word, k=3, mode="bm25")
            assert hit.id == f"{os.path.realpath(files / made['mbox'].path)}#{number}"


def test_paged_files_say_the_page_or_slide_of_the_word(folder, indexed, tiny_model_dir):
    _files, made = folder
    with Collection.open(indexed[2], tiny_model_dir) as collection:
        for fmt, label in PAGED.items():
            if fmt not in made:
                continue
            (hit,) = collection.search(WORDS[fmt], k=1, mode="bm25")
            assert WORDS[fmt] in hit.text.lower(), fmt
            assert hit.location == {label: 2}, (fmt, hit.location)
