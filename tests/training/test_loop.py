"""The shared training loop: resumption, logging, frozen parameters, old optimizer states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.training.conftest import Stop, stop_at
from training.checkpoints import latest_checkpoint, read_trainer_state
from training.loop import LOG, Schedule, Stage, open_run, train_loop
from training.optim import load_optimizer_state, make_optimizer, param_groups


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / LOG).read_text().splitlines()]


def _optimized(checkpoint: Path) -> int:
    """How many parameters the optimizer state of a checkpoint holds."""
    return sum(len(group["params"]) for group in read_trainer_state(checkpoint)["optimizer"]["param_groups"])


def _trainable(model: torch.nn.Module) -> int:
    return sum(1 for p in model.parameters() if p.requires_grad)


class _Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.LayerNorm = torch.nn.LayerNorm(4)
        self.frozen = torch.nn.Parameter(torch.ones(4), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.nn.functional.dropout(self.LayerNorm(x * self.frozen), 0.5)  # draws from torch's RNG
        return self.linear(hidden).squeeze(-1)


class _ToyStage(Stage):
    """Regression on fixed data; micro-batch ``i`` is row block ``i`` mod 8; evaluates a fixed loss."""

    label = "toy"
    evaluates = True

    def __init__(self, checkpoint: Path | None):
        torch.manual_seed(0)
        self.model = _Toy()
        if checkpoint is not None:
            self.model.load_state_dict(torch.load(checkpoint / "toy.pt", weights_only=True))
        generator = torch.Generator().manual_seed(1)
        self.x, self.y = torch.randn(32, 4, generator=generator), torch.randn(32, generator=generator)
        self.micro_steps: list[int] = []
        self.finished = 0

    def loss(self, micro_step: int) -> torch.Tensor:
        self.micro_steps.append(micro_step)
        rows = slice(4 * (micro_step % 8), 4 * (micro_step % 8) + 4)
        return torch.nn.functional.mse_loss(self.model(self.x[rows]), self.y[rows])

    def step_fields(self) -> dict:
        return {"micro_steps": len(self.micro_steps)}

    def evaluate(self, step: int) -> dict:
        with torch.no_grad():
            return {"eval": float(self.model.linear.weight.sum())}

    def save_model(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.model.state_dict(), directory / "toy.pt")

    def finish(self) -> None:
        self.finished += 1


def _train_toy(out: Path, *, resume: bool = False, callback=None, total: int = 7, **overrides):
    run = open_run(str(out), resume=resume, progress=False, callback=callback)
    stage = _ToyStage(run.checkpoint)
    settings = dict(total=total, lr=0.05, weight_decay=0.01, warmup_ratio=0.2, save_every=3, eval_every=2, grad_accum=2)
    settings.update(overrides)
    return stage, train_loop(run, stage, Schedule(**settings))


def test_a_resumed_stage_logs_each_step_once_and_ends_where_an_uninterrupted_one_does(tmp_path):
    full, split = tmp_path / "full", tmp_path / "split"
    stage, outcome = _train_toy(full)
    assert stage.micro_steps == list(range(14)) and stage.finished == 1  # grad_accum 2: micro-batches 0..13
    assert outcome.step == 7 and outcome.record == _log(full)[-1] and outcome.seconds >= outcome.record["seconds"]
    with pytest.raises(Stop):  # killed after step 5 was logged; the last checkpoint is step 3's
        _train_toy(split, callback=stop_at(5))
    assert latest_checkpoint(split).name == "step-3" and [r["step"] for r in _log(split)] == [1, 2, 3, 4, 5]

    steps: list[int] = []
    resumed, outcome = _train_toy(split, resume=True, callback=lambda record: steps.append(record["step"]))
    assert steps == [4, 5, 6, 7] and resumed.micro_steps == list(range(6, 14)) and outcome.step == 7
    log = _log(split)
    assert [r["step"] for r in log] == list(range(1, 8))
    without_time = [{k: v for k, v in r.items() if k not in ("seconds", "micro_steps")} for r in log]
    assert without_time == [{k: v for k, v in r.items() if k not in ("seconds", "micro_steps")} for r in _log(full)]
    keys = ["step", "train_loss", "lr", "micro_steps", "seconds"]
    assert [list(r) for r in log if r["step"] in (1, 3, 5)] == [keys] * 3
    assert [r["step"] for r in log if "eval" in r] == [2, 4, 6, 7]  # every eval_every steps, and the last
    assert sorted(p.name for p in (split / "checkpoints").iterdir()) == ["step-6", "step-7"]
    for name, tensor in stage.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
    assert _optimized(latest_checkpoint(split)) == _trainable(stage.model) == 4  # linear and LayerNorm, not frozen
    assert torch.equal(resumed.model.frozen, torch.ones(4))


def test_resuming_a_finished_run_trains_nothing_and_finishes_again(tmp_path):
    _train_toy(tmp_path)
    steps: list[int] = []
    stage, outcome = _train_toy(tmp_path, resume=True, callback=lambda record: steps.append(record["step"]))
    assert steps == [] and stage.micro_steps == [] and stage.finished == 1
    assert outcome.step == 7 and outcome.record == {} and len(_log(tmp_path)) == 7


def test_time_limit_stops_after_a_checkpointed_step(tmp_path, capsys):
    stage, outcome = _train_toy(tmp_path, total=100, max_minutes=1e-9)
    assert outcome.step == 1 and latest_checkpoint(tmp_path).name == "step-1" and stage.finished == 1
    assert "eval" in outcome.record  # the last step of an invocation is evaluated
    assert "stopping at the 1e-09-minute limit after step 1" in capsys.readouterr().err


def test_param_groups_leave_out_frozen_parameters():
    def names(group: dict) -> list[str]:
        return [name for param in group["params"] for name, p in model.named_parameters() if p is param]

    model = _Toy()
    decay, no_decay = param_groups(model, 0.1)
    assert names(decay) == ["linear.weight"] and decay["weight_decay"] == 0.1
    assert names(no_decay) == ["linear.bias", "LayerNorm.weight", "LayerNorm.bias"] and no_decay["weight_decay"] == 0
    every = param_groups(model, 0.1, trainable_only=False)
    assert names(every[0]) == ["frozen", "linear.weight"] and names(every[1]) == names(no_decay)


def test_an_optimizer_state_saved_with_frozen_parameters_still_loads():
    model = _Toy()
    old = torch.optim.AdamW(param_groups(model, 0.01, trainable_only=False), lr=0.1)  # as pretraining once grouped
    model(torch.randn(3, 4)).sum().backward()
    old.step()
    optimizer, _ = make_optimizer(model, lr=0.1, weight_decay=0.01, warmup_ratio=0.0, total=10)
    load_optimizer_state(optimizer, old.state_dict(), model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert [len(g["params"]) for g in optimizer.param_groups] == [1, 3]
    for param in trainable:
        for key, value in old.state[param].items():
            assert torch.equal(optimizer.state[param][key], value), key
    with pytest.raises(ValueError):  # another model's state
        load_optimizer_state(optimizer, torch.optim.AdamW(torch.nn.Linear(2, 2).parameters()).state_dict(), model)


# -- both stages on the loop -------------------------------------------------------
def test_rotary_pretraining_keeps_its_fixed_position_table_out_of_the_optimizer(corpus_dir, tokenizer_dir, tmp_path):
    from safetensors.torch import load_file

    from tests.training.conftest import TINY
    from training.pretrain import PretrainConfig, pretrain

    def config(**overrides) -> PretrainConfig:
        return PretrainConfig(
            text=[str(corpus_dir)],
            output_dir=str(tmp_path),
            tokenizer=str(tokenizer_dir),
            positions="rotary",
            batch_size=4,
            lr=1e-2,
            eval_fraction=0,
            save_every=1,
            **TINY,
            **overrides,
        )

    from transformers import RoFormerForMaskedLM

    pretrain(config(max_steps=2), progress=False)
    parameters = sum(1 for _ in RoFormerForMaskedLM.from_pretrained(str(tmp_path)).parameters())
    assert _optimized(tmp_path / "checkpoints" / "step-2") == parameters - 1  # all but the position table
    first = load_file(tmp_path / "checkpoints" / "step-2" / "model.safetensors")
    pretrain(config(max_steps=4, resume=True), progress=False)  # resumed: the model comes from_pretrained
    assert _optimized(tmp_path / "checkpoints" / "step-4") == parameters - 1
    last = load_file(tmp_path / "model.safetensors")
    table = "roformer.encoder.embed_positions.weight"
    assert torch.equal(first[table], last[table])
    assert not torch.equal(
        first["roformer.embeddings.word_embeddings.weight"], last["roformer.embeddings.word_embeddings.weight"]
    )


def test_contrastive_training_leaves_frozen_parameters_out(tiny_model_dir, corpus_dir, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from training import contrastive

    load = contrastive.load_mean_pooling_model

    def load_frozen(location, device=None):
        model = load(location, device)
        model[0].auto_model.embeddings.word_embeddings.weight.requires_grad_(False)
        return model

    monkeypatch.setattr(contrastive, "load_mean_pooling_model", load_frozen)
    config = contrastive.ContrastiveConfig(
        from_model=str(tiny_model_dir),
        output_dir=str(tmp_path),
        corpus=[str(corpus_dir)],
        unsupervised="crop",
        max_steps=2,
        batch_size=4,
        lr=1e-2,
        save_every=1,
    )
    contrastive.contrastive_train(config, progress=False)
    contrastive.contrastive_train(
        contrastive.ContrastiveConfig(**{**vars(config), "max_steps": 3, "resume": True}), progress=False
    )
    trainable = _trainable(load_frozen(tiny_model_dir))
    assert all(_optimized(tmp_path / "checkpoints" / f"step-{step}") == trainable for step in (2, 3))
    before = load_file(next(tiny_model_dir.rglob("model.safetensors")))
    after = load_file(tmp_path / "model.safetensors")
    name = "embeddings.word_embeddings.weight"
    assert torch.equal(before[name], after[name]) and not torch.equal(
        before["embeddings.LayerNorm.weight"], after["embeddings.LayerNorm.weight"]
    )


def test_contrastive_with_dev_evaluation_resumes_exactly(tiny_model_dir, corpus_dir, beir_dir, tmp_path):
    """Evaluation leaves torch's thread count alone, so a resumed run computes as an uninterrupted one."""
    from training.contrastive import ContrastiveConfig, contrastive_train

    def config(out: Path, **overrides) -> ContrastiveConfig:
        return ContrastiveConfig(
            from_model=str(tiny_model_dir),
            output_dir=str(out),
            corpus=[str(corpus_dir)],
            unsupervised="crop",
            max_steps=5,
            batch_size=4,
            lr=1e-3,
            save_every=2,
            dev=str(beir_dir),
            eval_every=2,
            **overrides,
        )

    full, split = tmp_path / "full", tmp_path / "split"
    threads = torch.get_num_threads()
    expected = contrastive_train(config(full), progress=False)
    assert torch.get_num_threads() == threads
    with pytest.raises(Stop):
        contrastive_train(config(split), progress=False, callback=stop_at(3))
    steps: list[int] = []
    summary = contrastive_train(
        config(split, resume=True), progress=False, callback=lambda record: steps.append(record["step"])
    )
    assert steps == [3, 4, 5]
    drop = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in _log(split)] == [
        {k: v for k, v in r.items() if k not in drop} for r in _log(full)
    ]
    assert {k: v for k, v in summary.items() if k not in ("seconds", "output_dir")} == {
        k: v for k, v in expected.items() if k not in ("seconds", "output_dir")
    }
