"""``semsearch eval -c DIR``: a collection measured on its judgments, from the command line."""

from __future__ import annotations

import json

import pytest
import yaml

from app.cli import build_parser, main
from retriever.evaluation import METRICS

DOCS = {
    "d1": "Green tea is steamed right after picking.",
    "d2": "Coffee beans are roasted at high temperature.",
    "d3": "Rivers flow into the sea through deltas.",
    "d4": "Snow covers the mountain peaks in winter.",
}
TEA, COFFEE = "steamed green tea", "roasted coffee beans"
# bm25 ranks d1 first for TEA; d4 shares no term with COFFEE, so it is never found for it
JUDGMENTS = [{"query": TEA, "id": "d1", "grade": 1}, {"query": COFFEE, "id": "d4", "grade": 2}]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture()
def col(capsys, tmp_path, tiny_model_dir):
    (tmp_path / "docs").mkdir()
    records = jsonl(tmp_path / "docs" / "records.jsonl", [{"id": k, "text": v} for k, v in DOCS.items()])
    code, _, err = run(capsys, "index", records, "-c", tmp_path / "col", "--model", tiny_model_dir, "--quiet")
    assert code == 0, err
    return tmp_path / "col"


@pytest.fixture()
def judged_col(capsys, col, tmp_path):
    code, _, err = run(capsys, "judge", "import", jsonl(tmp_path / "judgments.jsonl", JUDGMENTS), "-c", col)
    assert code == 0, err
    return col


def test_a_collection_without_judgments_says_how_to_add_some_and_following_it_works(capsys, col, tmp_path):
    code, out, err = run(capsys, "eval", "-c", col)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and "no judgments" in err and "semsearch judge import" in err
    assert run(capsys, "judge", "import", jsonl(tmp_path / "j.jsonl", JUDGMENTS), "-c", col)[0] == 0
    code, out, _ = run(capsys, "eval", "-c", col, "--mode", "bm25", "--json")
    result = json.loads(out)
    assert code == 0 and (result["queries"], result["judgments"]) == (2, 2)
    assert result["metrics"]["ndcg@10"] == pytest.approx(0.5) and set(result["metrics"]) == set(METRICS)
    assert result["settings"]["mode"] == "bm25"


def test_per_query_rows_come_worst_first(capsys, judged_col):
    code, out, _ = run(capsys, "eval", "-c", judged_col, "--mode", "bm25", "--per-query")
    assert code == 0
    lines = out.splitlines()
    assert "2 queries" in lines[0] and "bm25" in lines[0]
    assert lines[1].split() == list(METRICS) and float(lines[2].split()[0]) == pytest.approx(0.5)
    rows = [line for line in lines if line.rstrip().endswith((TEA, COFFEE))]
    assert [row.rsplit("  ", 1)[1] for row in rows] == [COFFEE, TEA]  # 0.0 first, then 1.0
    assert float(rows[0].split()[0]) == 0.0 and float(rows[1].split()[0]) == 1.0
    code, out, _ = run(capsys, "eval", "-c", judged_col, "--mode", "bm25", "--per-query", "--json")
    per_query = json.loads(out)["per_query"]
    assert sorted(row["query"] for row in per_query.values()) == sorted([COFFEE, TEA])


def test_a_judgment_file_is_measured_on_and_not_stored(capsys, col, tmp_path):
    judgments = jsonl(tmp_path / "j.jsonl", JUDGMENTS[:1])
    code, out, _ = run(capsys, "eval", "-c", col, "--judgments", judgments, "--mode", "bm25", "--json")
    assert code == 0 and json.loads(out)["metrics"]["mrr@10"] == 1.0
    code, out, _ = run(capsys, "judge", "list", "-c", col, "--json")
    assert code == 0 and json.loads(out)["judgments"] == []


def test_record_then_expect_passes_and_a_higher_expected_figure_fails_naming_it(capsys, judged_col, tmp_path):
    quality = tmp_path / "quality.yaml"
    code, _, err = run(capsys, "eval", "-c", judged_col, "--mode", "bm25", "--record", quality)
    assert code == 0 and "quality.yaml" in err
    recorded = yaml.safe_load(quality.read_text(encoding="utf-8"))
    assert recorded["metrics"]["ndcg@10"] == pytest.approx(0.5) and recorded["settings"]["mode"] == "bm25"
    code, _, err = run(capsys, "eval", "-c", judged_col, "--mode", "bm25", "--expect", quality)
    assert code == 0 and "regression:" not in err
    recorded["metrics"]["ndcg@10"] = 0.9
    quality.write_text(yaml.safe_dump(recorded), encoding="utf-8")
    code, out, err = run(capsys, "eval", "-c", judged_col, "--mode", "bm25", "--expect", quality, "--json")
    regressions = json.loads(out)["regressions"]
    assert code == 1 and [(r["metric"], r["expected"], r["measured"]) for r in regressions] == [("ndcg@10", 0.9, 0.5)]
    assert [line for line in err.splitlines() if "regression:" in line] == [
        line for line in err.splitlines() if "ndcg@10" in line
    ]
    code, _, err = run(capsys, "eval", "-c", judged_col, "--mode", "dense", "--expect", quality)
    assert "mode: bm25 -> dense" in err  # settings other than those recorded are named


@pytest.fixture(scope="module")
def nudged_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with one weight nudged: same tokenizer, other vectors."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    with torch.no_grad():
        next(p for name, p in model.named_parameters() if "word_embeddings" in name).view(-1)[0] += 0.01
    target = tmp_path_factory.mktemp("nudged") / "model"
    model.save(str(target))
    return target


def test_another_model_is_measured_on_a_copy_and_the_collection_keeps_its_own(capsys, judged_col, nudged_model_dir):
    own = json.loads(run(capsys, "eval", "-c", judged_col, "--mode", "dense", "--json")[1])["settings"]["model"]
    code, out, err = run(capsys, "eval", "-c", judged_col, "--model", nudged_model_dir, "--mode", "dense", "--json")
    assert code == 0, err
    assert json.loads(out)["settings"]["model"] != own
    assert json.loads(run(capsys, "eval", "-c", judged_col, "--mode", "dense", "--json")[1])["settings"]["model"] == own
    assert [p.name for p in judged_col.parent.iterdir() if ".scratch-" in p.name] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval"], "give -c DIR"),
        (["eval", "-c", "{col}", "--index-codes", "always"], "--index-codes cannot be used with -c"),
        (["eval", "-c", "{col}", "--split", "dev"], "--split cannot be used with -c"),
        (["eval", "-d", "{col}", "--per-query"], "--per-query cannot be used with -d"),
        (["eval", "-d", "{col}", "--expect", "x.yaml"], "--expect cannot be used with -d"),
        (["eval", "-c", "{col}", "--queries", "q.jsonl"], "give --judgments FILE too"),
        (["eval", "-c", "{col}", "--expect", "x.yaml", "--tolerance", "0.1"], "--tolerance is recorded with --record"),
        (["eval", "-c", "{col}", "--record", "a.yaml", "--expect", "b.yaml"], "not allowed with argument"),
        (["eval", "-c", "{col}", "--expect", "{col}/absent.yaml"], "cannot read the regression file"),
        (["eval", "-c", "{col}", "--feedback", "--no-feedback"], "not allowed with argument"),
    ],
)
def test_misused_flags_are_one_line_exit_2(capsys, judged_col, argv, message):
    code, out, err = run(capsys, *[arg.format(col=judged_col) for arg in argv])
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and message in err


def test_fusion_alpha_and_feedback_flags_are_unset_unless_given():
    parse = build_parser().parse_args
    for command in (["search", "q", "-c", "col"], ["eval", "-c", "col"], ["eval", "-d", "data"]):
        args = vars(parse(command))
        assert (args["fusion"], args["alpha"], args["feedback"]) == (None, None, None)
    assert vars(parse(["search", "q", "-c", "col", "--feedback"]))["feedback"] is True
    assert vars(parse(["eval", "-c", "col", "--no-feedback", "--fusion", "rrf"]))["feedback"] is False


def test_unset_search_flags_search_with_the_collections_own_settings(capsys, judged_col):
    from retriever import Collection

    with Collection.open(judged_col) as collection:
        collection.choose_search_settings(fusion="rrf", alpha=0.3, feedback=False)
        hits = [hit.id for hit in collection.search(TEA, mode="hybrid", fusion="rrf", feedback=False)]
    code, out, _ = run(capsys, "eval", "-c", judged_col, "--json")
    settings = json.loads(out)["settings"]
    assert code == 0 and (settings["fusion"], settings["alpha"], settings["feedback"]) == ("rrf", 0.3, False)
    code, out, _ = run(capsys, "search", TEA, "-c", judged_col, "--json")
    assert code == 0 and [hit["id"] for hit in json.loads(out)] == hits
    code, out, _ = run(capsys, "eval", "-c", judged_col, "--fusion", "convex", "--feedback", "--json")
    settings = json.loads(out)["settings"]
    assert (settings["fusion"], settings["alpha"], settings["feedback"]) == ("convex", 0.3, True)
