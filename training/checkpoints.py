"""Training checkpoints and step logs shared by pretraining and contrastive training.

A checkpoint is ``OUT/checkpoints/step-N``: whatever the model writes
(weights, tokenizer) plus ``trainer_state.pt`` (step, optimizer, scheduler,
RNG states, time spent). It is written to a temporary directory, fsynced
and renamed into place, so a killed run leaves either the whole checkpoint
or none; only the newest ``keep`` checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

import torch

CHECKPOINTS = "checkpoints"
TRAINER_STATE = "trainer_state.pt"
KEEP = 2


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The complete ``checkpoints/step-N`` directory with the largest N, or ``None``."""
    steps = _checkpoints(Path(output_dir))
    return steps[-1][1] if steps else None


def write_checkpoint(
    output_dir: Path, step: int, save_model: Callable[[Path], None], state: dict, *, keep: int = KEEP
) -> Path:
    """Write ``checkpoints/step-<step>`` atomically; older checkpoints beyond ``keep`` are removed.

    ``save_model(directory)`` writes the model's own files; ``state`` is
    saved with ``torch.save`` as ``trainer_state.pt``.
    """
    root = output_dir / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}"
    tmp = root / f".tmp-step-{step}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(tmp)
    torch.save({**state, "step": step}, tmp / TRAINER_STATE)
    for file in tmp.rglob("*"):
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for _, old in _checkpoints(output_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def read_trainer_state(checkpoint: Path) -> dict:
    """The ``trainer_state.pt`` of a checkpoint directory (tensors only, no pickled code)."""
    return torch.load(checkpoint / TRAINER_STATE, weights_only=True)


def truncate_log(path: Path, step: int) -> None:
    """Keep the JSONL records up to ``step``; at step 0 (a fresh start) remove the log."""
    if not path.exists():
        return
    if step == 0:
        path.unlink()
        return
    kept = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and json.loads(line).get("step", 0) <= step
    ]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def _checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    root = output_dir / CHECKPOINTS
    return sorted(
        (int(p.name[5:]), p) for p in root.glob("step-*") if p.name[5:].isdigit() and (p / TRAINER_STATE).is_file()
    )
