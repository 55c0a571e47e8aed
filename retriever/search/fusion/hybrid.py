"""How hybrid search uses fusion: the strategies by name, the depth each side is read to, and the
first fusion that chooses the documents of pseudo-relevance feedback (``retriever.search.feedback``).
"""

from __future__ import annotations

from collections.abc import Hashable

from retriever.errors import BadInputError
from retriever.search.fusion.base import Fusion, Ranking
from retriever.search.fusion.convex import DEFAULT_ALPHA, ConvexFusion
from retriever.search.fusion.rrf import ReciprocalRankFusion

FUSIONS = ("rrf", "convex")  # the names ``Collection.search(fusion=...)`` accepts
DEFAULT_FUSION = "convex"
HYBRID_DEPTH = 100  # documents taken from each side before fusing
FEEDBACK_ALPHA = 0.6  # dense weight of the first fusion, that chooses the feedback documents


def fusion_named(name: str, alpha: float = DEFAULT_ALPHA) -> Fusion:
    """The strategy ``name`` (``"convex"`` with ``alpha``, or ``"rrf"``, which has no weight).

    Raises:
        BadInputError: ``name`` is no fusion, or ``alpha`` is outside [0, 1] for ``"convex"``.
    """
    if name == "rrf":
        return ReciprocalRankFusion()
    if name == "convex":
        return ConvexFusion(alpha)
    raise BadInputError(f"unknown fusion {name!r}; use one of {', '.join(FUSIONS)}")


def feedback_fusion(name: str) -> Fusion:
    """The first fusion of a hybrid search with feedback: strategy ``name`` at ``FEEDBACK_ALPHA``."""
    return fusion_named(name, FEEDBACK_ALPHA)


def fusion_depth(k: int, mode: str) -> int:
    """Documents each side ranks for a search of ``k`` hits: ``k``, or at least ``HYBRID_DEPTH`` when hybrid."""
    return k if mode != "hybrid" else max(k, HYBRID_DEPTH)


def fuse(
    dense: Ranking, sparse: Ranking, fusion: str = DEFAULT_FUSION, alpha: float = DEFAULT_ALPHA
) -> list[tuple[Hashable, float]]:
    """Fuse by name: ``fusion_named(fusion, alpha).fuse(dense, sparse)``."""
    return fusion_named(fusion, alpha).fuse(dense, sparse)
