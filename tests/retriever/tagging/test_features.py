"""Document vectors pooled from stored chunk vectors equal the mean of what the model embedded."""

from __future__ import annotations

import numpy as np

from retriever import Collection
from retriever.tagging.features import live_rows, pool, segment_vectors, text_vectors


def test_pool_is_the_unit_mean_of_each_group():
    vectors = np.asarray([[1, 0], [0, 1], [3, 4], [0, 0]], dtype=np.float32)
    pooled = pool(vectors, np.asarray([2, 1, 1]))
    np.testing.assert_allclose(pooled, [[0.70710677, 0.70710677], [0.6, 0.8], [0, 0]], atol=1e-6)


def test_segment_vectors_pool_each_documents_chunks(tmp_path, tiny_embedder):
    long_text = " ".join(f"sentence {i} about rivers, tea and databases." for i in range(60))
    with Collection.create(tmp_path / "col", tiny_embedder, window_tokens=24, overlap_tokens=4) as col:
        col.add([{"id": "long", "text": long_text}, {"id": "short", "text": "green tea"}])
        col.delete(["short"])
        col.add([{"id": "other", "text": "coffee beans are roasted"}])
        (segment, rows, keys), *_ = list(live_rows(col.reader.current()))
        assert len(rows) == 1  # the deleted document is not live
        lo, hi = segment.doc_chunks[rows[0]], segment.doc_chunks[rows[0] + 1]
        assert hi - lo > 3
        chunks = np.asarray([segment.index.index.reconstruct(int(c)) for c in range(lo, hi)])
        expected = chunks.mean(axis=0) / np.linalg.norm(chunks.mean(axis=0))
        np.testing.assert_allclose(segment_vectors(segment, rows)[0], expected, atol=1e-5)
        free = text_vectors([("", long_text)], col.chunker, col.embedder)
        np.testing.assert_allclose(free[0], expected, atol=1e-4)  # free text pools as a stored document does
