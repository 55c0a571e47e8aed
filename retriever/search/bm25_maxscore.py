"""BM25 that skips postings: MaxScore over the query's terms (Turtle and Flood, 1995), vectorised.

A term's share of any document's score in a segment is bounded by the
segment's ``RangeBounds`` (its largest frequency and the shortest document
holding it, with the query's idf and the collection's current average
length). ``bm25_top_maxscore`` first scores, exactly, the documents that hold
the query's rarest terms (up to ``SEED_POSTINGS`` postings): the ``k``-th best
of them is a floor ``theta`` under the final ``k``-th score. Terms whose
bounds add up to less than ``theta`` are non-essential: a document holding
none but them cannot reach the top ``k``. The essential terms' postings are
summed per document (a partial score, never above the full one, so its
``k``-th best raises the floor), and only documents whose partial score plus
the non-essential terms' bounds reaches the floor are scored exactly, every
query term looked up in its postings. For a long query with common words,
those are a small share of the postings.

Scores are those of ``bm25.bm25_top``, bit for bit: each document's terms
are added in query order in float32, ties go the same way (part, then row),
and the statistics (live document frequencies, document count and average
length over every part) are the same.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from retriever.search.bm25 import BM25Part, bm25_idf, counted_terms, posting_scores
from retriever.search.bm25_ranges import RangeBounds

#: Postings of the rarest query terms whose documents set the first floor.
SEED_POSTINGS = 4096
#: Bounds are raised by this relative margin before they are compared, so float rounding never drops a document.
MARGIN = 1e-5

Spans = list["tuple[int, int, int] | None"]  # per query term in one part: (term id, first posting, end); None: absent


def bm25_top_maxscore(
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
    """``bm25.bm25_top``'s answer, scoring only documents that hold a term that can still matter.

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
    spans = [_spans(part[0], terms) for part in parts]
    if deleted is None:
        deleted = [None if live is None else np.flatnonzero(~live) for _, _, live, _ in parts]
    weight = counts * bm25_idf(n_docs, _live_document_frequencies(parts, spans, deleted, len(terms)))
    seed = _rarest_terms(spans, len(terms))
    floor = _kth_best([_partial(part, part_spans, seed, weight, k1, b, avgdl)[1] for part, part_spans in zip(parts, spans)],
                      k) * (1 - MARGIN)  # float32 sums in another order may differ in their last bit
    partials = []
    for part, part_bounds, part_spans in zip(parts, bounds, spans):
        essential, weak = _split_terms(part_bounds, part_spans, weight, k1, b, avgdl, floor)
        partials.append((*_partial(part, part_spans, essential, weight, k1, b, avgdl), weak))
    # a document's partial score is at most its score, so the k-th best partial is a floor too (a higher one)
    floor = max(floor, _kth_best([partial for _, partial, _ in partials], k) * (1 - MARGIN))
    found = []
    for i, (part, part_spans, (rows, partial, weak)) in enumerate(zip(parts, spans, partials)):
        rows = rows[partial + weak * (1 + MARGIN) >= floor]  # the rest cannot reach the k-th score
        scores, rows = _score_rows(part, part_spans, rows, weight, k1, b, avgdl)
        found.append((scores, np.full(len(rows), i), rows))
    scores, part_index, rows = (np.concatenate(column) for column in zip(*found))
    best = np.lexsort((rows, part_index, -scores))[:k]  # ties: segment order, then row order
    return list(zip(part_index[best].tolist(), rows[best].tolist(), scores[best].tolist()))


def _spans(postings, terms: list[str]) -> Spans:
    out: Spans = []
    for term in terms:
        t = postings.vocabulary.get(term)
        out.append(None if t is None or postings.indptr[t] == postings.indptr[t + 1]
                   else (int(t), int(postings.indptr[t]), int(postings.indptr[t + 1])))
    return out


def _live_document_frequencies(parts, spans: list[Spans], deleted, n_terms: int) -> np.ndarray:
    """``(n_terms,)`` int64: how many live documents of all parts hold each term."""
    df = np.zeros(n_terms, dtype=np.int64)
    for (postings, _, _, _), part_spans, gone in zip(parts, spans, deleted):
        for j, span in enumerate(part_spans):
            if span is None:
                continue
            _, lo, hi = span
            df[j] += hi - lo
            if gone is not None and len(gone):
                rows = postings.rows[lo:hi]
                at = np.minimum(np.searchsorted(rows, gone), hi - lo - 1)
                df[j] -= int(np.count_nonzero(rows[at] == gone))
    return df


def _rarest_terms(spans: list[Spans], n_terms: int) -> list[int]:
    """The query terms with the fewest postings over all parts, as many as fit in ``SEED_POSTINGS`` (one at least)."""
    total = np.zeros(n_terms, dtype=np.int64)
    for part_spans in spans:
        total += [0 if span is None else span[2] - span[1] for span in part_spans]
    chosen, used = [], 0
    for j in np.argsort(total, kind="stable").tolist():
        if total[j] == 0 or (chosen and used + total[j] > SEED_POSTINGS):
            continue
        chosen.append(j)
        used += int(total[j])
    return chosen


def _partial(part, part_spans: Spans, terms: Sequence[int], weight, k1, b, avgdl) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, partial scores)``: the live, allowed rows (ascending) holding any of ``terms``, and the
    float32 sum of those terms' shares of each (a lower bound of its score, up to rounding)."""
    postings, lengths, live, allowed = part
    held = [j for j in terms if part_spans[j] is not None]
    if not held:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    rows = np.concatenate([postings.rows[part_spans[j][1] : part_spans[j][2]] for j in held]).astype(np.int64)
    tf = np.concatenate([postings.tf[part_spans[j][1] : part_spans[j][2]] for j in held])
    term_of = np.repeat(np.asarray(held), [part_spans[j][2] - part_spans[j][1] for j in held])
    sums = np.zeros(len(lengths), dtype=np.float32)
    np.add.at(sums, rows, posting_scores(weight, term_of, tf, lengths[rows], k1, b, avgdl))
    if len(held) > 1:  # distinct rows: from the sums where most rows hold a term, else by sorting
        rows = np.flatnonzero(sums) if 8 * len(rows) > len(sums) else np.unique(rows)
    for mask in (live, allowed):
        if mask is not None:
            rows = rows[mask[rows]]
    return rows, sums[rows]


def _score_rows(part, part_spans: Spans, rows: np.ndarray, weight, k1, b, avgdl) -> tuple[np.ndarray, np.ndarray]:
    """Exact BM25 ``(scores, rows)`` of ``rows`` (ascending, live and allowed: ``_partial``'s) with score > 0."""
    postings, lengths, _, _ = part
    scores = np.zeros(len(rows), dtype=np.float32)
    if not len(rows):
        return scores, rows
    row_lengths = lengths[rows]
    for j, span in enumerate(part_spans):  # in query order, as bm25_top adds them
        if span is None:
            continue
        _, lo, hi = span
        term_rows = postings.rows[lo:hi]
        at = np.minimum(np.searchsorted(term_rows, rows), len(term_rows) - 1)
        held = term_rows[at] == rows
        if held.any():
            tf = postings.tf[lo:hi][at[held]]
            scores[held] += posting_scores(weight, np.full(len(tf), j), tf, row_lengths[held], k1, b, avgdl)
    keep = scores > 0
    return scores[keep], rows[keep]


def _kth_best(score_lists: list[np.ndarray], k: int) -> float:
    """The ``k``-th best of all scores, 0 when fewer."""
    every = np.concatenate(score_lists) if score_lists else np.zeros(0, np.float32)
    return 0.0 if len(every) < k else float(np.partition(every, len(every) - k)[len(every) - k])


def _split_terms(part_bounds: RangeBounds, part_spans: Spans, weight, k1, b, avgdl, floor: float) -> tuple[list[int], float]:
    """``(essential terms, weak total)``: the weakest query terms whose bounds in this part add up to less
    than ``floor`` (their sum, ``weak total``) cannot lift a document to it alone; the others are essential."""
    bound = np.zeros(len(part_spans), dtype=np.float64)
    for j, span in enumerate(part_spans):
        if span is None:
            continue
        lo, hi = int(part_bounds.indptr[span[0]]), int(part_bounds.indptr[span[0] + 1])
        tf = part_bounds.max_tf[lo:hi].astype(np.float64)
        norm = k1 * (1 - b + b * part_bounds.min_length[lo:hi].astype(np.float64) / avgdl)
        bound[j] = float(np.max(weight[j] * tf / (tf + norm)))
    order = np.argsort(bound, kind="stable")
    total = np.cumsum(bound[order])
    weak = total * (1 + MARGIN) < floor
    essential = sorted(j for j in order[~weak].tolist() if part_spans[j] is not None)
    return essential, float(total[weak][-1]) if weak.any() else 0.0
