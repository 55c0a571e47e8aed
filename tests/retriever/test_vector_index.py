"""Vector index files: one per generation, read without locks while writers publish new ones."""

from __future__ import annotations

import numpy as np
import pytest

from retriever import vector_index
from retriever.errors import CorruptCollectionError


def _publish(root, generation: int, dim: int = 4):
    index = vector_index.new_index(dim)
    vectors = np.eye(dim, dtype=np.float32)
    index.add_with_ids(vectors, np.arange(dim, dtype=np.int64))
    return vector_index.write_generation(root, generation, index)


def test_a_published_generation_reads_back(tmp_path):
    _publish(tmp_path, 3)
    assert vector_index.read_generation(tmp_path, 3).ntotal == 4
    with pytest.raises(FileNotFoundError):
        vector_index.read_generation(tmp_path, 2)


def test_a_file_removed_between_check_and_read_is_reported_missing_not_corrupt(tmp_path, monkeypatch):
    """A writer's cleanup can unlink the old generation just after a reader saw it exist."""
    path = _publish(tmp_path, 1)
    read_index = vector_index.faiss.read_index

    def read_after_cleanup(name, *args):
        path.unlink()  # the writer wins the race
        return read_index(name, *args)

    monkeypatch.setattr(vector_index.faiss, "read_index", read_after_cleanup)
    with pytest.raises(FileNotFoundError):
        vector_index.read_generation(tmp_path, 1)


def test_a_damaged_file_is_corrupt(tmp_path):
    path = _publish(tmp_path, 1)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(CorruptCollectionError, match="cannot read vector index"):
        vector_index.read_generation(tmp_path, 1)
