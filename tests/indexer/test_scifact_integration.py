"""End to end on real text: 500 SciFact abstracts through the indexer with the
packaged MiniLM, then title search, filters and deletes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from indexer.job import index_paths
from retriever import Collection

N_DOCS = 500


@pytest.fixture(scope="module")
def scifact_collection(tmp_path_factory, datasets_dir, minilm):
    source = datasets_dir / "scifact" / "corpus.jsonl"
    if not source.is_file():
        pytest.skip(f"needs {source}")
    corpus_dir = tmp_path_factory.mktemp("scifact-slice")
    with source.open(encoding="utf-8") as lines, (corpus_dir / "corpus.jsonl").open("w") as out:
        for number, line in enumerate(itertools.islice(lines, N_DOCS)):
            record = json.loads(line)
            record["bucket"] = number % 5  # a filterable field with known counts
            out.write(json.dumps(record) + "\n")
    collection = Collection.create(tmp_path_factory.mktemp("col") / "scifact", minilm)
    report = index_paths(collection, [corpus_dir], progress=False)
    assert report.skipped == []
    assert len(report.written.added) == N_DOCS
    yield collection
    collection.close()


def test_each_title_finds_its_document_in_top_3(scifact_collection):
    docs = [scifact_collection.get(doc_id) for doc_id in scifact_collection.ids()]
    assert len(docs) == N_DOCS
    found = sum(doc.id in [hit.id for hit in scifact_collection.search(doc.title, k=3)] for doc in docs)
    assert found / N_DOCS >= 0.95, f"title found in top 3 for only {found}/{N_DOCS}"


def test_filter_returns_only_matching_and_exactly_k(scifact_collection):
    for bucket in range(5):
        hits = scifact_collection.search("cancer cell growth", k=50, where={"bucket": bucket})
        assert len(hits) == 50
        assert {hit.metadata["bucket"] for hit in hits} == {bucket}
    hits = scifact_collection.search("protein folding", k=200, where={"bucket": {"$in": [1, 3]}})
    assert len(hits) == 200 and len({hit.id for hit in hits}) == 200
    assert all(hit.metadata["bucket"] in (1, 3) for hit in hits)


def test_deleted_document_never_comes_back(scifact_collection):
    victim = next(iter(scifact_collection.ids()))
    title = scifact_collection.get(victim).title
    assert victim in [hit.id for hit in scifact_collection.search(title, k=3)]
    scifact_collection.delete([victim])
    reopened = Collection.open(scifact_collection.root)
    for col in (scifact_collection, reopened):
        assert victim not in [hit.id for hit in col.search(title, k=N_DOCS)]
        assert col.get(victim) is None
    reopened.close()
