"""The resumable state of a ``learn`` run: a work folder with ``state.json`` and the folds' models.

``state.json`` holds the fingerprint of the judgments and settings the run
is of, and each finished phase's result by name. A run of other judgments
or settings (another fingerprint), or one not resuming, starts the folder
over; a finished run's models are removed, its pairs and results kept.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from retriever.storage.atomic import atomic_write_text

STATE = "state.json"


class LearnState:
    """Phase results by name, written through to ``folder/state.json`` as each phase finishes."""

    def __init__(self, folder: Path, fingerprint: str, phases: dict[str, Any]) -> None:
        self.folder, self.fingerprint, self.phases = folder, fingerprint, phases

    @classmethod
    def open(cls, folder: Path, fingerprint: str, *, resume: bool) -> "LearnState":
        """The state in ``folder`` when it is of ``fingerprint`` and ``resume``; else a fresh folder."""
        folder = Path(folder)
        stored = _read(folder / STATE)
        if resume and stored.get("fingerprint") == fingerprint:
            return cls(folder, fingerprint, dict(stored.get("phases", {})))
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        state = cls(folder, fingerprint, {})
        state._save()
        return state

    def __contains__(self, name: str) -> bool:
        return name in self.phases

    def __getitem__(self, name: str) -> Any:
        return self.phases[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.phases.get(name, default)

    def put(self, name: str, result: Any, *, seconds: dict[str, float] | None = None) -> None:
        """Keep ``result`` as phase ``name``'s (and the seconds spent so far), on disk at once."""
        self.phases[name] = result
        if seconds is not None:
            self.phases["seconds"] = dict(seconds)
        self._save()

    def finish(self, report: dict) -> None:
        """Keep ``report`` and remove the trained models (their pairs and scores stay)."""
        for model in [*self.folder.glob("fold-*/model"), self.folder / "final" / "model"]:
            shutil.rmtree(model, ignore_errors=True)
        self.put("report", report)

    def _save(self) -> None:
        payload = {"fingerprint": self.fingerprint, "phases": self.phases}
        atomic_write_text(self.folder / STATE, json.dumps(payload, default=str) + "\n")


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
