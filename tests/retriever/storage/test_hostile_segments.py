"""A collection directory may come from someone else: its files are checked, never trusted.

Segment names from the catalog stay inside ``segments/``, no file is read
through a symbolic link or from a FIFO, and arrays and the vector index must
have the shapes ``segment.json`` states. Each refusal names the file.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading

import faiss
import numpy as np
import pytest

from retriever import Collection, CorruptCollectionError
from retriever.storage.manifest import DEFAULT_CATALOG
from retriever.storage.segment import SEGMENTS_DIR

DOCS = [{"id": f"d{i}", "text": f"tea rivers note {i} " * 4} for i in range(3)]


@pytest.fixture
def built(tmp_path, tiny_embedder):
    """A one-segment collection; returns ``(path, segment folder)``."""
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder) as col:
        col.add(DOCS)
    (segment,) = [p for p in (path / SEGMENTS_DIR).iterdir()]
    return path, segment


def set_segments(path, segments) -> None:
    db = sqlite3.connect(path / DEFAULT_CATALOG)
    db.execute("UPDATE semsearch_state SET segments = ?", (json.dumps(segments),))
    db.commit()
    db.close()


def read_all(path, model):
    """Open, search and read every document: what ``GET /documents`` and a search would touch."""
    with Collection.open(path, model) as col:
        col.search("tea", k=3)
        return [col.get(doc_id).text for doc_id in col.ids()]


@pytest.mark.parametrize("name", ["ABSOLUTE", "../outside", "s000001/../../outside", "", 7])
def test_a_segment_name_that_leaves_segments_is_refused(built, tiny_embedder, tmp_path, name):
    path, segment = built
    outside = tmp_path / "outside"
    shutil.copytree(segment, outside)
    set_segments(path, [[str(outside) if name == "ABSOLUTE" else name, 0]])
    with pytest.raises(CorruptCollectionError, match="no segment name"):
        read_all(path, tiny_embedder)
    with pytest.raises(CorruptCollectionError), Collection.open(path, tiny_embedder) as col:
        col.delete(["d0"])
    assert not list(outside.glob("deleted.*.npy"))  # nothing written outside the collection


def test_a_symlinked_text_file_is_not_served(built, tiny_embedder, tmp_path):
    path, segment = built
    secret = tmp_path / "secret.txt"
    secret.write_bytes((segment / "text.bin").read_bytes().replace(b"tea", b"KEY"))
    (segment / "text.bin").unlink()
    os.symlink(secret, segment / "text.bin")
    with pytest.raises(CorruptCollectionError, match="text.bin is a symbolic link"):
        read_all(path, tiny_embedder)


def test_a_symlinked_segment_folder_is_refused(built, tiny_embedder, tmp_path):
    path, segment = built
    moved = tmp_path / "elsewhere"
    shutil.move(segment, moved)
    os.symlink(moved, segment)
    with pytest.raises(CorruptCollectionError, match="not a folder of the collection's own"):
        read_all(path, tiny_embedder)


@pytest.mark.parametrize("name", ["terms.txt", "segment.json", "keys.npy", "vectors.faiss"])
def test_a_fifo_in_a_segment_is_refused_without_hanging(built, tiny_embedder, name):
    path, segment = built
    (segment / name).unlink()
    os.mkfifo(segment / name)
    outcome = {}

    def open_it():
        try:
            read_all(path, tiny_embedder)
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome["error"] = exc

    reader = threading.Thread(target=open_it, daemon=True)
    reader.start()
    reader.join(20)
    assert not reader.is_alive(), f"opening a collection with a FIFO {name} hangs"
    assert isinstance(outcome.get("error"), CorruptCollectionError) and name in str(outcome["error"])


def test_a_vector_index_of_another_shape_is_refused(built, tiny_embedder):
    path, segment = built
    index = faiss.read_index(str(segment / "vectors.faiss"))
    wrong = faiss.IndexFlatIP(index.d)
    wrong.add(np.eye(index.d, dtype=np.float32)[:1])  # one vector where segment.json says more
    faiss.write_index(wrong, str(segment / "vectors.faiss"))
    with pytest.raises(CorruptCollectionError, match="vectors.faiss holds 1 vectors"):
        read_all(path, tiny_embedder)


@pytest.mark.parametrize(
    "name, array",
    [
        ("keys", np.arange(10, dtype=np.int64)),
        ("keys", np.array([3, 2, 1], dtype=np.int64)),
        ("doc_chunks", np.array([0, 1, 2, 99], dtype=np.int64)),
        ("byte_spans", np.array([[0, 10**9]] * 3, dtype=np.int64)),
        ("text_offsets", np.array([0.0, 1.0, 2.0, 3.0])),
        ("postings.indptr", np.zeros(2, dtype=np.int64)),
    ],
)
def test_an_array_of_the_wrong_shape_is_refused(built, tiny_embedder, name, array):
    path, segment = built
    if name == "byte_spans":
        array = np.resize(array, np.load(segment / "byte_spans.npy").shape)
    np.save(segment / f"{name}.npy", array)
    with pytest.raises(CorruptCollectionError, match=f"{name}.npy"):
        read_all(path, tiny_embedder)


def test_a_deletion_file_out_of_range_is_refused(built, tiny_embedder):
    path, segment = built
    with Collection.open(path, tiny_embedder) as col:
        col.delete(["d0"])
    (deletions,) = segment.glob("deleted.*.npy")
    np.save(deletions, np.array([10**6], dtype=np.int64))
    with pytest.raises(CorruptCollectionError, match=deletions.name):
        read_all(path, tiny_embedder)


def test_a_symlinked_int8_rows_file_is_refused(tmp_path, tiny_embedder):
    from retriever.search.vector_index import IndexPolicy

    path = tmp_path / "codes"
    with Collection.create(path, tiny_embedder, index_policy=IndexPolicy(codes="always")) as col:
        col.add([{"id": f"c{i}", "text": f"tea rivers note {i}"} for i in range(40)])
    (segment,) = [p for p in (path / SEGMENTS_DIR).iterdir()]
    moved = tmp_path / "elsewhere.npy"
    shutil.move(segment / "vectors.int8.npy", moved)
    os.symlink(moved, segment / "vectors.int8.npy")
    with pytest.raises(CorruptCollectionError, match="vectors.int8.npy"):
        read_all(path, tiny_embedder)
