"""The regression file: a collection's figures on its judgments, recorded to be measured against later (in CI).

``semsearch eval -c DIR --record FILE`` writes one; ``--expect FILE`` measures again and fails on each metric
that fell more than the file's tolerance below the figure recorded. The file is YAML::

    # semsearch eval: figures on judgments; `semsearch eval -c DIR --expect FILE` fails when one falls
    metrics: {ndcg@10: 0.8123, mrr@10: 0.7901, recall@100: 0.9512, map@100: 0.7344}
    tolerance: 0.01
    settings: {mode: hybrid, fusion: convex, alpha: 0.7, feedback: true, model: all-MiniLM-L6-v2}
    queries: 48
    judgments: 131
    date: '2025-01-31'

Only ``metrics`` is needed to compare; ``tolerance`` defaults to ``DEFAULT_TOLERANCE``. A metric measured
higher than recorded is no regression (record again to hold the collection to the new figure).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retriever.errors import BadInputError
from retriever.evaluation import METRICS
from retriever.judgments.scoring import Evaluation
from retriever.storage.atomic import atomic_write_text

DEFAULT_TOLERANCE = 0.01
DIGITS = 4  # figures are recorded rounded to this many decimals
HEADER = "# semsearch eval: figures on judgments; `semsearch eval -c DIR --expect FILE` fails when one falls\n"


@dataclass(frozen=True)
class Regression:
    """A metric measured more than the tolerance below the figure recorded.

    Attributes:
        metric: Its name (one of ``retriever.evaluation.METRICS``).
        expected: The figure recorded.
        measured: The figure measured now.
        tolerance: How far below ``expected`` a figure may fall.
    """

    metric: str
    expected: float
    measured: float
    tolerance: float

    def __str__(self) -> str:
        return (
            f"{self.metric} fell to {self.measured:.4f}, expected {self.expected:.4f} "
            f"(down {self.expected - self.measured:.4f}, tolerance {self.tolerance:g})"
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"metric", "expected", "measured", "tolerance"}``."""
        return {
            "metric": self.metric,
            "expected": self.expected,
            "measured": self.measured,
            "tolerance": self.tolerance,
        }


def record(path: str | os.PathLike, evaluation: Evaluation, tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """Write ``evaluation``'s figures, settings and counts to the regression file ``path`` (replaced if there).

    Args:
        path: The YAML file written (atomically).
        evaluation: What was measured.
        tolerance: How far below a recorded figure a later one may fall (default 0.01); at least 0.

    Returns:
        What the file holds: ``{"metrics", "tolerance", "settings", "queries", "judgments", "date"}``.

    Raises:
        BadInputError: ``tolerance`` is not a number of at least 0.
    """
    import yaml

    content = {
        "metrics": {metric: round(float(evaluation.metrics[metric]), DIGITS) for metric in METRICS},
        "tolerance": _checked_tolerance(tolerance, "tolerance"),
        "settings": dict(evaluation.settings),
        "queries": evaluation.queries,
        "judgments": evaluation.judgments,
        "date": datetime.date.today().isoformat(),
    }
    atomic_write_text(Path(path), HEADER + yaml.safe_dump(content, sort_keys=False, allow_unicode=True))
    return content


def load_expected(path: str | os.PathLike) -> dict[str, Any]:
    """The regression file at ``path``: its ``metrics`` (each of ``METRICS`` it names, as a float) and
    ``tolerance`` (the file's, or ``DEFAULT_TOLERANCE``), the rest as written.

    Raises:
        BadInputError: The file cannot be read, is not YAML, or has no ``metrics`` mapping of numbers.
    """
    import yaml

    path = Path(path)
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInputError(f"cannot read the regression file {path}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{path} is not a regression file (not YAML: {' '.join(str(exc).split())})") from None
    metrics = content.get("metrics") if isinstance(content, dict) else None
    if not isinstance(metrics, dict) or not metrics:
        raise BadInputError(f"{path} is not a regression file: it has no metrics ({', '.join(METRICS)})")
    unknown = sorted(map(str, set(metrics) - set(METRICS)))
    if unknown:
        raise BadInputError(f"{path}: unknown metric(s) {', '.join(unknown)}; known: {', '.join(METRICS)}")
    for metric, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadInputError(f"{path}: metrics.{metric} must be a number, got {value!r}")
    tolerance = _checked_tolerance(content.get("tolerance", DEFAULT_TOLERANCE), f"{path}: tolerance")
    return {**content, "metrics": {metric: float(value) for metric, value in metrics.items()}, "tolerance": tolerance}


def compare(expected: dict[str, Any], evaluation: Evaluation) -> list[Regression]:
    """The metrics of ``expected`` (``load_expected``'s shape) that ``evaluation`` measured more than
    ``expected["tolerance"]`` below the figure recorded, in ``METRICS``' order; empty when none fell."""
    tolerance = float(expected.get("tolerance", DEFAULT_TOLERANCE))
    regressions = []
    for metric in METRICS:
        if metric not in expected["metrics"]:
            continue
        recorded, measured = float(expected["metrics"][metric]), round(float(evaluation.metrics[metric]), DIGITS)
        if recorded - measured > tolerance + 10 ** -(DIGITS + 2):  # a figure exactly at the tolerance passes
            regressions.append(Regression(metric, recorded, measured, tolerance))
    return regressions


def settings_changed(expected: dict[str, Any], evaluation: Evaluation) -> list[str]:
    """``"name: recorded -> measured"`` for each setting (and the query and judgment counts) that differs between
    the file and ``evaluation``: the figures may then differ for that reason rather than a regression."""
    recorded = expected.get("settings") if isinstance(expected.get("settings"), dict) else {}
    changes = [
        f"{name}: {recorded[name]} -> {evaluation.settings.get(name)}"
        for name in recorded
        if recorded[name] != evaluation.settings.get(name)
    ]
    for name in ("queries", "judgments"):
        if name in expected and expected[name] != getattr(evaluation, name):
            changes.append(f"{name}: {expected[name]} -> {getattr(evaluation, name)}")
    return changes


def _checked_tolerance(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise BadInputError(f"{name} must be a number of at least 0, got {value!r}")
    return float(value)
