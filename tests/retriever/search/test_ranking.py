"""Dense rankings over many segments: each fetches its share first, and the answer stays the full one."""

from __future__ import annotations

import numpy as np
import pytest

from retriever import Collection
from retriever.search import ranking
from retriever.search.ranking import dense_rankings
from retriever.storage.merging import MergePolicy

DIM = 32
PARTS = 12


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture
def many_parts(tmp_path, tiny_model_dir):
    """``PARTS`` exact segments of 30 one-chunk documents; the last holds 30 near copies of one direction."""
    from retriever import Embedder

    rng = np.random.default_rng(5)
    embedder = Embedder(tiny_model_dir, backend="torch-fp32")
    col = Collection.create(tmp_path / "col", embedder, merge_policy=MergePolicy(factor=50, small_factor=50))
    dim = embedder.dim
    topic = unit(rng.normal(size=dim))
    for p in range(PARTS):
        if p == PARTS - 1:
            vectors = unit(topic + 0.3 * rng.normal(size=(30, dim)) / np.sqrt(dim))
        else:
            vectors = unit(rng.normal(size=(30, dim)))
        col.add([{"id": f"p{p:02d}-{i:02d}", "text": f"part {p} row {i}"} for i in range(30)], vectors=vectors)
    assert len(col.reader.current().parts) == PARTS
    yield col, topic
    col.close()


def test_a_part_searched_for_its_share_only_fetches_less_than_its_full_depth(many_parts):
    col, _ = many_parts
    part = col.reader.current().parts[0]
    assert ranking._share_to_fetch(part, 10, 1 / PARTS) < ranking._chunks_to_fetch(part, 10)


@pytest.mark.parametrize("k", [1, 5, 10, 25])
def test_rankings_from_shares_equal_exact_rankings(many_parts, k):
    """The parts are exact, so the rankings must be too: random queries spread their hits over the parts."""
    col, _ = many_parts
    view = col.reader.current()
    queries = unit(np.random.default_rng(k).normal(size=(20, col.embedder.dim)))
    shared = dense_rankings(view, queries, k, None, False, col.index_policy)
    exact = dense_rankings(view, queries, k, None, True, col.index_policy)
    assert [[key for key, _ in ranked] for ranked, _ in shared] == [[key for key, _ in ranked] for ranked, _ in exact]


def test_a_part_holding_all_the_top_hits_is_searched_again_in_full(many_parts, monkeypatch):
    """Every one of the top 20 lies in the last part, far beyond its share: its second search finds them."""
    col, topic = many_parts
    calls = []
    search = ranking.vector_index.search
    monkeypatch.setattr(
        ranking.vector_index,
        "search",
        lambda index, q, k, *a, **kw: calls.append((k, kw["share"])) or search(index, q, k, *a, **kw),
    )
    hits = col.search(vector=topic, k=20, mode="dense", feedback=False)
    share = ranking._share_to_fetch(col.reader.current().parts[-1], 20, 1 / PARTS)
    # each part first fetches, and probes, for its share of the rows; the last again for all its 30 chunks
    assert calls == [(share, pytest.approx(1 / PARTS))] * PARTS + [(30, 1.0)]
    assert len(hits) == 20 and all(h.id.startswith(f"p{PARTS - 1:02d}-") for h in hits)
    assert [h.id for h in hits] == [h.id for h in col.search(vector=topic, k=20, mode="dense", exact=True)]


def test_compressed_parts_show_exact_scores_from_few_float32_rows(tmp_path, tiny_model_dir, monkeypatch):
    """Parts of compressed codes with int8 rows return int8 estimates; only the best chunks of all parts
    together are read in float32, so the hits shown carry exact scores in exact order."""
    from retriever import Embedder
    from retriever.search import rescoring, vector_index
    from retriever.storage import vector_files

    rng = np.random.default_rng(11)
    embedder = Embedder(tiny_model_dir, backend="torch-fp32")
    col = Collection.create(
        tmp_path / "col",
        embedder,
        index_policy=vector_index.IndexPolicy(codes="always"),
        merge_policy=MergePolicy(factor=50, small_factor=50),
    )
    vectors = {}
    for p in range(4):
        batch = unit(rng.normal(size=(300, embedder.dim)))
        ids = [f"c{p}-{i:03d}" for i in range(300)]
        col.add([{"id": i, "text": f"compressed {i}"} for i in ids], vectors=batch)
        vectors.update(zip(ids, batch))
    assert all(part.segment.index.int8 is not None for part in col.reader.current().parts)
    per_hit, final = [], []
    monkeypatch.setattr(rescoring, "gather_rows", lambda rows, ids: per_hit.append(len(ids)))
    gather = vector_files.gather_rows
    monkeypatch.setattr(
        vector_files, "gather_rows", lambda rows, ids, *rest: final.append(len(ids)) or gather(rows, ids, *rest)
    )
    for query in unit(rng.normal(size=(10, embedder.dim))):
        final.clear()
        hits = col.search(vector=query, k=10, mode="dense", feedback=False)
        assert len(hits) == 10 and sum(final) <= ranking.exact_depth(10)
        exact = [float(vectors[h.id] @ query) for h in hits]
        assert np.allclose([h.score for h in hits], exact, atol=1e-6) and exact == sorted(exact, reverse=True)
    assert not per_hit  # no part read float32 rows of its own
    col.close()
