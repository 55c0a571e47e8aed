"""The one interface every fusion strategy keeps (LanceDB's ``rerankers`` base is the model).

A fusion turns the two rankings of a hybrid search into one, at document
level. A ranking is a sequence of ``(document key, score)`` pairs, best
first; the searcher passes integer keys, any hashable key works.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence

Ranking = Sequence[tuple[Hashable, float]]  # (document key, score), best first


class Fusion(ABC):
    """A strategy that fuses a dense and a BM25 ranking into one."""

    name: str = ""  # how ``Collection.search(fusion=...)`` names it

    @abstractmethod
    def fuse(self, dense: Ranking, sparse: Ranking) -> list[tuple[Hashable, float]]:
        """Every document of ``dense`` and ``sparse`` once, with its fused score, best first.

        Args:
            dense: The dense side's ranking (cosine scores), best first.
            sparse: The BM25 side's ranking (BM25 scores), best first.

        Returns:
            ``(key, fused score)`` pairs by descending score; ties keep the order of first appearance.
        """
