"""Reciprocal-rank fusion: ``score(d) = sum over rankings of 1 / (rrf_k + rank(d))``, ranks from 1.

It needs no score calibration: only the ranks count. ``rrf_k = 60`` is the
constant of Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms
Condorcet and individual Rank Learning Methods" (SIGIR 2009).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from retriever.search.fusion.base import Fusion, Ranking

DEFAULT_RRF_K = 60


@dataclass(frozen=True)
class ReciprocalRankFusion(Fusion):
    """RRF of the two rankings.

    Args:
        rrf_k: The constant added to each rank (default 60).
    """

    rrf_k: int = DEFAULT_RRF_K
    name = "rrf"

    def fuse(self, dense: Ranking, sparse: Ranking) -> list[tuple[Hashable, float]]:
        """See ``Fusion.fuse``."""
        return reciprocal_rank_fusion([dense, sparse], self.rrf_k)


def reciprocal_rank_fusion(rankings: Sequence[Ranking], rrf_k: int = DEFAULT_RRF_K) -> list[tuple[Hashable, float]]:
    """RRF over any number of rankings; ties keep the order of first appearance."""
    fused: dict[Hashable, float] = {}
    for ranking in rankings:
        for rank, (key, _) in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(fused.items(), key=lambda item: -item[1])
