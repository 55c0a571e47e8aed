"""What the batch job reads and prunes when folders, records and files are hostile or unlucky.

Pruning removes only documents that came from under the roots it was given,
compared case-sensitively; an unreadable directory and a link out of the
tree are reported, and nothing they held is pruned; pathological Markdown,
PDF and non-ASCII text take linear time.
"""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from indexer.job import index_paths
from indexer.loaders import LoadError, load_path, walk
from retriever import Collection
from tests.indexer.test_loaders import write_pdf


@pytest.fixture
def col(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as opened:
        yield opened


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# Item 1: prune's prefix is compared with the case it has, and a record's own "source" is not its file.


def test_prune_of_a_folder_spares_a_folder_whose_name_differs_only_in_case(col, tmp_path):
    kept = _write(tmp_path / "t" / "a" / "x.txt", "lower case folder")
    _write(tmp_path / "t" / "A" / "y.txt", "upper case folder")
    index_paths(col, [tmp_path / "t" / "a"], progress=False)
    report = index_paths(col, [tmp_path / "t" / "A"], prune=True, progress=False)
    assert report.written.deleted == []
    assert str(kept.resolve()) in col.ids()


def test_a_record_source_field_neither_escapes_nor_joins_a_root(col, tmp_path):
    outside = _write(tmp_path / "other" / "z.txt", "a file of another folder")
    index_paths(col, [outside.parent], progress=False)
    records = tmp_path / "data" / "r.jsonl"
    _write(records, json.dumps({"id": "r1", "text": "record", "source": str(outside.resolve())}) + "\n")
    index_paths(col, [records.parent], progress=False)
    doc = col.get("r1")
    assert doc.metadata["source"] == str(records.resolve())
    assert doc.metadata["record_source"] == str(outside.resolve())
    report = index_paths(col, [outside.parent], prune=True, progress=False)  # r1 is not from there
    assert report.written.deleted == [] and "r1" in col.ids()
    records.unlink()
    report = index_paths(col, [records.parent], prune=True, progress=False)  # but it is from here
    assert report.written.deleted == ["r1"]


# Item 2: an unreadable directory is reported, and what it held is not pruned.


def test_unreadable_directory_is_reported_and_its_documents_are_not_pruned(col, tmp_path, monkeypatch):
    root = tmp_path / "notes"
    inner = _write(root / "locked" / "secret.txt", "held in a directory that cannot be read")
    _write(root / "open.txt", "readable")
    index_paths(col, [root], progress=False)
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path).rstrip("/").endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    report = index_paths(col, [root], prune=True, progress=False)
    assert report.written.deleted == []
    assert str(inner.resolve()) in col.ids()
    locked = str((root / "locked").resolve())
    assert LoadError(locked, "cannot read the directory: Permission denied") in report.skipped


# Item 9: links whose real path leaves the root are skipped and reported.


def test_links_out_of_the_root_are_skipped_and_reported(col, tmp_path):
    secret = _write(tmp_path / "home" / "id_rsa", "-----BEGIN PRIVATE KEY----- hunter2")
    secrets = _write(tmp_path / "home" / "keys" / "more.txt", "another secret")
    root = tmp_path / "clone"
    _write(root / "readme.txt", "a cloned folder")
    (root / "notes.txt").symlink_to(secret)
    (root / "keys").symlink_to(secrets.parent, target_is_directory=True)
    (root / "inside.txt").symlink_to(root / "readme.txt")  # inside the root: read once, as readme.txt
    report = index_paths(col, [root], progress=False)
    assert sorted(col.ids()) == [str((root / "readme.txt").resolve())]
    reasons = {error.source: error.reason for error in report.skipped}
    assert reasons[str(root / "notes.txt")] == f"a link to {secret.resolve()}, outside {root.resolve()}; not read"
    assert reasons[str(root / "keys")] == f"a link to {secrets.parent.resolve()}, outside {root.resolve()}; not read"


def test_walk_reports_links_out_through_its_skipped_list(tmp_path):
    target = _write(tmp_path / "elsewhere.txt", "outside")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.txt").symlink_to(target)
    skipped: list[LoadError] = []
    assert list(walk([root], skipped=skipped)) == []
    assert [error.source for error in skipped] == [str(root / "link.txt")]


# Item 12: a Markdown heading is found in linear time.


def finished_by_deadline(work, deadline_s: float = 120.0):
    """``work()``'s result, failing the test when it has not returned within ``deadline_s`` (a deadline
    generous for linear work on these sizes, which quadratic work would overrun by hours)."""
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(result=work()), daemon=True)
    thread.start()
    thread.join(deadline_s)
    assert not thread.is_alive(), f"still running after {deadline_s:g} s: the work is not linear"
    assert "result" in outcome, "it raised (see the thread's traceback above)"
    return outcome["result"]


def test_markdown_heading_with_many_inner_spaces_is_linear(tmp_path):
    path = tmp_path / "spaces.md"
    spaces = " " * 400_000  # a quadratic scan of these would take hours
    path.write_text("# a" + spaces + "b\nbody\n", encoding="utf-8")
    (doc,) = finished_by_deadline(lambda: load_path(path))
    assert doc.title == "a" + spaces + "b"


# Item 13: record files are streamed, PDFs are bounded, byte offsets are linear.


def _assert_streamed(path: Path, records: int) -> None:
    """Loading ``path`` gives ``records`` items with a memory peak under a quarter of the file's size."""
    size = path.stat().st_size
    tracemalloc.start()
    try:
        count = sum(1 for _ in load_path(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == records
    assert peak < size / 4, f"peak {peak} bytes for a {size} byte file"


def test_jsonl_file_is_streamed_not_read_whole(tmp_path):
    path = tmp_path / "big.jsonl"
    text = "word " * 20_000  # 100 KB a record, 8 MB in all
    with path.open("w", encoding="utf-8") as out:
        for i in range(80):
            out.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")
    _assert_streamed(path, records=80)


def test_csv_file_is_streamed_not_read_whole(tmp_path):
    path = tmp_path / "big.csv"
    text = "word " * 20_000
    with path.open("w", encoding="utf-8") as out:
        out.write("id,text\n")
        for i in range(80):
            out.write(f'{i},"{text}"\n')
    _assert_streamed(path, records=80)


def _pdf(path: Path, pages: int) -> Path:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=100, height=100)
    with path.open("wb") as out:
        writer.write(out)
    return path


def test_pdf_over_the_page_limit_is_refused(tmp_path, monkeypatch):
    from indexer.loaders import pdf

    monkeypatch.setattr(pdf, "MAX_PDF_PAGES", 3)
    (error,) = load_path(_pdf(tmp_path / "long.pdf", 5))
    assert error == LoadError(str((tmp_path / "long.pdf").resolve()), "PDF has 5 pages, over the 3 page limit")


def test_pdf_extraction_stops_at_its_time_limit(tmp_path, monkeypatch):
    from indexer.loaders import pdf

    monkeypatch.setattr(pdf, "MAX_PDF_SECONDS", 0.0)
    (error,) = load_path(_pdf(tmp_path / "slow.pdf", 2))
    assert isinstance(error, LoadError)
    assert error.reason == "PDF text extraction took over 0 s (stopped after 1 of 2 pages)"


def test_pdf_text_over_the_character_limit_is_refused(tmp_path, monkeypatch):
    from indexer.loaders import pdf

    monkeypatch.setattr(pdf, "MAX_PDF_CHARS", 0)
    (error,) = load_path(write_pdf(tmp_path / "wide.pdf", ["Some text"]))
    assert isinstance(error, LoadError)
    assert error.reason.startswith("PDF text is over the 0 character limit")


def test_byte_offsets_of_long_non_ascii_text_are_linear():
    from retriever.storage import segment

    text = "é" * 20_000_000  # 40,000 spans: encoding each one's prefix would copy 400 GB
    starts = np.arange(0, len(text), 500, dtype=np.int64)
    spans = np.stack([starts, np.minimum(starts + 700, len(text))], axis=1)
    out = finished_by_deadline(lambda: segment._byte_offsets(text, spans))  # noqa: SLF001 - the function under test
    assert np.array_equal(out, spans * 2)


def test_jsonl_that_stops_being_utf8_past_the_sample_keeps_the_records_before(tmp_path):
    path = tmp_path / "late.jsonl"
    lines = [json.dumps({"id": f"d{i}", "text": "x" * 1000}) for i in range(400)]  # 400 KB of ASCII
    path.write_bytes("\n".join(lines).encode() + b'\n{"id": "bad", "text": "caf\xe9"}\n')
    items = list(load_path(path))
    assert [item.id for item in items[:-1]] == [f"d{i}" for i in range(len(items) - 1)]
    assert items[-1].source == str(path.resolve())
    assert items[-1].reason.startswith("not valid utf-8 after line ")


def test_a_heading_of_unicode_blanks_alone_is_no_title(tmp_path):
    """``# \\u3000`` is blank: the title falls back to the file name, as for ``#  ``."""
    from indexer.loaders import load_path

    path = tmp_path / "doc.md"
    path.write_text("# \u3000\n\nsome text\n", encoding="utf-8")
    (doc,) = load_path(path)
    assert doc.title == "doc"
