"""The segment format: one table of names, a version recorded per segment, read as a range."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retriever.errors import CorruptCollectionError, FormatVersionError
from retriever.search.bm25 import Analyzer
from retriever.search.vector_index import IndexPolicy
from retriever.storage import segment_format
from retriever.storage.segment import Segment, SegmentData


def written(folder: Path) -> dict:
    """A two-document segment written into ``folder``; its ``segment.json``."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    data = SegmentData.from_documents(
        [1, 2], ["Tea", ""], ["tea and rivers", "the sea rises"], [[(0, 3), (4, 14)], [(0, 13)]], vectors, Analyzer()
    )
    return data.write(folder, IndexPolicy())


def rewrite_meta(folder: Path, change) -> None:
    meta = json.loads((folder / segment_format.META).read_text())
    change(meta)
    (folder / segment_format.META).write_text(json.dumps(meta))


def test_a_new_segment_records_the_current_version_and_holds_the_files_the_table_names(tmp_path):
    meta = written(tmp_path / "s000001")
    assert meta[segment_format.VERSION_KEY] == segment_format.FORMAT_VERSION
    names = {path.name for path in (tmp_path / "s000001").iterdir()}
    table = segment_format.__doc__
    assert all(name in table for name in names)  # every file written is in the documented table
    assert set(meta["checksums"]) == names - {segment_format.META}
    assert Segment(tmp_path / "s000001").n_docs == 2


def test_a_segment_without_a_version_is_version_1_and_still_read(tmp_path):
    written(tmp_path / "s000001")
    rewrite_meta(tmp_path / "s000001", lambda meta: meta.pop(segment_format.VERSION_KEY))
    segment = Segment(tmp_path / "s000001")
    assert segment_format.format_version(segment.meta, tmp_path) == 1 and segment.n_chunks == 3


def test_a_newer_version_is_refused_by_name(tmp_path):
    written(tmp_path / "s000001")
    newer = segment_format.FORMAT_VERSION + 1
    rewrite_meta(tmp_path / "s000001", lambda meta: meta.update({segment_format.VERSION_KEY: newer}))
    with pytest.raises(FormatVersionError, match=f"segment format version {newer}; this semsearch reads versions 1 to"):
        Segment(tmp_path / "s000001")


@pytest.mark.parametrize("version", [0, "2", True, None])
def test_a_version_that_is_no_version_is_corruption(tmp_path, version):
    written(tmp_path / "s000001")
    rewrite_meta(tmp_path / "s000001", lambda meta: meta.update({segment_format.VERSION_KEY: version}))
    with pytest.raises(CorruptCollectionError, match="which is no version"):
        Segment(tmp_path / "s000001")
