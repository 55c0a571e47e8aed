"""``semsearch train tokenizer``, ``semsearch train pretrain`` and ``semsearch fill``."""

from __future__ import annotations

import json

from app.cli import main
from tests.training.conftest import TINY


def test_train_tokenizer_then_pretrain_then_fill(corpus_dir, tmp_path, capsys):
    tok, model = tmp_path / "tok", tmp_path / "model"
    assert (
        main(
            [
                "train",
                "tokenizer",
                str(corpus_dir),
                "-o",
                str(tok),
                "--vocab-size",
                "300",
                "--min-frequency",
                "1",
                "--cased",
            ]
        )
        == 0
    )
    assert (tok / "tokenizer.json").is_file()
    sizes = [f"--{key.replace('_', '-')}={value}" for key, value in TINY.items()]
    assert (
        main(
            [
                "train",
                "pretrain",
                "--text",
                str(corpus_dir),
                "--tokenizer",
                str(tok),
                "-o",
                str(model),
                *sizes,
                "--max-steps",
                "3",
                "--batch-size",
                "4",
                "--eval-every",
                "1",
                "--dropout",
                "0",
                "--json",
                "--positions",
                "rotary",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["step"] == 3 and summary["perplexity"] > 1
    config = json.loads((model / "config.json").read_text())
    assert config["hidden_dropout_prob"] == config["attention_probs_dropout_prob"] == 0
    assert config["architectures"] == ["RoFormerForMaskedLM"]
    assert {"config.json", "model.safetensors", "tokenizer.json", "log.jsonl"} <= {p.name for p in model.iterdir()}
    assert (model / "checkpoints" / "step-3" / "trainer_state.pt").is_file()
    assert [json.loads(line)["step"] for line in (model / "log.jsonl").read_text().splitlines()] == [0, 1, 2, 3]

    assert main(["fill", "Rivers flow into the [MASK].", "--model", str(model), "-k", "2", "--json"]) == 0
    guesses = json.loads(capsys.readouterr().out)
    assert len(guesses) == 1 and len(guesses[0]) == 2
    assert main(["fill", "Rivers flow into the [MASK].", "--model", str(model)]) == 0
    assert capsys.readouterr().out.startswith("[MASK] 1: ")

    assert main(["fill", "no mask here", "--model", str(model)]) == 2
    err = capsys.readouterr().err
    assert "no [MASK]" in err and len(err.strip().splitlines()) == 1


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["train", "pretrain", "--text", str(tmp_path), "-o", str(tmp_path / "o")]) == 2
    assert "--tokenizer" in capsys.readouterr().err
    assert main(["train", "tokenizer", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "o")]) == 2
    assert main(["fill", "a [MASK]", "--model", str(tmp_path / "nope")]) == 2
    assert main(["train"]) == 2
    assert (
        main(
            [
                "train",
                "pretrain",
                "--text",
                str(tmp_path),
                "--tokenizer",
                str(tmp_path),
                "-o",
                str(tmp_path / "o"),
                "--dropout",
                "1",
            ]
        )
        == 2
    )
    assert "dropout must be in [0, 1)" in capsys.readouterr().err
