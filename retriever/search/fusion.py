"""Fusing a dense and a BM25 ranking into one, at document level.

The convex combination (default) min-max normalises each ranking's scores to
[0, 1] and mixes them as ``alpha * dense + (1 - alpha) * bm25``, with
``alpha = 0.7``; a document absent from one ranking gets 0 there.
Reciprocal-rank fusion needs no score calibration:
``score(d) = sum over rankings of 1 / (rrf_k + rank(d))``, ranks from 1.

The defaults were chosen on five visible collections (SciFact, CISI,
Cranfield, MEDLINE, TIME; see benchmarks/quality.yaml), all at once: the
convex combination matched or beat RRF on each. Alpha 0.7 weighs the dense
side that hybrid search gives it, moved by pseudo-relevance feedback
(``feedback``), which is better than the first; without feedback 0.6 and 0.7
score alike. Other normalisations (z-score, mean +- 3 sd, max only, BM25 over
its query's upper bound) were measured on the same rankings and did no
better (docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Sequence

from retriever.errors import BadInputError

FUSIONS = ("rrf", "convex")
DEFAULT_RRF_K = 60
DEFAULT_FUSION = "convex"
DEFAULT_ALPHA = 0.7

Ranking = Sequence[tuple[int, float]]  # (document key, score), best first; the searcher passes integer keys


def reciprocal_rank_fusion(rankings: Sequence[Ranking], rrf_k: int = DEFAULT_RRF_K) -> list[tuple[int, float]]:
    """RRF over any number of rankings; ties keep the order of first appearance."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (key, _) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(fused.items(), key=lambda item: -item[1])


def convex_combination(dense: Ranking, sparse: Ranking, alpha: float = DEFAULT_ALPHA) -> list[tuple[int, float]]:
    """``alpha * dense + (1 - alpha) * bm25`` of min-max-normalised scores."""
    if not 0.0 <= alpha <= 1.0:
        raise BadInputError(f"alpha must be within [0, 1], got {alpha}")
    fused: dict[int, float] = {}
    for weight, ranking in ((alpha, dense), (1.0 - alpha, sparse)):
        for key, score in _min_max(ranking):
            fused[key] = fused.get(key, 0.0) + weight * score
    return sorted(fused.items(), key=lambda item: -item[1])


def fuse(dense: Ranking, sparse: Ranking, fusion: str = DEFAULT_FUSION, alpha: float = DEFAULT_ALPHA) -> list[tuple[int, float]]:
    """Fuse by name: ``"rrf"`` or ``"convex"`` (with ``alpha``)."""
    if fusion == "rrf":
        return reciprocal_rank_fusion([dense, sparse])
    if fusion == "convex":
        return convex_combination(dense, sparse, alpha)
    raise BadInputError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}")


def _min_max(ranking: Ranking) -> list[tuple[int, float]]:
    if not ranking:
        return []
    scores = [score for _, score in ranking]
    low, high = min(scores), max(scores)
    if high == low:
        return [(key, 1.0) for key, _ in ranking]
    return [(key, (score - low) / (high - low)) for key, score in ranking]
