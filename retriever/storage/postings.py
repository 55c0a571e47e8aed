"""A segment's postings as stored: per term, the rows holding it and (for documents) its frequencies.

Written and read by ``segment`` as ``<group>.indptr.npy``, ``<group>.rows.npy``
and ``<group>.tf.npy`` (``segment_format``); BM25 (``retriever.search.bm25``)
scores them, ``range_bounds`` bounds them, ``segment_merge`` remaps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass
class Postings:
    """Term-major postings of one segment: term ``t`` occurs in ``rows[indptr[t]:indptr[t + 1]]``.

    Attributes:
        terms: The segment's vocabulary; a term's id is its position.
        indptr: ``(len(terms) + 1,)`` int64 offsets into ``rows`` and ``tf``.
        rows: Document (or chunk) rows, ascending within each term, int32.
        tf: Term frequency of each posting, float32 (``None`` for incidence only).
    """

    terms: list[str]
    indptr: np.ndarray
    rows: np.ndarray
    tf: np.ndarray | None

    @cached_property
    def vocabulary(self) -> dict[str, int]:
        return {term: i for i, term in enumerate(self.terms)}

    def of(self, term: str) -> tuple[np.ndarray, np.ndarray | None]:
        """``(rows, tf)`` of ``term``; empty arrays when it does not occur."""
        t = self.vocabulary.get(term)
        if t is None:
            return self.rows[:0], (None if self.tf is None else self.tf[:0])
        lo, hi = self.indptr[t], self.indptr[t + 1]
        return self.rows[lo:hi], (None if self.tf is None else self.tf[lo:hi])

    @classmethod
    def from_pairs(
        cls, terms: list[str], term_ids: np.ndarray, rows: np.ndarray, tf: np.ndarray | None, counts: bool = True
    ) -> "Postings":
        """Postings from ``(term, row[, tf])`` triples; repeated pairs add up."""
        n_rows = int(rows.max()) + 1 if len(rows) else 0
        key = term_ids.astype(np.int64) * max(n_rows, 1) + rows
        unique, inverse = np.unique(key, return_inverse=True)
        weights = np.ones(len(key), np.float32) if tf is None else tf.astype(np.float32)
        freq = np.bincount(inverse, weights=weights, minlength=len(unique)).astype(np.float32)
        unique_terms = unique // max(n_rows, 1)
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(unique_terms, minlength=len(terms)), out=indptr[1:])
        return cls(terms, indptr, (unique % max(n_rows, 1)).astype(np.int32), freq if counts else None)

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(term_ids, rows, tf)``: every posting, the inverse of ``from_pairs``."""
        term_ids = np.repeat(np.arange(len(self.terms), dtype=np.int64), np.diff(self.indptr))
        return term_ids, self.rows.astype(np.int64), self.tf
