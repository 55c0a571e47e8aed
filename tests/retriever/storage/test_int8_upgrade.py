"""Compressed segments written before int8 rows get them in place: whole or not at all, checked, same answers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from filelock import FileLock

from retriever import Collection
from retriever.errors import CollectionLockedError
from retriever.search import vector_index
from retriever.storage.cleanup import LOCK_FILE
from retriever.storage.int8_upgrade import segments_without_int8
from retriever.storage.segment_format import INT8_CODES_FILE, INT8_FILES
from retriever.upgrading import add_int8_rows, upgrade


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def strip_int8(folder) -> None:
    """Make a segment as it was written before int8 rows: no files, no flag, no checksums of them."""
    meta_path = folder / "segment.json"
    meta = json.loads(meta_path.read_text())
    meta["index"].pop("int8")
    for name in INT8_FILES:
        (folder / name).unlink()
        meta["checksums"].pop(name)
    meta_path.write_text(json.dumps(meta))


@pytest.fixture
def older(tmp_path, tiny_embedder):
    """A collection of two compressed segments without int8 rows, and its dense answers to five queries."""
    rng = np.random.default_rng(3)
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, index_policy=vector_index.IndexPolicy(codes="always")) as col:
        for p in range(2):
            col.add(
                [{"id": f"d{p}-{i}", "text": f"doc {p} {i}"} for i in range(200)],
                vectors=unit(rng.normal(size=(200, tiny_embedder.dim))),
            )
        folders = [part.segment.folder for part in col.reader.current().parts]
    for folder in folders:
        strip_int8(folder)
    queries = unit(rng.normal(size=(5, tiny_embedder.dim)))
    with Collection.open(path) as col:
        assert all(part.segment.index.int8 is None for part in col.reader.current().parts)
        answers = [[(h.id, round(h.score, 5)) for h in col.search(vector=q, k=10, mode="dense")] for q in queries]
        assert col.check().ok
    return path, folders, queries, answers


def test_upgrade_writes_int8_rows_that_check_and_answer_as_before(older):
    path, folders, queries, answers = older
    assert segments_without_int8(path) == sorted(folders)
    assert "wrote int8 rescoring rows for 2 segment(s)" in upgrade(path, progress=False)
    assert segments_without_int8(path) == []
    with Collection.open(path) as col:
        assert all(part.segment.index.int8 is not None for part in col.reader.current().parts)
        assert [
            [(h.id, round(h.score, 5)) for h in col.search(vector=q, k=10, mode="dense")] for q in queries
        ] == answers
        report = col.check()
        assert report.ok and report.files >= 2 * 4  # the int8 files are checksummed too
    assert "nothing to do" in upgrade(path, progress=False)


def test_files_of_a_killed_upgrade_are_ignored_then_written_again(older):
    path, folders, queries, answers = older
    (folders[0] / INT8_CODES_FILE).write_bytes(b"torn")  # killed before segment.json named it
    with Collection.open(path) as col:
        assert col.reader.current().parts[0].segment.index.int8 is None
        assert [h.id for h in col.search(vector=queries[0], k=10, mode="dense")] == [i for i, _ in answers[0]]
    assert add_int8_rows(path, progress=False) == 2
    with Collection.open(path) as col:
        assert col.reader.current().parts[0].segment.index.int8.codes.shape == (200, col.embedder.dim)
        assert col.check().ok


def test_upgrade_waits_for_the_writer_then_changes_nothing(older):
    path, folders, _, _ = older
    with FileLock(str(path / LOCK_FILE)):
        with pytest.raises(CollectionLockedError, match="being written by another process"):
            add_int8_rows(path, progress=False, lock_timeout=0.1)
    assert segments_without_int8(path) == sorted(folders)
