"""Dense pseudo-relevance feedback: the query moves toward the first fusion's top documents."""

from __future__ import annotations

import numpy as np
import pytest

from retriever import Collection
from retriever.errors import BadInputError
from retriever.search import vector_index
from retriever.search.feedback import FEEDBACK_WEIGHT, expanded_query, rescored
from retriever.search.ranking import bm25_ranking, dense_rankings

DIM = 32  # the tiny model's


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for axis, value in pairs:
        v[axis] = value
    return v / np.linalg.norm(v)


@pytest.fixture()
def collection(tmp_path, tiny_embedder):
    """A and B match the query's term and lie near its vector (e0); D lies where A and B lean (e1), E elsewhere."""
    docs = [
        {"id": "A", "text": "alpha one"},
        {"id": "B", "text": "alpha two"},
        {"id": "D", "text": "delta"},
        {"id": "E", "text": "epsilon"},
    ]
    vectors = np.stack([unit((0, 1.0)), unit((0, 0.6), (1, 0.8)), unit((1, 1.0)), unit((0, 0.1), (2, 1.0))])
    c = Collection.create(tmp_path / "c", tiny_embedder)
    c.add(docs, vectors=vectors)
    yield c
    c.close()


def test_expanded_query_adds_the_mean_of_the_documents_best_chunks(collection):
    view = collection.reader.current()
    keys = [collection.catalog.lookup([i])[i].key for i in ("A", "B")]
    query = unit((0, 1.0)).reshape(1, -1)
    expected = query[0] + FEEDBACK_WEIGHT * (unit((0, 1.0)) + unit((0, 0.6), (1, 0.8))) / 2
    expected /= np.linalg.norm(expected)
    found_by_dense = {key: (view.find(key)[0], view.find(key)[1]) for key in keys}  # one chunk per document
    for dense_chunks in ({}, found_by_dense):  # best chunks looked up, or taken from the dense side
        moved = expanded_query(view, query, keys, dense_chunks)
        assert moved.shape == (1, DIM)
        np.testing.assert_allclose(moved[0], expected, atol=1e-6)


def test_expanded_query_uses_only_the_first_documents_and_skips_unknown_keys(collection):
    view = collection.reader.current()
    query = unit((0, 1.0)).reshape(1, -1)
    key_a, key_d = (collection.catalog.lookup([i])[i].key for i in ("A", "D"))
    assert expanded_query(view, query, [], {}) is query
    assert expanded_query(view, query, [10_000], {}) is query
    only_a = expanded_query(view, query, [10_000, key_a, key_d], {})  # D is third of the keys: not used
    np.testing.assert_allclose(only_a[0], unit((0, 1.0)), atol=1e-6)


def test_feedback_lifts_a_document_near_the_top_ones(collection):
    """D shares no term with the query and is orthogonal to its vector; the top documents lean toward it."""
    query = unit((0, 1.0))
    plain = [h.id for h in collection.search("alpha", vector=query, k=4, feedback=False, evidence="none")]
    fed = [h.id for h in collection.search("alpha", vector=query, k=4, evidence="none")]
    assert plain[:2] == fed[:2] == ["A", "B"]
    assert plain.index("E") < plain.index("D")
    assert fed.index("D") < fed.index("E")


def test_feedback_changes_only_hybrid_searches(collection):
    query = unit((0, 1.0))
    for mode in ("dense", "bm25"):
        assert [h.id for h in collection.search("alpha", vector=query, k=4, mode=mode)] == [
            h.id for h in collection.search("alpha", vector=query, k=4, mode=mode, feedback=False)
        ]


def test_feedback_must_be_a_bool(collection):
    with pytest.raises(BadInputError, match="feedback must be True or False"):
        collection.search("alpha", feedback="yes")


def test_rescored_ranks_only_the_documents_either_side_found(collection):
    """Dense finds A (k=1), BM25 finds A and B; D is nearest the moved query but neither side found it."""
    view = collection.reader.current()
    key = {i: collection.catalog.lookup([i])[i].key for i in "ABDE"}
    policy = collection.index_policy
    dense = dense_rankings(view, unit((0, 1.0)).reshape(1, -1), 1, None, False, policy)[0]
    sparse = bm25_ranking(view, ["alpha"], 10, None, 1.2, 0.75)
    assert [k for k, _ in dense[0]] == [key["A"]] and {k for k, _ in sparse[0]} == {key["A"], key["B"]}
    moved = unit((1, 1.0)).reshape(1, -1)
    ranked, where = rescored(view, moved, dense, sparse, 10)
    assert [k for k, _ in ranked] == [key["B"], key["A"]]
    np.testing.assert_allclose([s for _, s in ranked], [0.8, 0.0], atol=1e-6)
    assert where == {key["B"]: view.find(key["B"]), key["A"]: view.find(key["A"])}  # one chunk each
    assert rescored(view, moved, dense, sparse, 1)[0] == ranked[:1]
    assert rescored(view, moved, ([], {}), ([], {}), 10) == ([], {})


def test_rescored_scores_each_document_by_its_best_chunk(tmp_path, tiny_embedder):
    col = Collection.create(tmp_path / "c", tiny_embedder, window_tokens=16, overlap_tokens=4)
    vocabulary = "tea river sea stone cloud bread lamp wind salt moss".split()
    col.add([{"id": f"d{i}", "text": " ".join(vocabulary[(i * j) % 10] for j in range(30 + 11 * i))} for i in range(6)])
    col.add([{"id": "late", "text": "salt moss wind " * 12}])  # a second segment
    view = col.reader.current()
    assert len(view.parts) == 2
    query = col.embed("tea by the sea")
    dense = dense_rankings(view, query, 3, None, False, col.index_policy)[0]
    sparse = bm25_ranking(view, ["salt"], 10, None, 1.2, 0.75)
    candidates = {k for k, _ in dense[0]} | {k for k, _ in sparse[0]}
    moved = col.embed("wind over the salt marsh")
    ranked, where = rescored(view, moved, dense, sparse, 100)
    assert {k for k, _ in ranked} == candidates
    assert {where[k][0] for k, _ in ranked} == {0, 1}  # candidates of both segments
    for key, score in ranked:
        part, doc_row = view.find(key)
        segment = view.parts[part].segment
        rows = np.arange(segment.doc_chunks[doc_row], segment.doc_chunks[doc_row + 1])
        cosines = vector_index.reconstruct(segment.index, rows) @ moved[0]
        assert len(rows) > 1
        assert score == pytest.approx(float(cosines.max()), abs=1e-6)
        assert where[key][0] == part and rows[0] <= where[key][1] <= rows[-1]
        assert cosines[where[key][1] - rows[0]] == pytest.approx(float(cosines.max()), abs=1e-6)  # a best chunk (ties)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    col.close()
