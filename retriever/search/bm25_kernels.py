"""Compiled loops of BM25 that skips (numba): MaxScore over one segment's postings, term at a time.

``skip_part`` sums the query's terms into per-document partial scores, the
terms with the fewest postings per unit of score bound first. After each
term the ``k``-th best partial sum is a floor under the final ``k``-th score;
once the terms left could add up to less than the floor (``SUM_UNTIL`` of it),
they are weak: a document holding none of the summed terms cannot reach the
top ``k``, so the weak terms' postings are never read, only looked up (binary
search) for the few documents whose partial sum plus the weak bounds still
reach the floor, strongest first, dropping a document as soon as it cannot
make it. On real queries most postings belong to common terms with small
bounds, which turn weak.

A document's exact score is the float32 sum of its terms' shares in query
order, each share computed as ``bm25.posting_scores`` computes it (the same
float32 and float64 steps), so scores equal the exhaustive ones bit for bit.
Compiled on first use and cached beside this module, so later processes
load it instead of compiling (docs/benchmarks.md has both times).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Bounds are raised by this relative margin before they are compared, so float rounding never drops a document.
MARGIN = 1e-5
#: Terms are summed until those left can add at most this share of the floor: reading
#: a few more postings costs less than looking the weak terms up for the many documents that would
#: otherwise stay candidates (chosen on 1M real-shaped documents and real queries; docs/benchmarks.md).
SUM_UNTIL = 0.7
#: Postings whose shares are computed at once (vectorised), then added.
BLOCK = 2048

_compiled = njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
#: Helpers are inlined where they are called: a call passing arrays costs an atomic reference count each.
_inlined = njit(cache=True, nogil=True, boundscheck=False, error_model="numpy", inline="always")


@_inlined
def share(weight, tf, length, k1, one_minus_b, b, avgdl):
    """One posting's float32 BM25 share, step for step as ``bm25.posting_scores`` (``k1``.. ``avgdl`` float32)."""
    norm = k1 * (one_minus_b + b * length / avgdl)
    return np.float32(weight * tf / (tf + norm))


@_inlined
def _shares(tf, lengths, weight, k1, one_minus_b, b, avgdl, out):
    """``out[:len(tf)]``: the shares of postings with frequencies ``tf`` in documents of ``lengths`` (vectorised)."""
    for p in range(len(tf)):
        out[p] = share(weight, tf[p], lengths[p], k1, one_minus_b, b, avgdl)


@_inlined
def _find(rows, lo, hi, row):
    """The position of ``row`` in ``rows[lo:hi]`` (ascending), or -1: binary search."""
    end = hi
    while lo < hi:
        mid = (lo + hi) // 2
        if rows[mid] < row:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < end and rows[lo] == row else -1


@_inlined
def _worse(score_a, key_a, score_b, key_b):
    """Whether entry a ranks below entry b: lower score, or the same score and a later (part, row) key."""
    return score_a < score_b or (score_a == score_b and key_a > key_b)


@_inlined
def _push(heap_score, heap_key, n, score, key):
    """Add an entry to the min-heap of the ``len(heap_score)`` best (worst entry at 0); returns the new count.

    Entries may come in any order: ties at the lowest score go to the earlier key.
    """
    k = len(heap_score)
    if n < k:
        i = n
        n += 1
        while i > 0:
            parent = (i - 1) // 2
            if not _worse(score, key, heap_score[parent], heap_key[parent]):
                break
            heap_score[i], heap_key[i] = heap_score[parent], heap_key[parent]
            i = parent
        heap_score[i], heap_key[i] = score, key
        return n
    if not _worse(heap_score[0], heap_key[0], score, key):
        return n
    i = 0
    while True:
        child = 2 * i + 1
        if child >= k:
            break
        if child + 1 < k and _worse(heap_score[child + 1], heap_key[child + 1], heap_score[child], heap_key[child]):
            child += 1
        if not _worse(heap_score[child], heap_key[child], score, key):
            break
        heap_score[i], heap_key[i] = heap_score[child], heap_key[child]
        i = child
    heap_score[i], heap_key[i] = score, key
    return n


@_compiled
def skip_part(
    rows,
    tf,
    lengths,
    live,
    allowed,
    lo,
    hi,
    weight,
    bound,
    k1,
    one_minus_b,
    b,
    avgdl,
    part,
    heap_score,
    heap_key,
    state,
    floor,
    partial,
    found_rows,
    found_partial,
):
    """Add one segment's documents to the running top ``len(heap_score)``, skipping the weak terms' postings.

    Terms are summed into ``partial``, fewest postings per unit of bound
    first; after each, the ``k``-th best of its documents' partial sums (a
    partial sum is at most the score) may raise ``floor``, and once the terms
    left add up to less than ``SUM_UNTIL`` of it they are weak and never read.
    Documents whose partial sum plus the weak bounds reach the floor are looked
    up in the weak terms, strongest first, and scored exactly if they still
    can; those with the highest partial sums go first, to raise the floor
    early. Returns the floor.

    Args:
        rows, tf: The segment's postings (``Postings.rows`` int32, ``Postings.tf`` float32).
        lengths: ``(docs,)`` float32 document lengths.
        live, allowed: ``(docs,)`` bool masks, or empty arrays for "every row".
        lo, hi: ``(terms,)`` int64 posting span of each query term, in query order (``lo == hi``: absent).
        weight: ``(terms,)`` float64 idf times the term's count in the query.
        bound: ``(terms,)`` float64 largest share the term can have in this segment.
        k1, one_minus_b, b, avgdl: float32 BM25 parameters and the collection's average length.
        part: This segment's index; entries are keyed ``part << 32 | row``.
        heap_score, heap_key: ``(k,)`` the running top ``k`` (float32 scores, int64 keys), shared by the parts.
        state: ``(2,)`` int64: entries held, documents scored exactly (both carried over and updated).
        floor: float32 a score that at least ``k`` documents reach (0 when unknown).
        partial: ``(docs,)`` float32 zeros (left zeroed).
        found_rows, found_partial: ``(docs,)`` int64 and float32 room for the candidates.
    """
    k = len(heap_score)
    if state[0] == k and heap_score[0] > floor:
        floor = heap_score[0]
    order = np.argsort(
        (hi - lo) / np.maximum(bound, 1e-30), kind="mergesort"
    )  # fewest postings per unit of bound first
    masks = (live, allowed)
    summed, left, floor, ahead = _sum_strong_terms(
        rows, tf, lengths, masks, lo, hi, weight, bound, order, k1, one_minus_b, b, avgdl, k, floor, partial
    )
    count = _candidates(rows, masks, lo, hi, order[:summed], left, floor, partial, found_rows, found_partial)
    weak = order[summed:][np.argsort(-bound[order[summed:]], kind="mergesort")]  # strongest first
    for first_round in range(1, -1, -1):  # those with the highest partial sums first: they raise the floor
        for i in range(count):
            value = found_partial[i]
            if (value >= ahead) != (first_round == 1) or (value + left) * (1 + MARGIN) < floor:
                continue
            row = found_rows[i]
            if not _may_reach(
                rows, tf, lengths[row], row, lo, hi, weight, bound, weak, value, left, k1, one_minus_b, b, avgdl, floor
            ):
                continue
            score = _score(rows, tf, lengths[row], row, lo, hi, weight, k1, one_minus_b, b, avgdl)
            state[1] += 1
            if score > 0:
                state[0] = _push(heap_score, heap_key, state[0], score, (np.int64(part) << 32) | row)
                if state[0] == k and heap_score[0] > floor:
                    floor = heap_score[0]
    return floor


@_inlined
def _allowed(masks, row):
    """Whether ``row`` passes both masks of ``(live, allowed)`` (an empty mask passes every row)."""
    for mask in masks:
        if len(mask) and not mask[row]:
            return False
    return True


@_inlined
def _sum_strong_terms(
    rows, tf, lengths, masks, lo, hi, weight, bound, order, k1, one_minus_b, b, avgdl, k, floor, partial
):
    """Sum terms in ``order`` into ``partial`` until those left could add at most ``SUM_UNTIL`` of the floor.

    Returns ``(terms summed, their bounds left, floor, ahead)``: the floor raised by the ``k``-th best
    partial sum of each summed term's documents, and ``ahead`` the last such (at least ``k`` documents
    have a partial sum this high; 0 when none).
    """
    left = 0.0  # summed bounds of the terms not yet summed
    for j in range(len(lo)):
        left += bound[j]
    best = np.zeros(k, np.float32)
    block_lengths, block_shares = np.empty(BLOCK, np.float32), np.empty(BLOCK, np.float32)
    summed = held = 0
    while summed < len(lo) and left * (1 + MARGIN) >= SUM_UNTIL * floor:
        j = order[summed]
        summed += 1
        left -= bound[j]
        held = 0
        lowest = np.float32(0)
        for start in range(lo[j], hi[j], BLOCK):
            end = min(start + BLOCK, hi[j])
            block_rows = rows[start:end]
            for p in range(end - start):
                block_lengths[p] = lengths[block_rows[p]]
            _shares(tf[start:end], block_lengths, weight[j], k1, one_minus_b, b, avgdl, block_shares)
            for p in range(end - start):
                row = block_rows[p]
                value = partial[row] + block_shares[p]
                partial[row] = value
                if value > lowest and _allowed(masks, row):
                    held = _push_value(best, held, value)
                    if held == k:
                        lowest = best[0]
        if held == k and best[0] * (1 - MARGIN) > floor:
            floor = np.float32(best[0] * (1 - MARGIN))
    return summed, max(left, 0.0), floor, best[0] if held == k else np.float32(0)


@_inlined
def _candidates(rows, masks, lo, hi, summed, left, floor, partial, found_rows, found_partial):
    """Into ``found_rows`` / ``found_partial``: each document holding a ``summed`` term whose partial sum plus
    ``left`` may reach ``floor``, once (``partial`` is reset to zero as it is read). Returns how many."""
    count = 0
    for j in summed:
        for p in range(lo[j], hi[j]):
            row = rows[p]
            value = partial[row]
            if value == 0:
                continue
            partial[row] = 0
            if (value + left) * (1 + MARGIN) < floor or not _allowed(masks, row):
                continue
            found_rows[count], found_partial[count] = row, value
            count += 1
    return count


@_inlined
def _may_reach(rows, tf, length, row, lo, hi, weight, bound, weak, partial, left, k1, one_minus_b, b, avgdl, floor):
    """Whether a document with ``partial`` from the summed terms may still reach ``floor`` once the ``weak``
    terms (strongest first; their bounds add up to ``left``) are looked up, one at a time."""
    upper, rest = np.float64(partial), left
    for j in weak:
        rest = max(rest - bound[j], 0.0)
        at = _find(rows, lo[j], hi[j], row)
        if at >= 0:
            upper += share(weight[j], tf[at], length, k1, one_minus_b, b, avgdl)
        if (upper + rest) * (1 + MARGIN) < floor:
            return False
    return True


@_inlined
def _score(rows, tf, length, row, lo, hi, weight, k1, one_minus_b, b, avgdl):
    """The exact float32 score of ``row``: its terms' shares added in query order, as the exhaustive scorer adds them."""
    score = np.float32(0)
    for j in range(len(lo)):
        at = _find(rows, lo[j], hi[j], row)
        if at >= 0:
            score += share(weight[j], tf[at], length, k1, one_minus_b, b, avgdl)
    return score


@_inlined
def _push_value(heap, n, value):
    """Add ``value`` to the min-heap of the ``len(heap)`` largest values; returns the new count."""
    k = len(heap)
    if n < k:
        i = n
        n += 1
        while i > 0 and heap[(i - 1) // 2] > value:
            heap[i] = heap[(i - 1) // 2]
            i = (i - 1) // 2
        heap[i] = value
        return n
    if value <= heap[0]:
        return n
    i = 0
    while 2 * i + 1 < k:
        child = 2 * i + 1
        if child + 1 < k and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= value:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = value
    return n
