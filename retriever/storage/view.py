"""A committed generation as readers see it: its segments and which rows are live.

``load_view`` reuses the segments (and deletion masks) of the view it
replaces, so a new generation costs a reader only its new files.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from retriever.storage.catalog import CatalogState, SegmentRef
from retriever.storage.segment import SEGMENTS_DIR, Segment
from retriever.storage.segment_format import IVF, IVF_RABITQ, RABITQ


@dataclass
class SegmentView:
    """One segment of a view with its deletions applied.

    Attributes:
        ref: The segment's name and deletion generation.
        segment: The opened segment.
        deleted: Deleted document rows (sorted int64).
        live_docs: ``(docs,)`` bool mask, or ``None`` when nothing is deleted.
        live_chunks: ``(chunks,)`` bool mask, or ``None`` likewise.
        n_live_docs, n_live_chunks: Counts of live rows.
    """

    ref: SegmentRef
    segment: Segment
    deleted: np.ndarray
    live_docs: np.ndarray | None
    live_chunks: np.ndarray | None
    n_live_docs: int
    n_live_chunks: int

    @classmethod
    def open(cls, ref: SegmentRef, segment: Segment) -> "SegmentView":
        deleted = segment.deleted(ref.deletions)
        if len(deleted) == 0:
            return cls(ref, segment, deleted, None, None, segment.n_docs, segment.n_chunks)
        live_docs = np.ones(segment.n_docs, dtype=bool)
        live_docs[deleted] = False
        live_chunks = live_docs[segment.chunk_doc]
        return cls(ref, segment, deleted, live_docs, live_chunks, int(live_docs.sum()), int(live_chunks.sum()))

    @cached_property
    def live_length(self) -> float:
        """Summed BM25 length of the live documents."""
        lengths = self.segment.doc_lengths
        return float(lengths.sum() if self.live_docs is None else lengths[self.live_docs].sum())

    def allowed_docs(self, keys: np.ndarray) -> np.ndarray:
        """Bool mask of live rows whose key is in ``keys`` (sorted int64)."""
        rows = self.segment.rows_of(keys)
        mask = np.zeros(self.segment.n_docs, dtype=bool)
        mask[rows[rows >= 0]] = True
        if self.live_docs is not None:
            mask &= self.live_docs
        return mask


@dataclass
class View:
    """The segments of one committed generation."""

    generation: int
    parts: list[SegmentView]

    @property
    def n_live_docs(self) -> int:
        return sum(p.n_live_docs for p in self.parts)

    @cached_property
    def live_length(self) -> float:
        """Summed BM25 length of the live documents of every part."""
        return sum(p.live_length for p in self.parts)

    def find(self, key: int) -> tuple[int, int] | None:
        """``(part index, document row)`` of the live document with ``key``, or ``None``."""
        target = np.asarray([key], dtype=np.int64)
        for i, part in enumerate(self.parts):
            row = int(part.segment.rows_of(target)[0])
            if row >= 0 and (part.live_docs is None or part.live_docs[row]):
                return i, row
        return None

    def summary(self) -> str:
        """``"2 segments: IVF1024 1-bit codes nprobe 16 (1,000,000 chunks), exact (2,000 chunks)"``."""
        if not self.parts:
            return "no segments (empty)"
        described = []
        for part in self.parts:
            index = part.segment.meta["index"]
            kind = _described(index)
            described.append(f"{kind} ({part.n_live_chunks:,} chunks)")
        count = f"{len(self.parts)} segment{'s' if len(self.parts) > 1 else ''}"
        return f"{count}: {', '.join(described)}"

    def segments(self) -> list[dict]:
        """Per segment: ``name``, live ``documents`` and ``chunks``, ``deleted_documents``, ``index`` settings."""
        return [
            {
                "name": p.ref.name,
                "documents": p.n_live_docs,
                "chunks": p.n_live_chunks,
                "deleted_documents": p.segment.n_docs - p.n_live_docs,
                "index": p.segment.meta["index"],
            }
            for p in self.parts
        ]

    def locate(self, keys: np.ndarray) -> list[np.ndarray]:
        """Per part, the live rows holding any of ``keys`` (sorted int64)."""
        out = []
        for part in self.parts:
            rows = part.segment.rows_of(keys)
            rows = rows[rows >= 0]
            if part.live_docs is not None:
                rows = rows[part.live_docs[rows]]
            out.append(rows)
        return out


def load_view(root: Path, state: CatalogState, previous: View | None = None) -> View:
    """Open generation ``state`` of the collection at ``root``, reusing what ``previous`` holds.

    Raises:
        FileNotFoundError: A file of this generation is gone (a writer moved on).
    """
    reuse = {p.ref.name: p for p in previous.parts} if previous is not None else {}
    parts = []
    for ref in state.segments:
        old = reuse.get(ref.name)
        if old is not None and old.ref == ref:
            parts.append(old)
            continue
        segment = old.segment if old is not None else Segment(Path(root) / SEGMENTS_DIR / ref.name)
        parts.append(SegmentView.open(ref, segment))
    return View(state.generation, parts)


def refs(parts: Sequence[SegmentView]) -> list[SegmentRef]:
    """The ``SegmentRef`` of each part."""
    return [p.ref for p in parts]


def _described(index: dict) -> str:
    """A segment's vector index in words: ``exact``, ``IVF256 nprobe 16``,
    ``IVF256 1-bit codes nprobe 32, 20 rescored per hit``, or ``1-bit codes, 20 rescored per hit``."""
    if index["type"] == IVF:
        return f"IVF{index['nlist']} nprobe {index['nprobe']}"
    rescored = f", {index['rescore']} rescored per hit" if "rescore" in index else ""
    if index["type"] == IVF_RABITQ:
        return f"IVF{index['nlist']} 1-bit codes nprobe {index['nprobe']}{rescored}"
    if index["type"] == RABITQ:
        return f"1-bit codes{rescored}"
    return "exact"
