"""Which tagger to trust: cross-validation of both methods on the examples alone.

The frozen-embedding classifier is compared with the cheap baseline, TF-IDF
with the same logistic regression, on the same stratified folds of the
labelled examples (at most 5, at most the smallest label's count). ``auto``
takes the method with the higher macro-F1; on a tie, or when a label has a
single example (no fold could test it), the embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from retriever.tagging.classifier import EMBEDDING, METHODS, fit_logistic, probabilities
from retriever.tagging.examples import Label

MAX_FOLDS = 5


@dataclass
class MethodScore:
    """Cross-validated figures of one method.

    Attributes:
        method: ``"embedding"`` or ``"tfidf"``.
        accuracy: Share of examples whose held-out prediction was right.
        macro_f1: F1 averaged over labels, each label counting the same.
        per_label: ``{label: {"precision", "recall", "f1", "support"}}``.
    """

    method: str
    accuracy: float
    macro_f1: float
    per_label: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class TagEvaluation:
    """Both methods on the same folds, and the method ``auto`` takes.

    Attributes:
        examples: Number of examples.
        folds: Folds used (0: cross-validation was impossible).
        scores: ``{method: MethodScore}`` (empty when ``folds`` is 0).
        chosen: The method ``tag --method auto`` uses.
        reason: Why, in one sentence.
    """

    examples: int
    folds: int
    scores: dict[str, MethodScore]
    chosen: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "folds": self.folds,
            "scores": {m: vars(s) for m, s in self.scores.items()},
            "chosen": self.chosen,
            "reason": self.reason,
        }


def cross_validate(features: dict[str, Any], labels: Sequence[Label], folds: int | None = None) -> TagEvaluation:
    """Score every method of ``features`` on shared stratified folds and choose one.

    Args:
        features: ``{method: (n, d) rows}`` for the same ``n`` examples.
        labels: The ``n`` labels.
        folds: Number of folds (default: ``min(5, smallest label count)``).

    Returns:
        The evaluation; ``folds == 0`` when a label has fewer than two examples.
    """
    from sklearn.model_selection import StratifiedKFold

    target = np.asarray([str(label) for label in labels], dtype=object)
    smallest = min(np.unique(target, return_counts=True)[1])
    folds = min(folds or MAX_FOLDS, int(smallest))
    if folds < 2:
        return TagEvaluation(
            len(labels),
            0,
            {},
            EMBEDDING,
            "a label has a single example, so no fold can test it: frozen embeddings, the few-shot default",
        )
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    splits = list(splitter.split(np.zeros(len(target)), target))
    scores = {method: _score(method, rows, list(labels), splits) for method, rows in features.items()}
    best = max(scores.values(), key=lambda s: (round(s.macro_f1, 9), s.method == EMBEDDING))
    others = ", ".join(f"{s.method} {s.macro_f1:.3f}" for s in scores.values() if s is not best)
    reason = f"higher macro-F1 in {folds}-fold cross-validation ({best.method} {best.macro_f1:.3f}" + (
        f" against {others})" if others else ")"
    )
    if any(s is not best and round(s.macro_f1, 9) == round(best.macro_f1, 9) for s in scores.values()):
        reason = f"a tie in macro-F1 ({best.macro_f1:.3f}): frozen embeddings"
    return TagEvaluation(len(labels), folds, scores, best.method, reason)


def _score(method: str, rows: Any, labels: list[Label], splits: list[tuple[np.ndarray, np.ndarray]]) -> MethodScore:
    """Out-of-fold predictions of ``method`` for every example, scored."""
    from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

    assert method in METHODS, method
    predicted: list[Label | None] = [None] * len(labels)
    for train, test in splits:
        classes, coef, intercept = fit_logistic(rows[train], [labels[i] for i in train])
        best = probabilities(rows[test], coef, intercept).argmax(axis=1)
        for i, j in zip(test, best):
            predicted[i] = classes[j]
    truth = [str(label) for label in labels]
    guess = [str(label) for label in predicted]
    names = sorted(set(truth))
    precision, recall, f1, support = precision_recall_fscore_support(truth, guess, labels=names, zero_division=0)
    per_label = {
        name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
        for name, p, r, f, s in zip(names, precision, recall, f1, support)
    }
    return MethodScore(
        method,
        float(accuracy_score(truth, guess)),
        float(f1_score(truth, guess, labels=names, average="macro", zero_division=0)),
        per_label,
    )
