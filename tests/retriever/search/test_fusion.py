"""Fusion invariants: RRF and the convex combination."""

from __future__ import annotations

import pytest

from retriever.errors import BadInputError
from retriever.search.fusion import ConvexFusion, fuse, reciprocal_rank_fusion

DENSE = [("a", 0.9), ("b", 0.8), ("c", 0.5)]
SPARSE = [("a", 12.0), ("d", 7.0), ("b", 1.0)]


@pytest.mark.parametrize("fusion", ["rrf", "convex"])
def test_first_in_both_lists_is_first(fusion):
    assert fuse(DENSE, SPARSE, fusion)[0][0] == "a"


def test_rrf_scores_are_sums_of_reciprocal_ranks():
    fused = dict(reciprocal_rank_fusion([DENSE, SPARSE], rrf_k=60))
    assert fused["a"] == pytest.approx(2 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 63)
    assert fused["d"] == pytest.approx(1 / 62)
    assert set(fused) == {"a", "b", "c", "d"}


def test_convex_extremes_reproduce_each_side():
    assert [d for d, _ in ConvexFusion(1.0).fuse(DENSE, SPARSE)][:3] == ["a", "b", "c"]
    assert [d for d, _ in ConvexFusion(0.0).fuse(DENSE, SPARSE)][:3] == ["a", "d", "b"]


def test_convex_normalises_scales():
    fused = dict(ConvexFusion(0.5).fuse([("x", 100.0), ("y", 50.0)], [("y", 0.2), ("x", 0.1)]))
    assert fused["x"] == pytest.approx(0.5) and fused["y"] == pytest.approx(0.5)


def test_empty_and_bad_arguments():
    assert fuse([], [], "rrf") == []
    assert [d for d, _ in fuse(DENSE, [], "rrf")] == ["a", "b", "c"]
    with pytest.raises(BadInputError, match="alpha"):
        ConvexFusion(1.5).fuse(DENSE, SPARSE)
    with pytest.raises(BadInputError, match="unknown fusion"):
        fuse(DENSE, SPARSE, "max")


def test_hybrid_search_respects_k_and_fuses_both_sides(tiny_embedder, tmp_path):
    from retriever import Collection

    col = Collection.create(tmp_path / "col", tiny_embedder)
    col.add([{"id": f"d{i}", "text": f"document {i} about tea rivers and coffee number {i}"} for i in range(30)])
    col.add({"id": "kw", "text": "zymurgy zymurgy zymurgy"})
    for k in (1, 5, 31):
        hits = col.search("zymurgy", k=k, mode="hybrid")
        assert len(hits) == k and len({h.id for h in hits}) == k
        assert hits[0].id == "kw"  # first in BM25 (only match) and high in dense (same tokens)
    assert [h.id for h in col.search("zymurgy", k=5, mode="bm25")] == ["kw"]
