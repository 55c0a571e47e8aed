"""Fusion strategies: one per module behind the ``Fusion`` interface (``base``).

``convex`` (min-max-normalised scores mixed by ``alpha``; the default) and
``rrf`` (reciprocal-rank fusion); ``hybrid`` names them, and holds the depth
each side of a hybrid search is read to and the first fusion that pseudo-relevance
feedback uses. A ranking is ``(document key, score)`` pairs, best first.
"""

from retriever.search.fusion.base import Fusion, Ranking
from retriever.search.fusion.convex import DEFAULT_ALPHA, ConvexFusion
from retriever.search.fusion.hybrid import (
    DEFAULT_FUSION,
    FEEDBACK_ALPHA,
    FUSIONS,
    HYBRID_DEPTH,
    feedback_fusion,
    fuse,
    fusion_depth,
    fusion_named,
)
from retriever.search.fusion.rrf import DEFAULT_RRF_K, ReciprocalRankFusion, reciprocal_rank_fusion

__all__ = [
    "Fusion",
    "Ranking",
    "ConvexFusion",
    "ReciprocalRankFusion",
    "FUSIONS",
    "DEFAULT_FUSION",
    "DEFAULT_ALPHA",
    "DEFAULT_RRF_K",
    "HYBRID_DEPTH",
    "FEEDBACK_ALPHA",
    "fusion_named",
    "feedback_fusion",
    "fusion_depth",
    "fuse",
    "reciprocal_rank_fusion",
]
