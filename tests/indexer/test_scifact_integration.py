"""End to end on real text: a 500-plus-document SciFact slice through the
indexer with the packaged MiniLM, then title search, filters and deletes."""

from __future__ import annotations

import pytest

from retriever import Collection

QUERY = "effect of treatment on patients, cells, proteins and disease risk in studies"


@pytest.fixture(scope="module")
def scifact_collection(scifact_slice_collection, minilm):
    collection = Collection.open(scifact_slice_collection, minilm)
    yield collection
    collection.close()


def test_each_title_finds_its_document_in_top_3(scifact_collection):
    docs = [scifact_collection.get(doc_id) for doc_id in scifact_collection.ids()]
    assert len(docs) >= 500
    found = sum(doc.id in [hit.id for hit in scifact_collection.search(doc.title, k=3)] for doc in docs)
    assert found / len(docs) >= 0.95, f"title found in top 3 for only {found}/{len(docs)}"


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_filter_returns_only_matching_and_exactly_k(scifact_collection, mode):
    for bucket in range(5):
        hits = scifact_collection.search(QUERY, k=40, where={"bucket": bucket}, mode=mode)
        assert len(hits) == 40 and len({hit.id for hit in hits}) == 40
        assert {hit.metadata["bucket"] for hit in hits} == {bucket}
    hits = scifact_collection.search(QUERY, k=150, where={"bucket": {"$in": [1, 3]}}, mode=mode)
    assert len(hits) == 150 and all(hit.metadata["bucket"] in (1, 3) for hit in hits)


def test_deleted_document_never_comes_back(scifact_collection):
    victim = sorted(scifact_collection.ids())[3]
    document = scifact_collection.get(victim)
    assert victim in [hit.id for hit in scifact_collection.search(document.title, k=3)]
    scifact_collection.delete([victim])
    try:
        with Collection.open(scifact_collection.root) as reopened:
            for col in (scifact_collection, reopened):
                for mode in ("dense", "bm25", "hybrid"):
                    assert victim not in [hit.id for hit in col.search(document.title, k=1000, mode=mode)]
                assert col.get(victim) is None
    finally:
        scifact_collection.upsert([document])  # the slice collection is shared by other tests
