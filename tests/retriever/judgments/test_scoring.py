"""Measuring a collection on judgments: ``Collection.evaluate`` and ``retriever.judgments.scoring``."""

from __future__ import annotations

import json

import pytest

from retriever import BadInputError, Collection
from retriever.evaluation import METRICS
from retriever.judgments.records import JudgedSet, Judgment, query_key
from retriever.search.options import SearchOptions

DOCS = {
    "d1": "Green tea is steamed right after picking.",
    "d2": "Coffee beans are roasted at high temperature.",
    "d3": "Rivers flow into the sea through deltas.",
    "d4": "Snow covers the mountain peaks in winter.",
    "d5": "Python is a programming language with many libraries.",
}
TEA, COFFEE = "steamed green tea", "roasted coffee beans"


@pytest.fixture()
def collection(tmp_path, tiny_embedder):
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.upsert([{"id": key, "text": text} for key, text in DOCS.items()])
        yield col


def test_a_judged_answer_ranked_first_scores_one_and_one_never_retrieved_scores_zero(collection):
    # bm25 ranks d1 first for TEA (the only document with its terms); d4 shares no term with COFFEE
    assert collection.search(TEA, mode="bm25")[0].id == "d1"
    assert "d4" not in [hit.id for hit in collection.search(COFFEE, k=100, mode="bm25")]
    evaluation = collection.evaluate(
        [{"query": TEA, "id": "d1"}, {"query": COFFEE, "id": "d4", "grade": 2}], mode="bm25", per_query=True
    )
    tea, coffee = evaluation.per_query[query_key(TEA)], evaluation.per_query[query_key(COFFEE)]
    assert tea["query"] == TEA and coffee["query"] == COFFEE
    assert all(tea[metric] == pytest.approx(1.0) for metric in METRICS)
    assert all(coffee[metric] == 0.0 for metric in METRICS)
    assert evaluation.metrics["ndcg@10"] == pytest.approx(0.5)
    assert (evaluation.queries, evaluation.judgments, evaluation.unanswered) == (2, 2, 0)


def test_per_query_figures_average_to_the_overall_ones(collection):
    judgments = [
        {"query": TEA, "id": "d1", "grade": 1},
        {"query": TEA, "id": "d2", "grade": 2},
        {"query": COFFEE, "id": "d2", "grade": 1},
        {"query": "rivers and the sea", "id": "d3", "grade": 3},
        {"query": "rivers and the sea", "id": "d4", "grade": 1},
    ]
    evaluation = collection.evaluate(judgments, mode="dense", per_query=True)
    assert len(evaluation.per_query) == evaluation.queries == 3
    for metric in METRICS:
        mean = sum(row[metric] for row in evaluation.per_query.values()) / 3
        assert evaluation.metrics[metric] == pytest.approx(mean)
    # bm25 does not retrieve the grade-2 document d2 for TEA (no shared term): found d1 alone is not perfect
    graded = collection.evaluate(judgments[:2], mode="bm25")
    assert 0.0 < graded.metrics["ndcg@10"] < 1.0 and graded.metrics["recall@100"] < 1.0
    assert collection.evaluate(judgments).per_query is None


def test_a_judged_document_the_collection_no_longer_holds_counts_as_not_found(collection):
    judgments = [Judgment(TEA, "d1"), Judgment(TEA, "gone")]
    assert collection.evaluate(judgments, mode="bm25").metrics["recall@100"] == pytest.approx(0.5)
    collection.delete(["d1"])
    assert collection.evaluate(judgments, mode="bm25").metrics["recall@100"] == 0.0


def test_queries_without_an_answer_are_left_out_and_counted(collection):
    evaluation = collection.evaluate(
        [{"query": TEA, "id": "d1"}, {"query": COFFEE, "id": "d2", "grade": 0}, {"query": TEA, "id": "d3", "grade": 0}],
        mode="bm25",
        per_query=True,
    )
    assert (evaluation.queries, evaluation.unanswered, evaluation.judgments) == (1, 1, 2)
    assert list(evaluation.per_query) == [query_key(TEA)] and evaluation.metrics["ndcg@10"] == pytest.approx(1.0)
    with pytest.raises(BadInputError, match="grade 1 or more"):
        collection.evaluate([{"query": COFFEE, "id": "d2", "grade": 0}])


def test_the_collections_own_judgments_are_the_default_and_a_list_is_not_stored(collection):
    with pytest.raises(BadInputError, match="no judgments"):
        collection.evaluate()
    collection.evaluate([{"query": TEA, "id": "d1"}], mode="bm25")
    assert collection.judgment_count() == (0, 0)
    collection.judge(TEA, "d1", 1)
    collection.judge(COFFEE, "d4", 1)
    own = collection.evaluate(mode="bm25")
    assert (own.queries, own.judgments) == (2, 2) and own.metrics["mrr@10"] == pytest.approx(0.5)
    assert own.metrics == collection.evaluate(collection.judged(), mode="bm25").metrics


def test_judgment_files_measure_as_the_same_list_does(collection, tmp_path):
    rows = [{"query": TEA, "id": "d1", "grade": 2}, {"query": COFFEE, "id": "d4"}]
    jsonl = tmp_path / "judgments.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"_id": "1", "text": TEA}) + "\n" + json.dumps({"_id": "2", "text": COFFEE}) + "\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n1\td1\t2\n2\td4\t1\n", encoding="utf-8")
    from_list = collection.evaluate(rows, mode="bm25")
    assert collection.evaluate(str(jsonl), mode="bm25").metrics == from_list.metrics
    assert collection.evaluate(qrels, queries=queries, mode="bm25").metrics == from_list.metrics
    with pytest.raises(BadInputError, match=r"judgments\[1\]: .*grade"):
        collection.evaluate([rows[0], {"query": TEA, "id": "d2", "grade": 7}])
    with pytest.raises(BadInputError, match="queries"):
        collection.evaluate(rows, queries=queries)


def test_settings_name_what_was_searched_with_the_collections_own_where_unset(collection):
    judged = [{"query": TEA, "id": "d1"}]
    default = collection.evaluate(judged).settings
    assert default == {"mode": "hybrid", **collection.search_settings(), "model": collection.model["name"]}
    assert collection.evaluate(judged, fusion=None, alpha=None, feedback=None).settings == default  # None: unset
    collection.choose_search_settings(fusion="rrf", feedback=False)
    own = collection.evaluate(judged, per_query=True)
    assert (own.settings["fusion"], own.settings["feedback"]) == ("rrf", False)
    asked = collection.evaluate(judged, fusion="rrf", feedback=False, per_query=True)
    assert asked.per_query == own.per_query  # unset is the collection's own, as a search by its users is
    chosen = collection.evaluate(judged, mode="hybrid", fusion="convex", alpha=0.2).settings
    assert (chosen["fusion"], chosen["alpha"], chosen["feedback"]) == ("convex", 0.2, False)
    by_options = collection.evaluate(judged, options=SearchOptions(mode="bm25", k=3, evidence="terms"))
    assert by_options.metrics == collection.evaluate(judged, mode="bm25").metrics
    assert by_options.settings["mode"] == "bm25"
    assert json.loads(json.dumps(by_options.to_dict()))["settings"]["mode"] == "bm25"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"k": 5}, "fixes k"),
        ({"evidence": "terms"}, "fixes evidence"),
        ({"nprobe": 3}, "unknown search option"),
        ({"mode": "fuzzy"}, "mode"),
        ({"options": SearchOptions(), "mode": "bm25"}, "not both"),
    ],
)
def test_bad_search_options_are_refused(collection, fields, message):
    with pytest.raises(BadInputError, match=message):
        collection.evaluate([{"query": TEA, "id": "d1"}], **fields)


def test_a_judged_set_subset_measures_only_its_queries(collection):
    judged = JudgedSet.of([Judgment(TEA, "d1"), Judgment(COFFEE, "d4")])
    only_tea = collection.evaluate(judged.subset([query_key(TEA)]), mode="bm25")
    assert only_tea.queries == 1 and only_tea.metrics["ndcg@10"] == pytest.approx(1.0)
