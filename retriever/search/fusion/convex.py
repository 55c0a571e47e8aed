"""Convex combination: min-max-normalised scores mixed as ``alpha * dense + (1 - alpha) * bm25``.

Each ranking's scores are normalised to [0, 1] (all 1.0 when they are
equal); a document absent from one ranking gets 0 there. The default fusion
of hybrid search, with ``alpha = DEFAULT_ALPHA`` (0.7): on the visible
collections of ``benchmarks/quality.yaml`` it matched or beat reciprocal-rank
fusion on each, and other normalisations (z-score, mean +- 3 sd, max only,
BM25 over its query's upper bound) did no better (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from retriever.errors import BadInputError
from retriever.search.fusion.base import Fusion, Ranking

DEFAULT_ALPHA = 0.7  # weight of the dense side, moved by pseudo-relevance feedback (``search.feedback``)


@dataclass(frozen=True)
class ConvexFusion(Fusion):
    """``alpha * dense + (1 - alpha) * bm25`` of min-max-normalised scores.

    Args:
        alpha: Weight of the dense side, in [0, 1] (default 0.7).

    Raises:
        BadInputError: ``alpha`` is outside [0, 1].
    """

    alpha: float = DEFAULT_ALPHA
    name = "convex"

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise BadInputError(f"alpha must be within [0, 1], got {self.alpha}")

    def fuse(self, dense: Ranking, sparse: Ranking) -> list[tuple[Hashable, float]]:
        """See ``Fusion.fuse``; a document's score is in [0, 1]."""
        fused: dict[Hashable, float] = {}
        for weight, ranking in ((self.alpha, dense), (1.0 - self.alpha, sparse)):
            for key, score in min_max_normalised(ranking):
                fused[key] = fused.get(key, 0.0) + weight * score
        return sorted(fused.items(), key=lambda item: -item[1])


def min_max_normalised(ranking: Ranking) -> list[tuple[Hashable, float]]:
    """``ranking``'s scores mapped to [0, 1] (lowest 0, highest 1; every score 1.0 when all are equal)."""
    if not ranking:
        return []
    scores = [score for _, score in ranking]
    low, high = min(scores), max(scores)
    if high == low:
        return [(key, 1.0) for key, _ in ranking]
    return [(key, (score - low) / (high - low)) for key, score in ranking]
