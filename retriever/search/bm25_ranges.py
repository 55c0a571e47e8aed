"""BM25 that skips: row ranges whose best possible score cannot reach the top ``k`` are never scored.

A segment's document rows are cut into ranges of ``RANGE_ROWS``. For every
term and every range it occurs in, ``RangeBounds`` keeps the term's largest
frequency there and the smallest length of a document holding it. A term's
BM25 contribution ``w * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` grows
with ``tf`` and falls with ``dl``, so with the query's weights and the
collection's current average length (both known only at query time, which is
why bounds are kept as frequency and length, not as scores) these bound the
score of any document in the range. ``bm25_top_skipping`` adds up the
query terms' bounds per range, scores whole ranges in order of their bound,
and stops when the next bound is below the ``k``-th best score found: no
document left can enter the top ``k``. This is live block filtering over
document ranges (Mallia et al., SIGIR 2020), the range-wise cousin of
Lucene's block-max WAND and MaxScore, vectorised range by range.

Scores are those of ``bm25.bm25_top``, bit for bit: each document's terms are
added in the same order in float32, ties go the same way (part, then row),
and the statistics (live document frequencies, document count and average
length over every part) are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from retriever.search.bm25 import BM25Part, Postings, bm25_idf, counted_terms, posting_scores

RANGE_ROWS = 1024
#: Ranges scored between two checks of the stopping bound.
BATCH_RANGES = 8
#: A bound is raised by this relative margin before it is compared, so float rounding never stops the search early.
MARGIN = 1e-5


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


def bm25_top_skipping(
    parts: Sequence[BM25Part],
    bounds: Sequence[RangeBounds],
    query_terms: Sequence[str],
    k: int,
    k1: float,
    b: float,
    *,
    totals: tuple[int, float],
    deleted: Sequence[np.ndarray | None] | None = None,
) -> list[tuple[int, int, float]]:
    """``bm25.bm25_top``'s answer, scoring only the row ranges that can still reach the top ``k``.

    Args:
        parts: Per segment ``(postings, doc_lengths, live, allowed)``, as ``bm25_top`` takes them.
        bounds: Each part's ``RangeBounds``.
        deleted: Each part's deleted rows, ascending (``None`` where none; computed from
            ``live`` when not given): live document frequencies are counted from them.

    Returns:
        Up to ``k`` ``(part index, row, score)`` with score > 0, best first.
    """
    n_docs, total_length = totals
    if n_docs == 0 or k < 1:
        return []
    avgdl = max(total_length / n_docs, 1e-9)
    terms, counts = counted_terms(query_terms)
    term_ids = [[part[0].vocabulary.get(term) for term in terms] for part in parts]
    if deleted is None:
        deleted = [None if live is None else np.flatnonzero(~live) for _, _, live, _ in parts]
    df = _live_document_frequencies(parts, term_ids, deleted, len(terms))
    weight = counts * bm25_idf(n_docs, df)

    bound, part_of, range_of = _range_bounds(parts, bounds, term_ids, weight, k1, b, avgdl)
    order = np.argsort(-bound, kind="stable")
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # scores, part, rows
    kept, threshold = 0, 0.0
    for at in range(0, len(order), BATCH_RANGES):
        if kept >= k and bound[order[at]] * (1 + MARGIN) < threshold:
            break
        batch = order[at : at + BATCH_RANGES]
        for i in np.unique(part_of[batch]):
            chosen = np.sort(range_of[batch][part_of[batch] == i])
            scores, rows = _score_ranges(parts[i], bounds[i], term_ids[i], chosen, weight, k1, b, avgdl)
            if len(rows):
                found.append((scores, np.full(len(rows), i), rows))
                kept += len(rows)
        if kept >= k:
            every = np.concatenate([s for s, _, _ in found])
            threshold = float(np.partition(every, len(every) - k)[len(every) - k])
    if not found:
        return []
    scores, part_index, rows = (np.concatenate(column) for column in zip(*found))
    best = np.lexsort((rows, part_index, -scores))[:k]  # ties: segment order, then row order
    return list(zip(part_index[best].tolist(), rows[best].tolist(), scores[best].tolist()))


def _live_document_frequencies(parts, term_ids, deleted, n_terms: int) -> np.ndarray:
    """``(n_terms,)`` int64: how many live documents of all parts hold each term."""
    df = np.zeros(n_terms, dtype=np.int64)
    for (postings, _, _, _), ids, gone in zip(parts, term_ids, deleted):
        for j, t in enumerate(ids):
            if t is None:
                continue
            lo, hi = int(postings.indptr[t]), int(postings.indptr[t + 1])
            df[j] += hi - lo
            if gone is not None and len(gone) and hi > lo:
                rows = postings.rows[lo:hi]
                at = np.minimum(np.searchsorted(rows, gone), hi - lo - 1)
                df[j] -= int(np.count_nonzero(rows[at] == gone))
    return df


def _range_bounds(parts, bounds, term_ids, weight, k1, b, avgdl):
    """``(bound, part, range)`` of every range of every part that a query term reaches and a live,
    allowed row lies in; ``bound`` is float64, an upper bound of any document's score there."""
    out_bound, out_part, out_range = [], [], []
    for i, ((_, _, live, allowed), part_bounds, ids) in enumerate(zip(parts, bounds, term_ids)):
        total = np.zeros(part_bounds.n_ranges, dtype=np.float64)
        for j, t in enumerate(ids):
            if t is None:
                continue
            lo, hi = int(part_bounds.indptr[t]), int(part_bounds.indptr[t + 1])
            tf = part_bounds.max_tf[lo:hi].astype(np.float64)
            norm = k1 * (1 - b + b * part_bounds.min_length[lo:hi].astype(np.float64) / avgdl)
            total += np.bincount(part_bounds.ranges[lo:hi], weight[j] * tf / (tf + norm), minlength=part_bounds.n_ranges)
        eligible = total > 0
        for mask in (live, allowed):
            if mask is not None and len(mask):
                starts = np.arange(0, len(mask), part_bounds.rows_per_range)
                eligible &= np.logical_or.reduceat(mask, starts)
        ranges = np.flatnonzero(eligible)
        out_bound.append(total[ranges])
        out_part.append(np.full(len(ranges), i))
        out_range.append(ranges)
    if not out_bound:
        return np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_bound), np.concatenate(out_part), np.concatenate(out_range)


def _score_ranges(part, part_bounds: RangeBounds, ids, chosen: np.ndarray, weight, k1, b, avgdl):
    """Exact BM25 ``(scores, rows)`` of the live, allowed rows of ranges ``chosen`` (ascending) with score > 0."""
    postings, lengths, live, allowed = part
    slices, term_of = [], []
    for j, t in enumerate(ids):
        if t is None:
            continue
        lo, hi = int(part_bounds.indptr[t]), int(part_bounds.indptr[t + 1])
        term_ranges = part_bounds.ranges[lo:hi]
        at = np.searchsorted(term_ranges, chosen)
        held = at < len(term_ranges)
        held[held] = term_ranges[at[held]] == chosen[held]
        for e in (lo + at[held]).tolist():
            slices.append((int(part_bounds.starts[e]), int(part_bounds.starts[e + 1])))
            term_of.append(j)
    if not slices:
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    rows = np.concatenate([postings.rows[a:z] for a, z in slices]).astype(np.int64)
    tf = np.concatenate([postings.tf[a:z] for a, z in slices])
    terms = np.repeat(np.asarray(term_of), [z - a for a, z in slices])
    unique, inverse = np.unique(rows, return_inverse=True)
    scores = np.zeros(len(unique), dtype=np.float32)
    # term by term, in posting order, unbuffered: each row's sum is bm25_top's, bit for bit
    np.add.at(scores, inverse, posting_scores(weight, terms, tf, lengths[rows], k1, b, avgdl))
    keep = scores > 0
    for mask in (live, allowed):
        if mask is not None:
            keep &= mask[unique]
    return scores[keep], unique[keep]
