"""Documents of a title alone: accepted on every write path, one chunk from the title, found by dense and BM25.

A document with neither a title nor a text is still refused.
"""

from __future__ import annotations

import json

import pytest

from indexer.job import index_paths
from indexer.loaders import LoadError, load_path
from retriever import Collection
from retriever.documents import Document, coerce_document
from retriever.encoding.chunking import Chunker
from retriever.errors import BadInputError

TITLES = {"t1": "Glacier retreat in the Alps", "t2": "Volcanic soils of Iceland", "t3": "Monsoon rainfall over Kerala"}


@pytest.fixture
def col(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as opened:
        yield opened


def test_coerce_accepts_a_title_alone_and_refuses_neither():
    assert coerce_document(Document("a", "", title="Only a title")).title == "Only a title"
    assert coerce_document({"id": "b", "title": "Only a title"}).text == ""
    for blank in (Document("c", "  ", title=" \n"), {"id": "d"}, {"id": "e", "text": "", "title": ""}):
        with pytest.raises(BadInputError, match="text is empty"):
            coerce_document(blank)


@pytest.mark.parametrize("title_prefix", [True, False])
def test_a_title_alone_is_one_chunk_of_its_title(tiny_embedder, title_prefix):
    chunker = Chunker(tiny_embedder.tokenizer, 24, 4, title_prefix=title_prefix)
    (chunk,) = chunker.split(Document("t", "   ", title="  Glacier retreat  "))
    assert (chunk.start, chunk.end, chunk.embed_text) == (0, 0, "Glacier retreat")
    expected = chunker.tokenizer.encode("Glacier retreat", add_special_tokens=False).ids
    assert list(chunk.token_ids) == expected
    long_title = " ".join(["word"] * 100)
    (long,) = chunker.split(Document("l", "", title=long_title))
    assert len(long.token_ids) == 24  # the window's worth of the title is embedded


def test_jsonl_csv_and_beir_records_of_a_title_alone_are_read(tmp_path):
    (tmp_path / "r.jsonl").write_text(
        json.dumps({"id": "a", "title": "Title only", "text": ""})
        + "\n"
        + json.dumps({"id": "b", "title": "No text field at all"})
        + "\n"
        + json.dumps({"id": "c", "title": " ", "text": " "})
        + "\n",
        encoding="utf-8",
    )
    items = list(load_path(tmp_path / "r.jsonl"))
    assert [(item.id, item.text) for item in items[:2]] == [("a", ""), ("b", "")]
    assert isinstance(items[2], LoadError) and "empty" in items[2].reason
    (tmp_path / "t.csv").write_text("id,title,text\n1,A title,\n2,,\n", encoding="utf-8")
    first, second = load_path(tmp_path / "t.csv")
    assert (first.id, first.title, first.text) == ("1", "A title", "")
    assert isinstance(second, LoadError)
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "Zinc", "text": ""}) + "\n")
    (doc,) = load_path(beir)
    assert (doc.id, doc.title) == ("d1", "Zinc")


def test_title_only_documents_are_found_by_dense_and_bm25_search(col, tmp_path):
    records = [{"id": key, "title": title, "text": ""} for key, title in TITLES.items()]
    records.append({"id": "full", "title": "Tea", "text": "Green tea is steamed right after picking."})
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    report = index_paths(col, [tmp_path / "docs.jsonl"], progress=False)
    assert report.skipped == [] and report.indexed == 4
    assert report.written.chunks == 4  # one chunk per title-only document
    for key, title in TITLES.items():
        assert col.search(title, k=1, mode="dense")[0].id == key
    hits = col.search("Iceland volcanic", k=2, mode="bm25")
    assert hits[0].id == "t2" and hits[0].title == TITLES["t2"]
    assert col.get("t2").text == ""
