"""The report of a collection's last ``semsearch learn``, kept in the collection as ``learn.json``.

Shape (``training.learning`` writes it; the UI and ``info`` read it)::

    {"at": unix seconds, "judgments": int, "queries": int, "folds": int, "switched": bool,
     "model": {"before": name, "after": name or None},
     "settings": {"before": {"fusion", "alpha", "feedback"}, "after": {...}},
     "cv": {"before": {"ndcg@10": x, ...}, "after": {"ndcg@10": y, ...}},
     "seconds": float, "reason": str}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from retriever.storage.atomic import atomic_write_text

LEARN_REPORT = "learn.json"


def read_learn_report(root: Path) -> dict[str, Any] | None:
    """The last ``learn``'s report of the collection at ``root``, or ``None`` when it never learned (or the file
    is unreadable: the report is informative only)."""
    try:
        report = json.loads((Path(root) / LEARN_REPORT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def write_learn_report(root: Path, report: dict[str, Any]) -> None:
    """Keep ``report`` as the collection's last ``learn`` (written atomically)."""
    atomic_write_text(Path(root) / LEARN_REPORT, json.dumps(report, indent=2, sort_keys=True) + "\n")
