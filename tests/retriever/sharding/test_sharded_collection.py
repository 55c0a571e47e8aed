"""The verbs of a sharded collection: placement by id, routing, reports, opening, upkeep."""

from __future__ import annotations

import hashlib
import json

import pytest

from retriever import Collection
from retriever.errors import BadInputError, CollectionNotFoundError
from retriever.sharding import SHARDS_FILE, ShardedCollection, open_collection, shard_of
from tests.retriever.sharding.helpers import assert_same_hits, corpus


def test_placement_is_the_documented_hash():
    for doc_id in ("a", "doc-001", "überlänge", "x" * 300, ""):
        digest = hashlib.sha256(doc_id.encode("utf-8")).digest()
        for n in (1, 2, 3, 7, 64):
            assert shard_of(doc_id, n) == int.from_bytes(digest[:8], "big") % n
    spread = {shard_of(f"doc-{i}", 4) for i in range(100)}
    assert spread == {0, 1, 2, 3}


def test_each_document_is_in_its_shard_and_only_there(pair):
    _, sharded = pair
    assert [len(shard) for shard in sharded.shards] and all(len(shard) for shard in sharded.shards)
    for doc in corpus():
        home = shard_of(doc["id"], 3)
        assert [doc["id"] in shard for shard in sharded.shards] == [i == home for i in range(3)]
    layout = json.loads((sharded.root / SHARDS_FILE).read_text())
    assert layout["shards"] == ["shard-000", "shard-001", "shard-002"]
    assert layout["placement"] == "sha256-first8-mod-n"


def test_reads_answer_as_one_collection(pair):
    one, sharded = pair
    assert len(sharded) == len(one) == 150
    assert list(sharded.ids()) == list(one.ids())
    assert list(sharded.ids({"kind": "a"})) == list(one.ids({"kind": "a"}))
    assert sharded.get("doc-042") == one.get("doc-042")
    assert sharded.get("missing") is None and "missing" not in sharded and "doc-042" in sharded
    assert sharded.chunk_spans("doc-025") == one.chunk_spans("doc-025") and len(one.chunk_spans("doc-025")) > 1
    assert sorted(sharded.metadata_fields()["year"]) == sorted(one.metadata_fields()["year"])
    info = sharded.info()
    assert (info["documents"], info["chunks"]) == (one.info()["documents"], one.info()["chunks"])
    assert len(info["shards"]) == 3 and info["model_sha256"] == one.info()["model_sha256"]


def test_writes_route_by_id_and_report_in_order(tmp_path, tiny_embedder):
    with ShardedCollection.create(tmp_path / "s", tiny_embedder, shards=3) as sharded:
        docs = corpus(12)
        report = sharded.add(docs)
        assert report.added == [doc["id"] for doc in docs] and report.chunks >= 12
        with pytest.raises(BadInputError, match="already exist"):
            sharded.add([{"id": "new-one", "text": "fresh"}, docs[5]])
        assert "new-one" not in sharded  # refused before any shard was written
        again = sharded.upsert([docs[3], {**docs[1], "text": "changed words"}, {"id": "new", "text": "tea"}])
        assert (again.unchanged, again.updated, again.added) == ([docs[3]["id"]], [docs[1]["id"]], ["new"])
        assert sharded.get(docs[1]["id"]).text == "changed words"
        gone = sharded.delete(["new", "nobody", docs[0]["id"]])
        assert gone.deleted == ["new", docs[0]["id"]] and len(sharded) == 11
        plan = sharded.classify([docs[2], {**docs[4], "metadata": {"year": 1}}, {"id": "other", "text": "x"}])
        assert [change for _, change in plan] == ["unchanged", "metadata", "text"]


def test_caller_vectors_go_with_their_documents(tmp_path, tiny_embedder):
    import numpy as np

    docs = corpus(9)
    vectors = np.random.default_rng(3).normal(size=(9, tiny_embedder.dim)).astype(np.float32)
    with ShardedCollection.create(tmp_path / "s", tiny_embedder, shards=3) as sharded:
        sharded.upsert(docs, vectors=vectors)
        for doc, vector in zip(docs, vectors):
            hit = sharded.search(vector=vector, k=1)[0]
            assert hit.id == doc["id"] and hit.score == pytest.approx(1.0, abs=1e-5)


def test_prepared_writes_commit_in_their_shards(tmp_path, tiny_embedder):
    with ShardedCollection.create(tmp_path / "s", tiny_embedder, shards=3) as sharded:
        docs = corpus(10)
        folders = sharded.prepare(docs)
        assert len(sharded) == 0 and 1 < len(folders) <= 3
        assert sorted(sharded.commit_prepared(folders).added) == sorted(doc["id"] for doc in docs)
        assert all(doc["id"] in sharded.shard_for(doc["id"]) for doc in docs)
        with pytest.raises(BadInputError, match="none of the shards"):
            sharded.commit_prepared([tmp_path])


def test_open_collection_opens_either_kind(pair, tmp_path):
    one, sharded = pair
    with open_collection(sharded.root) as opened:
        assert isinstance(opened, ShardedCollection) and len(opened) == len(sharded)
        assert_same_hits(sharded.search("coffee", k=5), opened.search("coffee", k=5))
    with open_collection(one.root) as opened:
        assert isinstance(opened, Collection)
    with pytest.raises(CollectionNotFoundError):
        open_collection(tmp_path)
    with pytest.raises(CollectionNotFoundError):
        ShardedCollection.open(one.root)


def test_create_refuses_bad_arguments(tmp_path, tiny_embedder, pair):
    for shards in (0, -1, 1.5, True, 5000):
        with pytest.raises(BadInputError, match="shards"):
            ShardedCollection.create(tmp_path / "bad", tiny_embedder, shards=shards)
    with pytest.raises(BadInputError, match="catalog_url"):
        ShardedCollection.create(tmp_path / "bad", tiny_embedder, shards=2, catalog_url="sqlite:///x.db")
    with pytest.raises(BadInputError, match="already exists"):
        ShardedCollection.create(pair[1].root, tiny_embedder, shards=2)


def test_upkeep_runs_on_every_shard(tmp_path, tiny_embedder):
    with ShardedCollection.create(tmp_path / "s", tiny_embedder, shards=2) as sharded:
        docs = corpus(30)
        sharded.upsert(docs[:15])
        sharded.upsert(docs[15:])
        sharded.delete([doc["id"] for doc in docs[:5]])
        expected = sharded.search("coffee roasted", k=8)
        result = sharded.compact()
        assert result["segments_before"] == 4 and result["segments_after"] == 2
        assert_same_hits(expected, sharded.search("coffee roasted", k=8))
        report = sharded.check()
        assert report.ok and report.segments == 2 and report.files > 0
        snap = sharded.snapshot(tmp_path / "snap")
        assert snap.documents == 25
        with open_collection(tmp_path / "snap") as copy:
            assert_same_hits(expected, copy.search("coffee roasted", k=8))
        with ShardedCollection.restore(tmp_path / "snap", tmp_path / "live") as live:
            assert len(live) == 25
        with pytest.raises(BadInputError):
            sharded.snapshot(tmp_path / "snap")
