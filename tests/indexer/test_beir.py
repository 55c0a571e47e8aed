"""``indexer.beir``: a BEIR dataset's corpus built into a collection (or the cached one reused), its queries scored."""

from __future__ import annotations

import json

import pytest

from indexer import beir


@pytest.fixture()
def toy_beir(tmp_path):
    root = tmp_path / "toy set"
    (root / "qrels").mkdir(parents=True)
    docs = {
        "d1": "Green tea is steamed right after picking.",
        "d2": "Coffee beans are roasted at high temperature.",
        "d3": "Rivers flow into the sea through deltas.",
    }
    queries = {"q1": "steamed tea " + "and more words " * 40, "q2": "roasted coffee beans"}
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items())
    )
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return root


def test_evaluate_builds_the_cached_collection_once_then_reuses_it(toy_beir, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(beir, "EVAL_ROOT", tmp_path / "cache")
    first = beir.evaluate(toy_beir, mode="bm25", model=str(tiny_model_dir), progress=False)
    cached = sorted((tmp_path / "cache").iterdir())
    assert [path.name[:-13] for path in cached] == ["toy-set"]  # <dataset>-<12 hex digits of the weights' hash>
    again = beir.evaluate(toy_beir, mode="bm25", model=str(tiny_model_dir), progress=False)
    assert sorted((tmp_path / "cache").iterdir()) == cached
    assert first["ndcg@10"] == again["ndcg@10"] == 1.0
    assert (again["dataset"], again["queries"], again["mode"]) == ("toy set", 2, "bm25")


def test_queries_over_the_window_are_noted_once(toy_beir, tiny_model_dir, tmp_path, capsys):
    beir.evaluate(toy_beir, mode="dense", model=str(tiny_model_dir), collection_dir=tmp_path / "col", progress=False)
    notes = [line for line in capsys.readouterr().err.splitlines() if "longer than the model's window" in line]
    assert notes == [
        "semsearch: note: 1 of 2 queries are longer than the model's window; "
        "the dense side embedded only their first window"
    ]
