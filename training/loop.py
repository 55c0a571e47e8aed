"""The training loop masked-LM pretraining and contrastive training share.

A stage (``Stage``) says what differs: how a micro-batch is made and its
loss computed, what its checkpoints and final output hold, and whether and
how it evaluates (and keeps its best model). The loop owns the rest:
resuming from the latest checkpoint (optimizer, scheduler and RNG states,
the stage's own state), gradient accumulation, clipping (norm 1.0), the
optimizer and scheduler steps, one ``log.jsonl`` record per step, the
progress bar, the step callback, periodic and final checkpoints and an
optional time limit.

A step's record is ``{"step", "train_loss", "lr", <the stage's step fields>,
"seconds", <evaluation fields>}``; ``seconds`` counts every invocation of
the run, resumed ones summed. The checkpoint of a step is written after its
evaluation and before its record is logged and the callback called; a
resumed run drops the log's records past its checkpoint, continues at the
next step and so logs each step once. Frozen parameters never reach the
optimizer (``training.optim``).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from training.checkpoints import CHECKPOINTS, latest_checkpoint, read_trainer_state, truncate_log, write_checkpoint
from training.optim import load_optimizer_state, make_optimizer

LOG = "log.jsonl"
CLIP_NORM = 1.0


class Stage:
    """What one kind of training supplies to ``train_loop``; override what applies.

    Attributes:
        label: The progress bar's description.
        model: The module trained; its trainable parameters are optimized.
        evaluates: Whether ``evaluate`` is called (every ``eval_every`` steps and at the last one).
    """

    label = "train"
    evaluates = False
    model: torch.nn.Module

    def loss(self, micro_step: int) -> torch.Tensor:
        """The loss of micro-batch ``micro_step`` (``step * grad_accum + micro``, 0-based), not yet backpropagated."""
        raise NotImplementedError

    def step_fields(self) -> dict:
        """Fields the record of the step just taken adds after ``lr`` (default none)."""
        return {}

    def begin(self, step: int) -> dict | None:
        """Called once ``step`` (0 for a fresh run) is known; a returned record is logged first (fresh runs)."""
        return None

    def evaluate(self, step: int) -> dict:
        """Evaluation fields for the record of ``step``."""
        return {}

    def describe(self, record: dict) -> str:
        """The line printed for a record with evaluation fields."""
        return json.dumps(record)

    def save_model(self, directory: Path) -> None:
        """Write the model's files (weights, tokenizer) of a checkpoint into ``directory``."""
        raise NotImplementedError

    def state(self) -> dict:
        """The stage's own part of a checkpoint's trainer state (default none)."""
        return {}

    def restore(self, state: dict) -> None:
        """Continue from a checkpoint's trainer state (``state`` as ``state()`` and the loop wrote it)."""

    def finish(self) -> None:
        """Called after the last step: the final evaluation and save."""


@dataclass
class Run:
    """One invocation of a training run: where it writes, what it resumes from, how it reports.

    Attributes:
        output: The run's directory (``log.jsonl``, ``checkpoints/``).
        checkpoint: The checkpoint to resume from, or ``None`` (a fresh start).
        started: ``time.monotonic()`` when the invocation began.
        progress: Show the progress bar and the initial evaluation line.
        callback: Called with each step's record, after that step's checkpoint.
    """

    output: Path
    checkpoint: Path | None
    started: float
    progress: bool = True
    callback: Callable[[dict], None] | None = None


def open_run(
    output_dir: str, *, resume: bool, progress: bool = True, callback: Callable[[dict], None] | None = None
) -> Run:
    """Start an invocation: with ``resume``, find the latest checkpoint (saying so when there is none)."""
    started = time.monotonic()
    output = Path(output_dir)
    checkpoint = latest_checkpoint(output) if resume else None
    if resume and checkpoint is None and progress:
        print(f"no checkpoint in {output / CHECKPOINTS}; starting from step 0", file=sys.stderr)
    return Run(output, checkpoint, started, progress, callback)


@dataclass
class Schedule:
    """How long the loop runs and how it steps.

    Attributes:
        total: Optimizer steps of the whole run (resumed invocations included).
        lr: Peak learning rate (linear warmup, then linear decay to 0 at ``total``).
        weight_decay: AdamW decay of weights (none on biases and LayerNorm).
        warmup_ratio: Share of ``total`` warming up.
        save_every: Checkpoint every this many steps (and at the last).
        eval_every: Evaluate every this many steps (and at the last) when the stage evaluates.
        grad_accum: Micro-batches per optimizer step (default 1).
        max_minutes: Stop cleanly, with a checkpoint, once this invocation has run this long.
    """

    total: int
    lr: float
    weight_decay: float
    warmup_ratio: float
    save_every: int
    eval_every: int
    grad_accum: int = 1
    max_minutes: float | None = None


@dataclass
class Outcome:
    """What a finished loop reports: the last ``step``, its ``record`` (``{}`` when no step ran) and ``seconds``."""

    step: int
    record: dict
    seconds: float


def train_loop(run: Run, stage: Stage, schedule: Schedule) -> Outcome:
    """Train ``stage`` from ``run``'s checkpoint (or from scratch) to ``schedule.total`` steps.

    Returns:
        The step reached (fewer than ``total`` after the time limit), the last
        record and the run's seconds, counted after ``stage.finish()``.
    """
    from tqdm.auto import tqdm

    run.output.mkdir(parents=True, exist_ok=True)
    optimizer, scheduler = make_optimizer(
        stage.model,
        lr=schedule.lr,
        weight_decay=schedule.weight_decay,
        warmup_ratio=schedule.warmup_ratio,
        total=schedule.total,
    )
    step, earlier = _restore(run.checkpoint, stage, optimizer, scheduler)
    log = run.output / LOG
    truncate_log(log, step)
    first = stage.begin(step)
    if first is not None:
        _append(log, first)
        if run.progress:
            print(stage.describe(first), file=sys.stderr)

    def seconds() -> float:
        return round(earlier + time.monotonic() - run.started, 3)

    record: dict = {}
    bar = tqdm(
        total=schedule.total, initial=step, disable=not run.progress, file=sys.stderr, desc=stage.label, unit="step"
    )
    stage.model.train()
    while step < schedule.total:
        loss = _optimizer_step(stage, optimizer, scheduler, schedule.grad_accum, step)
        step += 1
        timed_out = schedule.max_minutes is not None and time.monotonic() - run.started >= schedule.max_minutes * 60
        last = step == schedule.total or timed_out
        record = {
            "step": step,
            "train_loss": loss,
            "lr": scheduler.get_last_lr()[0],
            **stage.step_fields(),
            "seconds": seconds(),
        }
        if stage.evaluates and (step % schedule.eval_every == 0 or last):
            record.update(stage.evaluate(step))
            bar.write(stage.describe(record), file=sys.stderr)
        if step % schedule.save_every == 0 or last:
            _checkpoint(run.output, step, stage, optimizer, scheduler, record["seconds"])
        _append(log, record)
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.3f}")
        if run.callback is not None:
            run.callback(record)
        if timed_out:
            bar.write(f"stopping at the {schedule.max_minutes:g}-minute limit after step {step}", file=sys.stderr)
            break
    bar.close()
    stage.finish()
    return Outcome(step, record, seconds())


def _optimizer_step(stage: Stage, optimizer, scheduler, grad_accum: int, step: int) -> float:
    """One optimizer step over ``grad_accum`` micro-batches; the mean of their losses."""
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for micro in range(grad_accum):
        loss = stage.loss(step * grad_accum + micro)
        (loss / grad_accum).backward()
        loss_sum += loss.item()
    torch.nn.utils.clip_grad_norm_(stage.model.parameters(), CLIP_NORM)
    optimizer.step()
    scheduler.step()
    return loss_sum / grad_accum


def _restore(checkpoint: Path | None, stage: Stage, optimizer, scheduler) -> tuple[int, float]:
    """Load a checkpoint's trainer state; ``(step, seconds spent by the invocations that wrote it)``."""
    if checkpoint is None:
        return 0, 0.0
    state = read_trainer_state(checkpoint)
    load_optimizer_state(optimizer, state["optimizer"], stage.model)
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    stage.restore(state)
    return int(state["step"]), float(state.get("seconds", 0.0))


def _checkpoint(output: Path, step: int, stage: Stage, optimizer, scheduler, seconds: float) -> Path:
    """Checkpoint everything a resumed run needs to continue exactly where this one is."""
    state = {
        "seconds": seconds,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        **stage.state(),
    }
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    return write_checkpoint(output, step, stage.save_model, state)


def _append(log: Path, record: dict) -> None:
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
