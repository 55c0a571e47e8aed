"""Masked-LM pretraining: learning, checkpoints and resume, and loading the result."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.training.conftest import TINY, Stop, stop_at
from training.checkpoints import latest_checkpoint
from training.fill import fill_mask
from training.pretrain import PretrainConfig, pretrain


def _config(corpus_dir, tokenizer_dir, out: Path, **overrides) -> PretrainConfig:
    settings = dict(
        text=[str(corpus_dir)],
        output_dir=str(out),
        batch_size=8,
        tokenizer=str(tokenizer_dir) if tokenizer_dir else None,
        lr=2e-3,
        eval_fraction=0.1,
        eval_every=1000,
        save_every=1000,
        **TINY,
    )
    settings.update(overrides)
    return PretrainConfig(**settings)


def _log(out: Path) -> list[dict]:
    """The training steps' records (without the step-0 held-out record)."""
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [record for record in records if record["step"] > 0]


def _initial_record(out: Path) -> dict:
    return json.loads((out / "log.jsonl").read_text().splitlines()[0])


@pytest.fixture(scope="module")
def trained(corpus_dir, tokenizer_dir, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("pretrain") / "model"
    summary = pretrain(_config(corpus_dir, tokenizer_dir, out, max_steps=40, warmup_ratio=0.1), progress=False)
    return out, summary


def test_loss_falls_and_summary_is_complete(trained):
    out, summary = trained
    losses = [record["train_loss"] for record in _log(out)]
    assert len(losses) == 40
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    assert summary["step"] == 40 and summary["seconds"] > 0
    assert summary["perplexity"] == pytest.approx(np.exp(summary["eval_loss"]))
    assert 0 <= summary["masked_accuracy"] <= 1
    assert latest_checkpoint(out).name == "step-40"


def test_untrained_model_is_scored_before_the_first_step(trained):
    out, summary = trained
    initial = _initial_record(out)
    assert initial["step"] == 0 and "train_loss" not in initial
    assert summary["initial_masked_accuracy"] == initial["masked_accuracy"]
    assert initial["eval_loss"] > summary["eval_loss"] + 0.5


@pytest.mark.parametrize("architecture", ["bert", "roformer"])
def test_loss_at_selected_positions_equals_the_full_model_loss(tokenizer_dir, architecture):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, RoFormerConfig, RoFormerForMaskedLM

    from training.masking import MaskingCollator
    from training.pretrain import masked_lm_loss

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    torch.manual_seed(0)
    size = dict(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    if architecture == "bert":
        model = BertForMaskedLM(BertConfig(**size)).eval()
    else:
        model = RoFormerForMaskedLM(RoFormerConfig(embedding_size=32, **size)).eval()
    encoded = tokenizer(
        ["rivers flow into the sea", "green tea is steamed and rolled"], padding=True, return_tensors="pt"
    )
    batch = MaskingCollator(tokenizer, mlm_probability=0.5, seed=1)(dict(encoded))
    loss, logits, targets = masked_lm_loss(model, batch)
    selected = batch["labels"] != -100
    assert logits.shape == (int(selected.sum()), len(tokenizer)) and torch.equal(targets, batch["labels"][selected])
    assert loss.item() == pytest.approx(model(**batch).loss.item(), rel=1e-5)


def test_saved_model_loads_in_embedder(trained):
    from retriever import Embedder

    embedder = Embedder(trained[0])
    vectors = embedder.embed(["rivers flow into the sea", "green tea"])
    assert vectors.shape == (2, TINY["hidden"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_fill_returns_sorted_probabilities(trained):
    guesses = fill_mask("rivers flow into the [MASK]. green [MASK] is steamed.", trained[0], k=3)
    assert len(guesses) == 2
    for guess in guesses:
        probabilities = [p for _, p in guess]
        assert len(guess) == 3 and all(isinstance(token, str) for token, _ in guess)
        assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1 + 1e-6


def test_resume_matches_an_uninterrupted_run(corpus_dir, tokenizer_dir, tmp_path):
    full, split = tmp_path / "full", tmp_path / "split"
    pretrain(_config(corpus_dir, tokenizer_dir, full, max_steps=6, save_every=3), progress=False)
    with pytest.raises(Stop):  # killed during step 5, after the checkpoint of step 3
        pretrain(
            _config(corpus_dir, tokenizer_dir, split, max_steps=6, save_every=3), progress=False, callback=stop_at(5)
        )
    assert latest_checkpoint(split).name == "step-3"
    steps: list[int] = []
    summary = pretrain(
        _config(corpus_dir, tokenizer_dir, split, max_steps=6, save_every=3, resume=True),
        progress=False,
        callback=lambda record: steps.append(record["step"]),
    )
    assert steps == [4, 5, 6] and summary["step"] == 6
    assert [record["step"] for record in _log(split)] == [1, 2, 3, 4, 5, 6]
    assert [r["train_loss"] for r in _log(split)] == [r["train_loss"] for r in _log(full)]
    assert _initial_record(split) == _initial_record(full)
    seconds = [record["seconds"] for record in _log(split)]
    assert seconds == sorted(seconds) and summary["seconds"] >= seconds[2]  # resumed time adds to step 3's
    expected, actual = load_file(full / "model.safetensors"), load_file(split / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name


def test_nsp_and_continued_pretraining(corpus_dir, tokenizer_dir, trained, tmp_path):
    out = tmp_path / "nsp"
    summary = pretrain(
        _config(corpus_dir, None, out, from_model=str(trained[0]), max_steps=2, nsp=True), progress=False
    )
    assert summary["step"] == 2
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"] and config["hidden_size"] == TINY["hidden"]
    assert not any("seq_relationship" in name for name in load_file(out / "model.safetensors"))
    assert fill_mask("green [MASK]", out, k=2)[0][0][1] > 0


def test_time_limit_stops_cleanly_and_saves(corpus_dir, tokenizer_dir, tmp_path):
    out = tmp_path / "timed"
    summary = pretrain(_config(corpus_dir, tokenizer_dir, out, max_steps=1000, max_minutes=1e-6), progress=False)
    assert summary["step"] == 1 and summary["eval_loss"] is not None
    assert latest_checkpoint(out).name == "step-1" and (out / "model.safetensors").is_file()
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step-1"]  # no temporary directory left


def test_rotary_positions_train_resume_and_load(corpus_dir, tokenizer_dir, tmp_path):
    from retriever import Embedder

    out = tmp_path / "rotary"

    def run(**overrides):
        settings = dict(max_steps=40, warmup_ratio=0.1, positions="rotary", save_every=10, **overrides)
        return _config(corpus_dir, tokenizer_dir, out, **settings)

    with pytest.raises(Stop):
        pretrain(run(), progress=False, callback=stop_at(25))
    steps: list[int] = []
    pretrain(run(resume=True), progress=False, callback=lambda record: steps.append(record["step"]))
    assert steps == list(range(21, 41))
    losses = [record["train_loss"] for record in _log(out)]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    assert json.loads((out / "config.json").read_text())["architectures"] == ["RoFormerForMaskedLM"]
    assert Embedder(out).embed(["rivers flow into the sea"]).shape == (1, TINY["hidden"])
    assert len(fill_mask("rivers flow into the [MASK].", out, k=2)[0]) == 2

    continued = pretrain(
        _config(corpus_dir, None, tmp_path / "continued", from_model=str(out), max_steps=2), progress=False
    )
    assert continued["step"] == 2
    config = json.loads((tmp_path / "continued" / "config.json").read_text())
    assert config["architectures"] == ["RoFormerForMaskedLM"]


def test_settings_that_cannot_work_are_refused(corpus_dir, tokenizer_dir, tmp_path):
    from transformers import AutoTokenizer, DistilBertConfig

    from retriever.errors import BadInputError

    with pytest.raises(BadInputError, match="next-sentence prediction needs absolute positions"):
        pretrain(_config(corpus_dir, tokenizer_dir, tmp_path / "a", positions="rotary", nsp=True), progress=False)
    with pytest.raises(BadInputError, match="positions must be one of absolute, rotary"):
        pretrain(_config(corpus_dir, tokenizer_dir, tmp_path / "b", positions="sinusoidal"), progress=False)
    other = tmp_path / "distilbert"
    DistilBertConfig(dim=32, n_layers=1, n_heads=2, hidden_dim=64).save_pretrained(str(other))
    AutoTokenizer.from_pretrained(str(tokenizer_dir)).save_pretrained(str(other))
    with pytest.raises(BadInputError, match="holds a 'distilbert' model; pretraining continues BERT or RoFormer"):
        pretrain(_config(corpus_dir, None, tmp_path / "c", from_model=str(other), max_steps=1), progress=False)
    assert not (tmp_path / "c" / "config.json").exists()
