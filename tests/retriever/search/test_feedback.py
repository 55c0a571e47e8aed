"""Dense pseudo-relevance feedback: the query moves toward the first fusion's top documents."""

from __future__ import annotations

import numpy as np
import pytest

from retriever import Collection
from retriever.errors import BadInputError
from retriever.search.feedback import FEEDBACK_WEIGHT, expanded_query

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
        assert ([h.id for h in collection.search("alpha", vector=query, k=4, mode=mode)]
                == [h.id for h in collection.search("alpha", vector=query, k=4, mode=mode, feedback=False)])


def test_feedback_must_be_a_bool(collection):
    with pytest.raises(BadInputError, match="feedback must be True or False"):
        collection.search("alpha", feedback="yes")
