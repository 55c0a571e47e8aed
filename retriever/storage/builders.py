"""What the storage room is handed to build a segment's derived parts; the search room implements them.

A segment holds BM25 postings of analysed text, a vector index and int8
copies of its rows. Analysing text, building and tuning an index and
quantising rows are search algorithms (``retriever.search.bm25.Analyzer``,
``retriever.search.vector_index.IndexPolicy``, ``retriever.search.int8_rows``);
the storage room writes and checks their results. So storage names only
these shapes, and its callers (the collection, ``retriever.upgrading``) hand
in the search room's objects: ``retriever.storage`` imports nothing from
``retriever.search``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from retriever.storage.int8_files import Int8Rows
from retriever.storage.vector_files import VectorIndex


class TermAnalyzer(Protocol):
    """Text to index terms (``retriever.search.bm25.Analyzer``)."""

    def __call__(self, text: str) -> list[str]:
        """The index terms of ``text``, in order."""

    def positions(self, text: str) -> tuple[np.ndarray, list[str]]:
        """``(offsets, terms)``: the terms of ``self(text)`` with the int64 character offset of each word."""


class IndexBuilder(Protocol):
    """How a segment's vector index is chosen and built (``retriever.search.vector_index.IndexPolicy``).

    Attributes:
        ann_min_rows: Chunks from which a segment gets an IVF index (the merge policy groups smaller ones).
    """

    ann_min_rows: int

    def build(self, vectors: np.ndarray) -> VectorIndex:
        """An index over ``vectors`` ``(n, dim)`` float32 unit rows; its ``info`` goes into ``segment.json``."""

    def index_type_for(self, n: int) -> str:
        """The index type (``segment_format.FLAT`` ...) that ``build`` gives ``n`` vectors."""

    def to_dict(self) -> dict:
        """The policy as the manifest records it."""


@dataclass(frozen=True)
class SegmentBuilders:
    """The search room's builders, for storage code that makes segments from stored data (``upgrade``).

    Attributes:
        analyzer: ``analyzer(stemmer, stopwords)``: the analyser of a manifest's BM25 settings.
        index_builder: ``index_builder(policy)``: the builder of a manifest's index policy dict
            (``None``: the default policy).
        quantize: ``quantize(rows)``: int8 copies of ``(n, dim)`` float32 rows.
    """

    analyzer: Callable[[str | None, str | None], TermAnalyzer]
    index_builder: Callable[[dict | None], IndexBuilder]
    quantize: Callable[[np.ndarray], Int8Rows]
