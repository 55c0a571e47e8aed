"""``semsearch eval`` and the regression file benchmarks/quality.yaml."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from benchmarks.quality import load_regressions
from indexer.beir import evaluate

EVAL_KEYS = {
    "dataset",
    "split",
    "mode",
    "model",
    "backend",
    "query_backend",
    "ndcg@10",
    "mrr@10",
    "recall@100",
    "map@100",
    "queries",
    "seconds",
}


def regression_rows(dataset: str) -> list[dict]:
    rows = [row for row in load_regressions()["runs"] if row["dataset"] == dataset and row.get("model") != "adapted"]
    assert rows and all(row["expected"] for row in rows), f"no expected figures for {dataset}"
    return rows


def assert_reproduces(result: dict, row: dict) -> None:
    tolerance = load_regressions()["tolerance"]
    for metric, expected in row["expected"].items():
        assert result[metric] == pytest.approx(expected, abs=tolerance), (row["mode"], metric)


@pytest.fixture()
def tiny_beir(tmp_path):
    root = tmp_path / "toy"
    (root / "qrels").mkdir(parents=True)
    docs = {
        "d1": "Green tea is steamed right after picking.",
        "d2": "Coffee beans are roasted at high temperature.",
        "d3": "Rivers flow into the sea through deltas.",
        "d4": "Snow covers the mountain peaks in winter.",
    }
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items())
    )
    queries = {"q1": "steamed tea", "q2": "roasted coffee beans", "q3": "not judged"}
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n")
    return root


def test_eval_json_on_a_toy_dataset(capsys, tiny_beir, tiny_model_dir, tmp_path):
    code = main(
        [
            "eval",
            "-d",
            str(tiny_beir),
            "--mode",
            "bm25",
            "--model",
            str(tiny_model_dir),
            "-c",
            str(tmp_path / "col"),
            "--json",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and set(result) == EVAL_KEYS
    assert (result["dataset"], result["split"], result["mode"], result["queries"]) == ("toy", "test", "bm25", 2)
    assert result["ndcg@10"] == result["mrr@10"] == result["recall@100"] == 1.0
    # the collection is reused: a second run indexes nothing and scores the same
    assert main(["eval", "-d", str(tiny_beir), "--mode", "bm25", "-c", str(tmp_path / "col"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ndcg@10"] == 1.0


def test_eval_with_index_codes_searches_a_compressed_copy(capsys, tiny_beir, tiny_model_dir, tmp_path):
    from retriever import Collection
    from retriever.search.vector_index import IndexPolicy

    argv = [
        "eval",
        "-d",
        str(tiny_beir),
        "--mode",
        "dense",
        "--model",
        str(tiny_model_dir),
        "-c",
        str(tmp_path / "col"),
        "--json",
    ]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*argv, "--index-codes", "always"]) == 0
    compressed = json.loads(capsys.readouterr().out)
    assert compressed["ndcg@10"] == plain["ndcg@10"]  # four documents: every row is rescored exactly
    with Collection.open(tmp_path / "col-codes-always") as copy, Collection.open(tmp_path / "col") as original:
        assert [p.segment.index_type for p in copy.reader.current().parts] == ["ivf-rabitq"]
        assert original.index_policy.codes == IndexPolicy().codes and len(copy) == len(original)
    marker = (tmp_path / "col-codes-always.source").read_text()
    assert main([*argv, "--index-codes", "always"]) == 0  # reused while the collection stands still
    capsys.readouterr()
    assert (tmp_path / "col-codes-always.source").read_text() == marker


@pytest.mark.parametrize(
    "row", [r for r in regression_rows("scifact-slice50") if r["mode"] != "bm25"], ids=lambda row: row["mode"]
)
def test_scifact_slice_with_every_segment_compressed_reproduces_the_regression_file(
    scifact_slice, scifact_slice_collection, tmp_path, row
):
    import shutil

    own = tmp_path / "collection"  # the shared collection stays as it is
    shutil.copytree(scifact_slice_collection, own)
    result = evaluate(scifact_slice, mode=row["mode"], collection_dir=own, index_codes="always", progress=False)
    assert_reproduces(result, row)


def test_eval_bad_dataset_is_one_line_exit_2(capsys, tmp_path):
    assert main(["eval", "-d", str(tmp_path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "is not a BEIR dataset: corpus.jsonl is missing" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("row", regression_rows("scifact-slice50"), ids=lambda row: row["mode"])
def test_scifact_slice_reproduces_the_regression_file(scifact_slice, scifact_slice_collection, row):
    result = evaluate(scifact_slice, mode=row["mode"], collection_dir=scifact_slice_collection, progress=False)
    assert result["queries"] == 50
    assert_reproduces(result, row)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["cisi", "cranfield", "medline", "time"])
def test_small_datasets_reproduce_the_regression_file(datasets_dir, dataset):
    for row in regression_rows(dataset):
        assert_reproduces(evaluate(datasets_dir / dataset, mode=row["mode"], progress=False), row)


def test_leave_one_set_out_judges_a_setting_on_the_set_it_was_not_chosen_on():
    from benchmarks.hybrid_settings import SETS, leave_one_out

    default, overfit, steady = ("d",), ("o",), ("s",)
    scores = {
        default: dict.fromkeys(SETS, 0.5),
        steady: dict.fromkeys(SETS, 0.51),
        overfit: {name: (0.6 if name != "cisi" else 0.3) for name in SETS},
    }
    chosen = leave_one_out(scores, default)
    assert chosen["cisi"][0] == overfit and chosen["cisi"][1] == pytest.approx(-0.2)  # best elsewhere, worst here
    assert chosen["scifact"][0] == overfit and chosen["scifact"][1] == pytest.approx(0.1)
    assert leave_one_out({default: scores[default]}, default)["time"] == (default, 0.0)


def test_feedback_settings_are_restored_after_the_block_even_when_it_fails():
    from benchmarks.hybrid_settings import feedback_settings
    from retriever.search import feedback

    before = feedback.FEEDBACK_WEIGHT, feedback.FEEDBACK_DOCS
    with pytest.raises(RuntimeError):
        with feedback_settings(0.9, 5):
            assert (feedback.FEEDBACK_WEIGHT, feedback.FEEDBACK_DOCS) == (0.9, 5)
            raise RuntimeError("a search failed")
    assert (feedback.FEEDBACK_WEIGHT, feedback.FEEDBACK_DOCS) == before
