"""Fixtures for the sharding tests: the same documents in one collection and in three shards."""

from __future__ import annotations

import pytest

from retriever import Collection
from retriever.sharding import ShardedCollection
from tests.retriever.sharding.helpers import corpus


@pytest.fixture(scope="module")
def pair(tmp_path_factory, tiny_embedder):
    """``(one, sharded)``: the same documents in one collection and in a collection of three shards."""
    root = tmp_path_factory.mktemp("pair")
    one = Collection.create(root / "one", tiny_embedder)
    sharded = ShardedCollection.create(root / "sharded", tiny_embedder, shards=3)
    docs = corpus()
    one.upsert(docs)
    sharded.upsert(docs)
    yield one, sharded
    one.close()
    sharded.close()
