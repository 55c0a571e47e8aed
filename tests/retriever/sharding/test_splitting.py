"""An existing collection split into shards, its stored vectors carried: it searches as the source does."""

from __future__ import annotations

import numpy as np
import pytest

from retriever import Collection
from retriever.errors import BadInputError
from retriever.sharding import ShardedCollection, shard_of, split_collection
from tests.retriever.sharding.helpers import assert_same_hits, corpus


@pytest.fixture(scope="module")
def split_pair(tmp_path_factory, tiny_embedder):
    """``(source, split)``: a collection of two segments with deletions, and its split into three shards."""
    root = tmp_path_factory.mktemp("split")
    source = Collection.create(root / "source", tiny_embedder)
    docs = corpus(120, seed=5)
    source.upsert(docs[:70])
    source.upsert(docs[70:])
    source.delete([doc["id"] for doc in docs[::9]])
    source.choose_search_settings(alpha=0.4)
    split = split_collection(root / "source", root / "split", 3, batch_docs=40)
    yield source, split
    source.close()
    split.close()


def test_split_keeps_every_document_in_its_shard(split_pair):
    source, split = split_pair
    assert isinstance(split, ShardedCollection) and len(split.shards) == 3
    assert list(split.ids()) == list(source.ids())
    for doc_id in source.ids():
        assert doc_id in split.shards[shard_of(doc_id, 3)]
        assert split.get(doc_id) == source.get(doc_id)
        assert split.chunk_spans(doc_id) == source.chunk_spans(doc_id)
    assert split.search_settings() == source.search_settings()


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_split_searches_as_the_source(split_pair, mode):
    source, split = split_pair
    # evidence is left out: the idf it ranks sentences by counts the source's deleted rows until they are merged
    # away (ranking.term_idf), and the split carries live documents only
    for query in ("coffee beans", "neural networks rank documents", "tea"):
        assert_same_hits(source.search(query, k=10, mode=mode), split.search(query, k=10, mode=mode), evidence=False)
        where = {"kind": "a"}
        expected = source.search(query, k=7, mode=mode, where=where)
        assert_same_hits(expected, split.search(query, k=7, mode=mode, where=where), evidence=False)


def test_split_carries_vectors_it_could_not_embed(tmp_path, tiny_embedder):
    docs = corpus(20, seed=2)
    vectors = np.random.default_rng(0).normal(size=(20, tiny_embedder.dim)).astype(np.float32)
    with Collection.create(tmp_path / "source", tiny_embedder) as source:
        source.upsert(docs, vectors=vectors)  # the caller's vectors: embedding the texts again gives others
        with split_collection(source, tmp_path / "split", 2) as split:
            for vector in vectors[:5]:
                assert_same_hits(source.search(vector=vector, k=5), split.search(vector=vector, k=5))
            assert split.search(vector=vectors[7], k=1)[0].id == docs[7]["id"]


def test_split_refuses_a_used_destination_and_bad_counts(split_pair, tmp_path):
    source, split = split_pair
    with pytest.raises(BadInputError):
        split_collection(source, split.root, 2)
    with pytest.raises(BadInputError, match="shards"):
        split_collection(source, tmp_path / "none", 0)
    with pytest.raises(BadInputError, match="batch_docs"):
        split_collection(source, tmp_path / "none", 2, batch_docs=0)
    assert len(source) == len(split)  # the source left as it was
