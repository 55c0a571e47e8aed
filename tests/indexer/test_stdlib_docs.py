"""The demo corpus: one document per standard-library module, with its whole public API."""

from __future__ import annotations

import json

from indexer.stdlib_docs import MODULES, module_document, write_corpus


def test_functions_from_a_c_accelerator_are_documented():
    """``bisect`` defines nothing itself: its functions live in ``_bisect`` and must still be in its document."""
    text = module_document("bisect")["text"]
    assert "bisect.insort_left(" in text and "bisect.bisect_right(" in text
    assert "Insert item x in list a, and keep it sorted" in text


def test_a_package_documents_what_its_all_exports_from_submodules():
    """``concurrent.futures`` re-exports its executors from submodules; ``__all__`` names them."""
    text = module_document("concurrent.futures")["text"]
    assert "concurrent.futures.ThreadPoolExecutor(" in text and "concurrent.futures.ProcessPoolExecutor(" in text


def test_only_public_names_are_documented():
    record = module_document("heapq")
    documented = {line.split("(")[0] for line in record["text"].splitlines() if line.startswith("heapq.")}
    assert documented and all(not name.split(".")[1].startswith("_") for name in documented)
    assert documented <= {f"heapq.{name}" for name in __import__("heapq").__all__}
    assert record["title"].startswith("heapq — ") and record["package"] == "heapq"


def test_unknown_module_gives_no_record():
    assert module_document("no_such_module_anywhere") is None


def test_corpus_is_written_once_and_stays_byte_identical(tmp_path):
    path = tmp_path / "stdlib.jsonl"
    n = write_corpus(path)
    first = path.read_bytes()
    records = [json.loads(line) for line in first.decode("utf-8").splitlines()]
    assert n == len(records) == len(MODULES)
    assert len({r["id"] for r in records}) == n
    mtime = path.stat().st_mtime_ns
    assert write_corpus(path) == n and path.read_bytes() == first and path.stat().st_mtime_ns == mtime
