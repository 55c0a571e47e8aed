"""A sharded collection answers as one collection of the same documents: ids, order, scores, chunks, evidence."""

from __future__ import annotations

import numpy as np
import pytest

from retriever import Collection
from retriever.sharding import ShardedCollection
from tests.retriever.sharding.helpers import assert_same_hits, corpus

QUERIES = ("coffee beans roasted", "python databases store rows", "snow covers mountains in winter", "fox")


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
@pytest.mark.parametrize("k", [3, 10, 40])
def test_each_mode_gives_the_same_hits(pair, mode, k):
    one, sharded = pair
    for query in QUERIES:
        expected = one.search(query, k=k, mode=mode)
        assert len(expected) == k
        assert_same_hits(expected, sharded.search(query, k=k, mode=mode))


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
@pytest.mark.parametrize("feedback", [True, False])
def test_hybrid_with_and_without_feedback(pair, fusion, feedback):
    one, sharded = pair
    for query in QUERIES:
        kwargs = dict(k=15, mode="hybrid", fusion=fusion, feedback=feedback, alpha=0.5 if fusion == "convex" else None)
        assert_same_hits(one.search(query, **kwargs), sharded.search(query, **kwargs))


def test_feedback_changes_the_ranking_it_is_compared_on(pair):
    one, _ = pair
    rankings = {
        feedback: [hit.id for hit in one.search(QUERIES[1], k=40, mode="hybrid", feedback=feedback)]
        for feedback in (True, False)
    }
    assert rankings[True] != rankings[False]  # so the comparisons above exercise feedback


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
@pytest.mark.parametrize("where", [{"year": 2002}, {"kind": "b"}, {"year": {"$in": [2001, 2003]}}])
def test_filtered_searches(pair, mode, where):
    one, sharded = pair
    for query in QUERIES:
        expected = one.search(query, k=10, mode=mode, where=where)
        assert expected and all(
            all(hit.metadata[f] == v for f, v in where.items() if not isinstance(v, dict)) for hit in expected
        )
        assert_same_hits(expected, sharded.search(query, k=10, mode=mode, where=where))


def test_a_filter_no_document_matches_gives_nothing(pair):
    one, sharded = pair
    assert one.search("coffee", where={"year": 1900}) == sharded.search("coffee", where={"year": 1900}) == []


def test_a_query_vector_and_evidence_by_meaning(pair):
    one, sharded = pair
    vector = one.embed("rivers flow into the sea")[0]
    assert_same_hits(one.search(vector=vector, k=10), sharded.search(vector=vector, k=10))
    expected = one.search(QUERIES[2], k=5, evidence="semantic")
    got = sharded.search(QUERIES[2], k=5, evidence="semantic")
    assert_same_hits(expected, got)
    np.testing.assert_allclose(
        [e.score for hit in got for e in hit.evidence], [e.score for hit in expected for e in hit.evidence], atol=1e-5
    )


def test_the_same_after_deletes_and_upserts(tmp_path, tiny_embedder):
    one = Collection.create(tmp_path / "one", tiny_embedder)
    sharded = ShardedCollection.create(tmp_path / "sharded", tiny_embedder, shards=3)
    docs = corpus(90, seed=11)
    deleted = {doc["id"] for doc in docs[::7]}
    changed = [
        {**doc, "text": doc["text"] + " coffee python coffee"} for doc in docs[1:40:5] if doc["id"] not in deleted
    ]
    for collection in (one, sharded):
        collection.upsert(docs[:60])
        collection.upsert(docs[60:])  # two segments per shard
        collection.delete(sorted(deleted))
        assert collection.upsert(changed).updated == [doc["id"] for doc in changed]
    assert len(one) == len(sharded)
    for mode in ("dense", "bm25", "hybrid"):
        for query in QUERIES:
            expected = one.search(query, k=12, mode=mode)
            assert not {hit.id for hit in expected} & deleted
            assert_same_hits(expected, sharded.search(query, k=12, mode=mode))
    one.close()
    sharded.close()


def test_settings_chosen_for_the_collection_are_searched_with(pair):
    one, sharded = pair
    before = sharded.search_settings()
    try:
        sharded.choose_search_settings(fusion="rrf", feedback=False)
        assert all(shard.search_settings()["fusion"] == "rrf" for shard in sharded.shards)
        expected = one.search(QUERIES[0], k=10, fusion="rrf", feedback=False)
        assert_same_hits(expected, sharded.search(QUERIES[0], k=10))
    finally:
        sharded.choose_search_settings(**before)
