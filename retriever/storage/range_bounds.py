"""Per-segment bounds of BM25 term scores, by term and range of rows, for skipping (``bm25_maxscore``).

A segment's document rows are cut into ranges of ``RANGE_ROWS``. For every
term and every range it occurs in, ``RangeBounds`` keeps the term's largest
frequency there and the smallest length of a document holding it. A term's
BM25 contribution ``w * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` grows
with ``tf`` and falls with ``dl``, so with the query's weights and the
collection's current average length (both known only at query time, which is
why bounds are kept as frequency and length, not as scores) these bound the
share of any document in the range, and their largest bounds the term's
share anywhere in the segment. Written with the segment, checksummed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retriever.storage.postings import Postings

RANGE_ROWS = 1024


@dataclass(frozen=True)
class RangeBounds:
    """Per term, the row ranges it occurs in, each with its largest frequency and smallest document length.

    Entries are in posting order (term by term, ranges ascending), so entry
    ``e`` covers postings ``starts[e]:starts[e + 1]`` (the last one up to the
    end of the postings).

    Attributes:
        rows_per_range: Rows in a range.
        n_ranges: Ranges of the segment (``ceil(rows / rows_per_range)``).
        indptr: ``(terms + 1,)`` int64: term ``t``'s entries are ``indptr[t]:indptr[t + 1]``.
        ranges: ``(entries,)`` int64 range of each entry.
        starts: ``(entries + 1,)`` int64 first posting of each entry, then the number of postings.
        max_tf: ``(entries,)`` float32 largest term frequency in the entry.
        min_length: ``(entries,)`` float32 smallest document length in the entry.
    """

    rows_per_range: int
    n_ranges: int
    indptr: np.ndarray
    ranges: np.ndarray
    starts: np.ndarray
    max_tf: np.ndarray
    min_length: np.ndarray

    @classmethod
    def build(cls, postings: Postings, doc_lengths: np.ndarray, rows_per_range: int = RANGE_ROWS) -> "RangeBounds":
        """The bounds of ``postings`` (with frequencies) over documents of ``doc_lengths`` ``(rows,)``."""
        n_terms = len(postings.terms)
        rows = np.asarray(postings.rows, dtype=np.int64)
        n_ranges = -(-len(doc_lengths) // rows_per_range)
        term_ids = np.repeat(np.arange(n_terms, dtype=np.int64), np.diff(postings.indptr))
        range_of = rows // rows_per_range
        key = term_ids * max(n_ranges, 1) + range_of
        first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else np.zeros(0, np.int64)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_ids[first], minlength=n_terms), out=indptr[1:])
        tf = np.asarray(postings.tf, dtype=np.float32)
        lengths = np.asarray(doc_lengths, dtype=np.float32)[rows]
        return cls(
            rows_per_range=rows_per_range,
            n_ranges=n_ranges,
            indptr=indptr,
            ranges=range_of[first],
            starts=np.concatenate([first, [len(rows)]]).astype(np.int64),
            max_tf=np.maximum.reduceat(tf, first) if len(first) else tf[:0],
            min_length=np.minimum.reduceat(lengths, first) if len(first) else lengths[:0],
        )
