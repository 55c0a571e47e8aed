"""Training recipes end to end at toy scale: stages, resumption, summary, tables and the CLI."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from retriever.errors import BadInputError
from training.contrastive import beir_pairs, no_duplicate_batches
from training.recipes import (
    OTHER_DATASETS,
    FinetuneRecipe,
    SmallRecipe,
    finetune_minilm,
    format_finetune,
    format_small,
    run_stage,
    train_small,
)


def score(dataset: Path, model: str, mode: str) -> dict:
    from indexer.beir import evaluate

    return {"ndcg@10": evaluate(dataset, split="test", mode=mode, model=model, progress=False)["ndcg@10"]}


TOY_SMALL = SmallRecipe(
    vocab_size=300,
    layers=2,
    hidden=32,
    heads=2,
    intermediate=64,
    max_len=32,
    pretrain_batch=8,
    pretrain_lr=2e-3,
    pretrain_steps=6,
    crop_steps=2,
    crop_batch=4,
    pairs_epochs=1,
    pairs_batch=4,
)


@pytest.fixture(autouse=True)
def _private_eval_cache(tmp_path, monkeypatch):
    """Evaluation collections go to the test's directory, not ~/.cache."""
    monkeypatch.setattr("indexer.beir.EVAL_ROOT", tmp_path / "eval-cache")


@pytest.fixture()
def datasets(corpus_dir, beir_dir, tmp_path) -> Path:
    """``pretrain-text`` plus the toy BEIR dataset under each name the recipes read."""
    root = tmp_path / "datasets"
    shutil.copytree(corpus_dir, root / "pretrain-text")
    for name in ("scifact", *OTHER_DATASETS):
        shutil.copytree(beir_dir, root / name)
    return root


def test_run_stage_computes_once_then_reads_the_saved_result(tmp_path):
    calls: list[int] = []

    def work() -> dict:
        calls.append(1)
        return {"value": 0.5}

    first = run_stage(tmp_path, "stage", work, log=lambda line: None)
    again = run_stage(tmp_path, "stage", work, log=lambda line: None)
    assert calls == [1] and first == again and first["value"] == 0.5 and first["seconds"] >= 0
    assert json.loads((tmp_path / "stages" / "stage.json").read_text()) == first


def test_train_small_writes_the_summary_and_resumes_by_stage(datasets, tmp_path):
    run_dir = tmp_path / "run"
    summary = train_small(datasets, run_dir, score, TOY_SMALL, log=lambda line: None)
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    for key in ("mlm_accuracy_before", "mlm_accuracy_after", "ndcg_mlm_only", "ndcg_contrastive", "ndcg_bm25"):
        assert 0 <= summary[key] <= 1, key
    assert summary["pretrain_steps"] == TOY_SMALL.pretrain_steps
    assert summary["wall_seconds"]["total"] == pytest.approx(
        sum(v for k, v in summary["wall_seconds"].items() if k != "total"), abs=0.2
    )
    assert (run_dir / "contrastive" / "modules.json").is_file()  # a sentence-transformers directory

    summary_steps = json.loads((run_dir / "stages" / "contrastive-pairs.json").read_text())["steps"]
    (run_dir / "stages" / "eval-contrastive.json").unlink()  # as if killed during that stage
    lines: list[str] = []
    again = train_small(datasets, run_dir, score, TOY_SMALL, log=lines.append)
    assert lines.count("eval-contrastive: running") == 1
    assert sum(line.endswith("running") for line in lines) == 1
    assert again["ndcg_contrastive"] == summary["ndcg_contrastive"]  # same model, same collection

    table = format_small(again)
    assert "held-out masked accuracy" in table and "SciFact nDCG@10, contrastive" in table
    assert ("met" in table or "MISSED" in table) and "total" in table

    crop_model = (run_dir / "crop" / "model.safetensors").read_bytes()
    lines.clear()
    longer = train_small(datasets, run_dir, score, replace(TOY_SMALL, pairs_epochs=2), log=lines.append)
    assert "settings changed (pairs_epochs): contrastive-pairs and the stages after it run again" in lines
    assert [line.split(":")[0] for line in lines if line.endswith("running")] == [
        "contrastive-pairs",
        "eval-mlm-only",
        "eval-contrastive",
        "eval-bm25",
    ]
    assert (run_dir / "crop" / "model.safetensors").read_bytes() == crop_model  # earlier stages kept
    pairs = json.loads((run_dir / "stages" / "contrastive-pairs.json").read_text())
    assert pairs["steps"] == 2 * summary_steps and longer["settings"]["pairs_epochs"] == 2
    assert json.loads((run_dir / "settings.json").read_text())["pairs_epochs"] == 2


def test_finetune_reports_every_dataset_before_and_after(datasets, tiny_model_dir, tmp_path):
    recipe = FinetuneRecipe(model=str(tiny_model_dir), batch=4, lr=1e-3)
    summary = finetune_minilm(datasets, tmp_path / "run", score, recipe, log=lambda line: None)
    assert set(summary["others"]) == set(OTHER_DATASETS)
    for scores in [{"before": summary["ndcg_before"], "after": summary["ndcg_after"]}, *summary["others"].values()]:
        assert set(scores) == {"before", "after"} and all(0 <= v <= 1 for v in scores.values())
    assert summary["ndcg_before"] == summary["others"]["cisi"]["before"]  # the same toy data under both names
    assert (tmp_path / "run" / "model" / "modules.json").is_file()
    per_epoch = len(no_duplicate_batches(beir_pairs(datasets / "scifact", "train", hard_negatives=True), 4))
    finetune = json.loads((tmp_path / "run" / "stages" / "finetune.json").read_text())
    assert finetune["steps"] == recipe.epochs * per_epoch
    table = format_finetune(summary)
    assert table.count("\n") > 5 and all(name in table for name in ("scifact", *OTHER_DATASETS))


def test_missing_dataset_is_named(tmp_path):
    with pytest.raises(BadInputError, match="pretrain-text: not found"):
        train_small(tmp_path, tmp_path / "run", score, TOY_SMALL, log=lambda line: None)


def test_cli_runs_a_recipe_and_prints_its_table(datasets, tiny_model_dir, tmp_path, capsys, monkeypatch):
    from app.cli import main
    from training import recipes

    toy = FinetuneRecipe(model=str(tiny_model_dir), batch=4)  # the recipe's default model, made tiny
    monkeypatch.setitem(recipes.RECIPES, "finetune-minilm", replace(recipes.RECIPES["finetune-minilm"], settings=toy))
    assert main(["train", "recipe", "finetune-minilm", "--datasets", str(datasets), "-o", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    assert "dense nDCG@10" in out and "scifact" in out and "summary written to" in err
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["recipe"] == "finetune-minilm"
    assert main(["train", "recipe", "train-small", "--datasets", str(tmp_path / "none")]) == 2
    assert "pretrain-text: not found" in capsys.readouterr().err
