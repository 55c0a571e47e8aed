"""When segments are merged: a tiered policy, as in Lucene's TieredMergePolicy.

Segments fall into tiers by live chunk count: tier 0 below
``floor_chunks * factor``, each next tier ``factor`` times larger. When a
tier holds ``factor`` segments, its ``factor`` smallest merge into one of the
next tier, so every chunk is rewritten about ``log_factor(N / floor)`` times
over a collection's life. Tier 0 merges sooner, at ``small_factor`` segments:
a small segment costs every search a fixed amount (about 0.15 ms dense,
0.3 ms hybrid), more than rewriting a few thousand chunks once more is worth.
After a commit at most one merge runs, and only one whose result stays under
``max_commit_merge_chunks``: a write costs the batch plus a bounded merge,
never the collection. Larger merges (and the
removal of every deleted row) happen in ``Collection.compact``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from retriever.storage.view import SegmentView


@dataclass(frozen=True)
class MergePolicy:
    """Attributes:
    factor: Segments per tier before they merge (default 10).
    floor_chunks: Segments below this size count as this size (default 1,000).
    small_factor: Segments in tier 0 (under ``floor_chunks * factor``) before
        they merge (default 3).
    max_commit_merge_chunks: Largest merge run after a commit (default 100,000 chunks).
    max_deleted_share: A segment with more deleted rows than this share is
        rewritten on its own (default 0.5).
    """

    factor: int = 10
    floor_chunks: int = 1_000
    small_factor: int = 3
    max_commit_merge_chunks: int = 100_000
    max_deleted_share: float = 0.5

    def to_dict(self) -> dict:
        return {"kind": "tiered", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict | None) -> "MergePolicy":
        data = dict(data or {})
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def tier(self, chunks: int) -> int:
        return int(math.log(max(chunks, self.floor_chunks) / self.floor_chunks, self.factor) + 1e-9)

    def plan(self, parts: Sequence[SegmentView]) -> list[str]:
        """Names of the segments to merge after a commit (empty: none)."""
        tiers: dict[int, list[SegmentView]] = {}
        for part in parts:
            tiers.setdefault(self.tier(part.n_live_chunks), []).append(part)
        for level in sorted(tiers):
            members = sorted(tiers[level], key=lambda p: p.n_live_chunks)
            fan_in = min(self.small_factor, self.factor) if level == 0 else self.factor
            if len(members) >= fan_in:
                chosen = members[:fan_in]
                if sum(p.n_live_chunks for p in chosen) <= self.max_commit_merge_chunks:
                    return [p.ref.name for p in chosen]
        for part in parts:
            total = part.segment.n_chunks
            dead = total - part.n_live_chunks
            if dead > self.max_deleted_share * total and part.n_live_chunks <= self.max_commit_merge_chunks:
                return [part.ref.name]
        return []
