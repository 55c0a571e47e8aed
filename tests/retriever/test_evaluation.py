"""Evaluation: BEIR loading and trec_eval metrics against hand-computed values."""

from __future__ import annotations

import json
import math

import pytest

from retriever.errors import BadInputError
from retriever.evaluation import evaluate_run, load_beir, run_queries


def write_beir(root, qrels_rows, queries):
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "", "text": "x"}) + "\n")
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join("\t".join(map(str, r)) + "\n" for r in qrels_rows)
    )
    return root


def test_metrics_match_hand_computation():
    qrels = {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 1}}
    run = {"q1": ["d2", "d1", "d3"], "q2": ["d5"]}
    scores = evaluate_run(run, qrels)
    dcg = 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert scores["ndcg@10"] == pytest.approx((dcg / idcg + 0.0) / 2)
    assert scores["mrr@10"] == pytest.approx((1 / 2 + 0) / 2)
    assert scores["recall@100"] == pytest.approx((1.0 + 0.0) / 2)
    assert scores["map@100"] == pytest.approx(((1 / 2 + 2 / 3) / 2 + 0) / 2)


def test_mrr_is_cut_at_10_and_missing_queries_score_zero():
    qrels = {"q1": {"rel": 1}, "q2": {"rel": 1}}
    run = {"q1": [f"x{i}" for i in range(10)] + ["rel"]}
    scores = evaluate_run(run, qrels)
    assert scores["mrr@10"] == 0.0
    assert scores["recall@100"] == pytest.approx(0.5)


def test_given_order_is_kept_even_for_ids_trec_eval_would_reorder():
    qrels = {"q": {"a": 1}}
    assert evaluate_run({"q": ["z", "a"]}, qrels)["mrr@10"] == pytest.approx(0.5)
    assert evaluate_run({"q": ["a", "z"]}, qrels)["mrr@10"] == pytest.approx(1.0)


def test_load_beir_takes_the_split_queries_and_graded_qrels(tmp_path):
    root = write_beir(
        tmp_path / "ds", [("q1", "d1", 2), ("q1", "d2", 0), ("q3", "d1", 1)], {"q1": "one", "q2": "two", "q3": "three"}
    )
    dataset = load_beir(root)
    assert dataset.queries == {"q1": "one", "q3": "three"}
    assert dataset.qrels == {"q1": {"d1": 2, "d2": 0}, "q3": {"d1": 1}}
    assert dataset.name == "ds"


def test_load_beir_errors_name_the_problem(tmp_path):
    with pytest.raises(BadInputError, match="corpus.jsonl is missing"):
        load_beir(tmp_path)
    root = write_beir(tmp_path / "ds", [("q1", "d1", 1)], {"q1": "one"})
    with pytest.raises(BadInputError, match=r"train.tsv is missing \(splits here: test\)"):
        load_beir(root, "train")
    (root / "qrels" / "test.tsv").write_text("q1\td1\tvery\n")
    with pytest.raises(BadInputError, match="not an integer"):
        load_beir(root)
    (root / "qrels" / "test.tsv").write_text("q7\td1\t1\n")
    with pytest.raises(BadInputError, match="have no text"):
        load_beir(root)


def test_run_queries_drops_the_query_itself():
    run = run_queries(lambda text: ["q1", "d1", "d2"], {"q1": "text"}, progress=False)
    assert run == {"q1": ["d1", "d2"]}


def test_malformed_beir_files_name_the_line(tmp_path):
    root = write_beir(tmp_path / "ds", [("q1", "d1", 1)], {"q1": "one"})
    with open(root / "corpus.jsonl", "a", encoding="utf-8") as corpus:
        corpus.write("not json\n")
    dataset = load_beir(root)
    with pytest.raises(BadInputError, match=r"corpus\.jsonl:2: not a BEIR corpus record \(invalid JSON"):
        list(dataset.corpus())
    (root / "queries.jsonl").write_text('{"_id": "q1"}\n', encoding="utf-8")
    with pytest.raises(BadInputError, match=r"queries\.jsonl:1: not a BEIR query record"):
        load_beir(root)
