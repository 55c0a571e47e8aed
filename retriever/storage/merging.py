"""When segments are merged: a tiered policy, as in Lucene's TieredMergePolicy.

Segments fall into tiers by live chunk count: tier 0 below
``floor_chunks * factor``, each next tier ``factor`` times larger. When a
tier holds ``factor`` segments, its ``factor`` smallest merge into one of the
next tier, so every chunk is rewritten about ``log_factor(N / floor)`` times
over a collection's life. Tier 0 merges sooner, at ``small_factor`` segments:
a small segment costs every search a fixed amount, more than rewriting a few
thousand chunks once more is worth. Segments below ``IndexPolicy.ann_min_rows``
(exact, or codes in an IVF of few lists) merge as soon as together they reach
that size, so the result gets an IVF index of full lists: such a segment's
dense cost grows with its rows.
In the tier that a full merge would take past ``max_commit_merge_chunks``
(with the defaults, segments of 256,000 to a million chunks), the smallest
segments that fit under it merge as soon as two do, as Lucene merges fewer
segments near its largest size: otherwise commits of a fixed size leave
segments of just over half the cap that no merge can join, each costing a
search about as much as a full one. After a commit at most one merge runs, and only one whose result stays under
``max_commit_merge_chunks``: a write costs the batch plus a bounded merge,
never the collection; a write under a deadline (an HTTP request) merges
nothing and leaves it to the service's background merge. Larger merges (and
the removal of every deleted row) happen in ``Collection.compact``, which
packs the segments into the fewest of at most ``max_merge_chunks`` each: a
merge's peak memory grows with its chunks (docs/benchmarks.md has the figure),
so one segment of ten million would not fit in a machine of ordinary memory.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from retriever.errors import BadInputError
from retriever.storage.view import SegmentView


@dataclass(frozen=True)
class MergePolicy:
    """Attributes:
    factor: Segments per tier before they merge (default 4: each IVF segment adds a fixed cost to a
        search, so fewer, larger ones; a chunk is rewritten about 3 times on the way to a million).
    floor_chunks: Segments below this size count as this size (default 1,000).
    small_factor: Segments in tier 0 (under ``floor_chunks * factor``) before
        they merge (default 3).
    max_commit_merge_chunks: Largest merge run after a commit (default 1,000,000 chunks).
    max_merge_chunks: Largest segment ``compact`` writes (default 1,000,000 chunks); a segment
        already larger is rewritten alone.
    max_deleted_share: A segment with more deleted rows than this share is
        rewritten on its own (default 0.5).
    """

    factor: int = 4
    floor_chunks: int = 1_000
    small_factor: int = 3
    max_commit_merge_chunks: int = 1_000_000
    max_merge_chunks: int = 1_000_000
    max_deleted_share: float = 0.5

    def __post_init__(self) -> None:
        """Raise ``BadInputError`` naming the first setting out of range (a factor of 1 would never merge)."""
        at_least = {
            "factor": 2,
            "floor_chunks": 1,
            "small_factor": 2,
            "max_commit_merge_chunks": 1,
            "max_merge_chunks": 1,
        }
        for name, least in at_least.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise BadInputError(f"merge policy {name} must be an integer of at least {least}, got {value!r}")
        share = self.max_deleted_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise BadInputError(f"merge policy max_deleted_share must be a share in (0, 1], got {share!r}")

    def to_dict(self) -> dict:
        return {"kind": "tiered", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict | None) -> "MergePolicy":
        data = dict(data or {})
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def tier(self, chunks: int) -> int:
        return int(math.log(max(chunks, self.floor_chunks) / self.floor_chunks, self.factor) + 1e-9)

    def plan(self, parts: Sequence[SegmentView], exact_below: int = 0) -> list[str]:
        """Names of the segments to merge after a commit (empty: none).

        Args:
            exact_below: Segments built with fewer chunks have no IVF of full lists
                (``IndexPolicy.ann_min_rows``); 0 leaves them to the tiers.
        """
        tiers: dict[int, list[SegmentView]] = {}
        for part in parts:
            tiers.setdefault(self.tier(part.n_live_chunks), []).append(part)
        for level in sorted(tiers):
            members = sorted(tiers[level], key=lambda p: p.n_live_chunks)
            fan_in = min(self.small_factor, self.factor) if level == 0 else self.factor
            full = len(members) >= fan_in
            if full and sum(p.n_live_chunks for p in members[:fan_in]) <= self.max_commit_merge_chunks:
                return [p.ref.name for p in members[:fan_in]]
            if full or self._capped(level):  # too large to merge all: those that fit under the cap
                fitting = self._under_cap(members)
                if len(fitting) >= 2:
                    return [p.ref.name for p in fitting]
        small = self._small_to_merge(parts, exact_below)
        if small:
            return small
        for part in parts:
            total = part.segment.n_chunks
            dead = total - part.n_live_chunks
            if dead > self.max_deleted_share * total and part.n_live_chunks <= self.max_commit_merge_chunks:
                return [part.ref.name]
        return []

    def compaction(self, parts: Sequence[SegmentView], rewrite: Callable[[SegmentView], bool]) -> list[list[str]]:
        """The merges ``compact`` runs, as lists of segment names.

        The segments are packed into the fewest groups whose live chunks stay
        within ``max_merge_chunks`` (first fit, largest first; a larger segment
        is a group alone). A group of one is merged only where ``rewrite(part)``
        (deleted rows, an index another policy built).
        """
        groups: list[tuple[list[int], list[SegmentView]]] = []  # ([live chunks], members)
        for part in sorted(parts, key=lambda p: -p.n_live_chunks):
            group = next((g for g in groups if g[0][0] + part.n_live_chunks <= self.max_merge_chunks), None)
            if group is None:
                groups.append(([part.n_live_chunks], [part]))
            else:
                group[0][0] += part.n_live_chunks
                group[1].append(part)
        return [[p.ref.name for p in members] for _, members in groups if len(members) > 1 or rewrite(members[0])]

    def _capped(self, level: int) -> bool:
        """Whether a full merge of tier ``level`` may outgrow ``max_commit_merge_chunks``."""
        return self.floor_chunks * self.factor ** (level + 1) > self.max_commit_merge_chunks

    def _under_cap(self, members: Sequence[SegmentView]) -> list[SegmentView]:
        """The smallest of ``members`` (sorted by size) whose live chunks together stay within the cap."""
        chosen, total = [], 0
        for part in members:
            total += part.n_live_chunks
            if total > self.max_commit_merge_chunks:
                break
            chosen.append(part)
        return chosen

    def _small_to_merge(self, parts: Sequence[SegmentView], exact_below: int) -> list[str]:
        """The smallest segments built below ``exact_below`` chunks whose live chunks together first reach it
        (two at least)."""
        small = sorted((p for p in parts if p.segment.n_chunks < exact_below), key=lambda p: p.n_live_chunks)
        chosen, total = [], 0
        for part in small:  # none where exact_below is 0
            chosen.append(part)
            total += part.n_live_chunks
            if total >= exact_below and len(chosen) >= 2:
                return [p.ref.name for p in chosen] if total <= self.max_commit_merge_chunks else []
        return []
