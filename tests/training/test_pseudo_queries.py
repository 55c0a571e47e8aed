"""Pseudo-queries cut from documents, and hard negatives mined by the collection's own search."""

from __future__ import annotations

import pytest

from retriever import Collection
from training.pseudo_queries import draw_queries, mine_pairs

TOPICS = [
    "river delta sediment",
    "protein folding enzyme",
    "glacier ice melt",
    "orbit satellite launch",
    "vaccine trial immune",
    "canal lock barge",
    "monsoon rain season",
    "fossil dinosaur bone",
]


def documents(n: int = 80) -> list[dict]:
    docs = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        docs.append(
            {
                "id": f"d{i}",
                "title": f"Notes on {topic} number {i}",
                "text": f"The {topic} study {i} began in spring with twelve field samples. "
                f"Each {topic.split()[0]} sample was measured twice by team {i % 5}. "
                f"Results for {topic.split()[-1]} varied with site {i} and depth.",
            }
        )
    return docs


def test_each_query_comes_from_its_document_and_leaves_its_sentence_out_mostly():
    docs = documents()
    drawn = draw_queries(((d["id"], d["title"], d["text"]) for d in docs), seed=3)
    by_id = {d["id"]: d for d in docs}
    assert len(drawn) == len(docs)  # every document here has a title and three sentences
    kinds = {q.kind for q in drawn}
    assert kinds <= {"title", "sentence", "span"} and len(kinds) >= 2
    for q in drawn:
        source = by_id[q.doc_id]
        assert q.query in source["title"] or q.query in source["text"]
        assert 4 <= len(q.query.split()) <= 40 or q.kind == "title"
    cut = [q for q in drawn if q.kind == "sentence" and q.query not in q.positive]
    assert len(cut) >= 0.7 * sum(q.kind == "sentence" for q in drawn)  # ICT: mostly taken out of the positive
    assert draw_queries(((d["id"], d["title"], d["text"]) for d in docs), seed=3) == drawn  # seeded


def test_a_document_of_one_sentence_and_no_title_gives_no_query():
    assert draw_queries([("a", "", "Only one sentence here about rivers and seas.")]) == []
    assert draw_queries([("b", "Rivers", "Short. Two.")]) == []  # a one-word title, sentences too short


@pytest.fixture(scope="module")
def collection(tmp_path_factory, tiny_model_dir):
    col = Collection.create(tmp_path_factory.mktemp("pq") / "col", tiny_model_dir)
    col.add(documents())
    yield col
    col.close()


def test_negatives_come_from_the_search_never_the_source(collection):
    queries = draw_queries(((d.id, d.title, d.text) for d in map(collection.get, collection.ids())), seed=1)[:30]
    pairs = mine_pairs(collection, queries, seed=1, ranks=(2, 20), progress=False)
    assert len(pairs) == len(queries)
    texts = {collection.get(i).text: i for i in collection.ids()}
    for q, pair in zip(queries, pairs):
        assert pair.anchor == q.query and pair.positive == q.positive
        assert pair.negative is not None and texts[pair.negative] != q.doc_id
        assert q.query.lower() not in pair.negative.lower()


def test_with_title_share_one_every_long_title_is_the_query_and_its_search_finds_it(collection):
    queries = draw_queries(
        ((d.id, d.title, d.text) for d in map(collection.get, collection.ids())), seed=2, title_share=1.0
    )
    assert queries and all(q.kind == "title" and q.query == collection.get(q.doc_id).title for q in queries)
    found = sum(
        q.doc_id in [h.id for h in collection.search(q.query, k=10, mode="bm25", evidence="none")] for q in queries
    )
    assert found > 0.5 * len(queries)
