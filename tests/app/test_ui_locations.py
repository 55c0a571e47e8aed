"""The UI shows where each hit is and opens its original there: a PDF at its page, other files as a download."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from pypdf import PdfReader, PdfWriter  # noqa: E402

from app.ui import originals  # noqa: E402
from app.ui.originals import find_original, pdf_opener_html, read_original  # noqa: E402
from retriever.locations import LocatedText  # noqa: E402
from tests.app.test_ui import app, html_of, no_failure  # noqa: E402
from tests.indexer.test_loaders import write_pdf  # noqa: E402

FILLER = "Rivers flow into the sea and mountains rise above the clouds. " * 8  # past a chunk window
PAGES = ["alpha zebra quartz", "bravo walrus harbour"]


def two_page_pdf(path: Path) -> Path:
    writer = PdfWriter()
    for number, phrase in enumerate(PAGES):
        writer.append(PdfReader(write_pdf(path.with_name(f"page{number}.pdf"), [phrase])))
    with path.open("wb") as out:
        writer.write(out)
    return path


def located(parts: list[tuple[dict, str]]) -> tuple[str, dict]:
    built = LocatedText()
    for labels, phrase in parts:
        built.add(f"{FILLER}{phrase}.", **labels)
    return built.text, built.locations()


@pytest.fixture()
def originals_collection(tmp_path, tiny_embedder) -> tuple[Path, Path]:
    """``(collection, files)``: a PDF, a text file and a gone file, each a document naming it as its source."""
    from retriever import Collection

    files = tmp_path / "files"
    files.mkdir()
    pdf = two_page_pdf(files / "report.pdf")
    notes = files / "notes.txt"
    notes.write_text("Charlie falcon lantern, under Scope.", encoding="utf-8")
    report_text, report_columns = located([({"page": 1}, PAGES[0]), ({"page": 2}, PAGES[1])])
    notes_text, notes_columns = located(
        [({"section": ["Intro"]}, "delta otter"), ({"section": ["Intro", "Scope"]}, "charlie falcon lantern")]
    )
    docs = [
        {
            "id": str(pdf),
            "title": "Report",
            "text": report_text,
            "metadata": {"source": str(pdf), "format": "pdf", "locations": report_columns},
        },
        {
            "id": str(notes),
            "title": "Notes",
            "text": notes_text,
            "metadata": {"source": str(notes), "format": "txt", "locations": notes_columns},
        },
        {
            "id": "gone",
            "title": "Gone",
            "text": f"{FILLER} echo badger compass.",
            "metadata": {"source": str(files / "deleted.docx")},
        },
    ]
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.upsert(docs)
    return tmp_path / "col", files


def opener_of(at) -> str:
    (frame,) = at.get("iframe")
    return frame.proto.srcdoc


def test_a_pdf_hit_shows_its_page_and_opens_there(monkeypatch, originals_collection):
    root, files = originals_collection
    at = app(monkeypatch, root, q=PAGES[1], mode="bm25", k="1")
    no_failure(at)
    assert '<span class="ss-place">page 2</span>' in html_of(at)
    assert not at.get("iframe")  # the bytes go to the browser only for the card asked
    (button,) = [b for b in at.button if b.label == "Open report.pdf at page 2"]
    button.click().run()
    no_failure(at)
    page = opener_of(at)
    assert "Open report.pdf at page 2 ↗" in page and '"#page=2"' in page
    payload = re.search(r'fetch\("data:application/pdf;base64,([A-Za-z0-9+/=]+)"\)', page).group(1)
    assert base64.b64decode(payload) == (files / "report.pdf").read_bytes()


def test_other_files_are_downloads_and_a_gone_file_says_so(monkeypatch, originals_collection):
    root, _ = originals_collection
    at = app(monkeypatch, root, q="charlie falcon lantern", mode="bm25", k="1")
    no_failure(at)
    assert '<span class="ss-place">Intro › Scope</span>' in html_of(at)
    assert [d.proto.label for d in at.get("download_button")] == ["Download notes.txt"]
    assert not at.get("iframe") and not [b for b in at.button if b.label.startswith("Open ")]

    at = app(monkeypatch, root, q="echo badger compass", mode="bm25", k="1")
    no_failure(at)
    assert 'class="ss-place"' not in html_of(at) and not at.get("download_button")
    assert any("no longer there" in caption.value for caption in at.caption)


def test_the_document_view_shows_the_place_and_opens_the_pdf_at_once(monkeypatch, originals_collection):
    from retriever import Collection

    root, files = originals_collection
    pdf = str(files / "report.pdf")
    with Collection.open(root) as col:
        (hit,) = col.search(PAGES[1], k=1, mode="bm25")
    at = app(monkeypatch, root, doc=pdf, span=f"{hit.start}-{hit.end}")
    no_failure(at)
    assert '<span class="ss-place">page 2</span>' in html_of(at)
    assert '"#page=2"' in opener_of(at)
    (shown,) = at.json
    assert "locations" not in shown.value and "source" in shown.value  # the columns are not a field to read


def test_only_a_regular_file_named_by_an_absolute_source_is_served(tmp_path, monkeypatch):
    pdf = two_page_pdf(tmp_path / "report.pdf")
    found, reason = find_original({"source": str(pdf)})
    assert reason == "" and found.pdf and found.opens and found.name == "report.pdf" and found.size > 0
    assert read_original(found) == pdf.read_bytes()
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    csv, _ = find_original({"source": str(tmp_path / "data.csv")})
    assert not csv.pdf and not csv.opens and csv.mime == "text/csv"

    (tmp_path / "link.pdf").symlink_to(pdf)
    os.mkfifo(tmp_path / "pipe")
    for metadata, words in [
        ({"source": str(tmp_path / "missing.pdf")}, "no longer there"),
        ({"source": str(tmp_path / "link.pdf")}, "a link"),
        ({"source": str(tmp_path)}, "not a regular file"),
        ({"source": str(tmp_path / "pipe")}, "not a regular file"),
        ({"source": f"{tmp_path}/bundle.zip::inner.pdf"}, "inside an archive"),
    ]:
        assert find_original(metadata)[0] is None and words in find_original(metadata)[1], metadata
    for metadata in [{}, {"source": "report.pdf"}, {"source": 3}, {"source": "/a\0b"}, None]:
        assert find_original(metadata) == (None, "")

    pdf.unlink()
    pdf.symlink_to(tmp_path / "data.csv")  # swapped for a link after it was found
    with pytest.raises(OSError):
        read_original(found)
    monkeypatch.setattr(originals, "MAX_DOWNLOAD_BYTES", 3)
    assert "too large" in find_original({"source": str(tmp_path / "data.csv")})[1]


def test_the_opener_escapes_its_label_and_carries_the_bytes():
    page = pdf_opener_html(b"%PDF-1.4 bytes", "Open <b>x</b>.pdf", 7)
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page and '"#page=7"' in page
    assert base64.b64encode(b"%PDF-1.4 bytes").decode() in page
    assert '""' in pdf_opener_html(b"%PDF", "Open", None)  # no page: the first


def test_pasted_text_may_not_name_a_file_for_the_ui_to_serve(monkeypatch, originals_collection):
    root, files = originals_collection
    at = app(monkeypatch, root)
    at.text_area(key="paste-text").set_value("Pasted words.")
    at.text_area(key="paste-meta").set_value(json.dumps({"source": str(files / "notes.txt")}))
    at.button(key="FormSubmitter:paste-Add document").click().run()
    assert not at.exception and any("Nothing was added" in e.value for e in at.error)
    assert "source may not be a file path here" in str(at.dataframe[0].value)
    at.text_area(key="paste-meta").set_value('{"source": "https://example.org/notes"}')  # not a file: fine
    at.button(key="FormSubmitter:paste-Add document").click().run()
    no_failure(at)
    assert any("1 added" in s.value for s in at.success)
