"""BM25 that skips postings: MaxScore (Turtle and Flood, 1995) over per-segment term bounds, compiled.

A term's share of any document's score in a segment is bounded by the
segment's ``RangeBounds`` (its largest frequency and the shortest document
holding it, with the query's idf and the collection's current average
length). ``bm25_kernels.skip_part`` sums the query's terms per document
until the terms left could not lift a document into the top ``k`` alone;
their postings are never read, only looked up for the few documents that can
still make it. The ``k`` best and the floor under them carry over from
segment to segment. On real queries over a million documents, most postings
belong to common terms that turn weak (``benchmarks/scale.py``).

Scores are those of ``bm25.bm25_top``, bit for bit: each document's terms
are added in query order in float32, ties go the same way (part, then row),
and the statistics (live document frequencies, document count and average
length over every part) are the same.
"""

from __future__ import annotations

import threading
from typing import Mapping, Sequence

import numpy as np

from retriever.search import bm25_kernels
from retriever.search.bm25 import BM25Part, bm25_idf, counted_terms
from retriever.storage.range_bounds import RangeBounds

_EVERY_ROW = np.zeros(0, dtype=bool)
_THREAD = threading.local()


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
    stats: dict | None = None,
    df: Mapping[str, int] | None = None,
) -> list[tuple[int, int, float]]:
    """``bm25.bm25_top``'s answer, visiting only documents that hold a term that can still matter.

    Args:
        parts: Per segment ``(postings, doc_lengths, live, allowed)``, as ``bm25_top`` takes them.
        bounds: Each part's ``RangeBounds``.
        deleted: Each part's deleted rows, ascending (``None`` where none; computed from
            ``live`` when not given): live document frequencies are counted from them.
        stats: Receives ``scored``, how many documents were scored exactly, when given.
        df: Each query term's live document frequency given from outside, as ``bm25_top`` takes it.

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
    if df is None:
        frequencies = _live_document_frequencies(parts, spans, deleted)
    else:
        frequencies = np.asarray([df.get(term, 0) for term in terms], dtype=np.int64)
    weight = (counts * bm25_idf(n_docs, frequencies)).astype(np.float64)
    heap_score, heap_key = np.zeros(k, dtype=np.float32), np.zeros(k, dtype=np.int64)
    state = np.zeros(2, dtype=np.int64)
    params = (np.float32(k1), np.float32(1 - b), np.float32(b), np.float32(avgdl))
    floor = np.float32(0)
    for i, ((postings, lengths, live, allowed), part_bounds, (lo, hi)) in enumerate(zip(parts, bounds, spans)):
        if not np.any(hi > lo):
            continue
        lengths = np.asarray(lengths, dtype=np.float32)
        floor = bm25_kernels.skip_part(
            postings.rows,
            postings.tf,
            lengths,
            _EVERY_ROW if live is None else live,
            _EVERY_ROW if allowed is None else allowed,
            lo,
            hi,
            weight,
            _term_bounds(part_bounds, postings, terms, weight, k1, b, avgdl),
            *params,
            i,
            heap_score,
            heap_key,
            state,
            floor,
            *_workspace(len(lengths)),
        )
    held = int(state[0])
    scores, keys = heap_score[:held], heap_key[:held]
    best = np.lexsort((keys, -scores))
    if stats is not None:
        stats["scored"] = int(state[1])
    return [(int(keys[j] >> 32), int(keys[j] & 0xFFFFFFFF), float(scores[j])) for j in best]


def _workspace(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This thread's room for a segment of ``n`` documents: zeroed float32 partial sums, int64 candidate rows
    and float32 their sums, each ``(n,)``; kept from search to search (the kernel leaves the sums zeroed)."""
    held = getattr(_THREAD, "workspace", None)
    if held is None or len(held[0]) < n:
        held = (np.zeros(n, dtype=np.float32), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.float32))
        _THREAD.workspace = held
    return held[0][:n], held[1][:n], held[2][:n]


def _spans(postings, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``: ``(terms,)`` int64 posting span of each query term in one part (``lo == hi`` where absent)."""
    lo, hi = np.zeros(len(terms), dtype=np.int64), np.zeros(len(terms), dtype=np.int64)
    for j, term in enumerate(terms):
        t = postings.vocabulary.get(term)
        if t is not None:
            lo[j], hi[j] = postings.indptr[t], postings.indptr[t + 1]
    return lo, hi


def _live_document_frequencies(parts, spans, deleted) -> np.ndarray:
    """``(terms,)`` int64: how many live documents of all parts hold each query term."""
    df = np.zeros(len(spans[0][0]) if spans else 0, dtype=np.int64)
    for (postings, _, _, _), (lo, hi), gone in zip(parts, spans, deleted):
        df += hi - lo
        if gone is None or not len(gone):
            continue
        for j in np.flatnonzero(hi > lo):
            rows = postings.rows[lo[j] : hi[j]]
            at = np.minimum(np.searchsorted(rows, gone), len(rows) - 1)
            df[j] -= int(np.count_nonzero(rows[at] == gone))
    return df


def _term_bounds(part_bounds: RangeBounds, postings, terms: list[str], weight, k1, b, avgdl) -> np.ndarray:
    """``(terms,)`` float64: each query term's largest share of any document's score in this part (0 where absent)."""
    bound = np.zeros(len(terms), dtype=np.float64)
    ids = [(j, postings.vocabulary.get(term)) for j, term in enumerate(terms)]
    held = [
        (j, int(part_bounds.indptr[t]), int(part_bounds.indptr[t + 1]))
        for j, t in ids
        if t is not None and part_bounds.indptr[t] < part_bounds.indptr[t + 1]
    ]
    if not held:
        return bound
    counts = np.array([hi - lo for _, lo, hi in held])
    terms_held = np.array([j for j, _, _ in held])
    tf = np.concatenate([part_bounds.max_tf[lo:hi] for _, lo, hi in held]).astype(np.float64)
    length = np.concatenate([part_bounds.min_length[lo:hi] for _, lo, hi in held]).astype(np.float64)
    norm = k1 * (1 - b + b * length / avgdl)
    shares = np.repeat(weight[terms_held], counts) * tf / (tf + norm)
    bound[terms_held] = np.maximum.reduceat(shares, np.cumsum(counts) - counts)  # each term's entries are contiguous
    return bound
