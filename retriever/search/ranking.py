"""Rankings over one generation's view: documents by their best chunk, or by BM25.

A ranking is ``[(key, score)]`` by descending score, one entry per document
(integer document keys, as ``fusion.fuse`` takes them), and a map from each
key to where its evidence lies: ``(part, chunk row)`` for dense, ``(part,
document row)`` for BM25.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from retriever import deadline
from retriever.search import vector_index
from retriever.search.bm25 import bm25_idf, bm25_top
from retriever.search.bm25_statistics import BM25Statistics
from retriever.storage.paging import read_rows_ahead
from retriever.storage.segment import Segment
from retriever.storage.view import View

Ranking = tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]
#: Queries whose terms have fewer postings than this are scored exhaustively (numpy); others skip the
#: postings of terms too weak to matter (``bm25_maxscore``, compiled). Both give the same documents and
#: scores (both timed on benchmarks/scale.py's collections: docs/benchmarks.md). Below this, a small
#: collection's process need not load numba.
SKIP_MIN_POSTINGS = 200_000
#: Chunks a part fetches beyond twice its share of the top k (``_share_to_fetch``).
SHARE_SLACK = 3


def dense_rankings(
    view: View,
    query_vectors: np.ndarray,
    k: int,
    allowed: list[np.ndarray] | None,
    exact: bool,
    policy: vector_index.IndexPolicy,
    recall_k: int | None = None,
) -> list[Ranking]:
    """Top ``k`` documents by their best chunk's cosine, for each row of ``query_vectors`` ``(q, dim)``.

    One index search per segment serves every query; a segment is searched
    again, wider, only for queries still short of ``k`` distinct documents.
    Where segments are many, each first fetches about its share of the top
    ``k`` (``_share_to_fetch``; an IVF probes fewer lists for it:
    ``ivf_tuning.probed_lists``), and one whose every fetched chunk ranks
    among the ``k`` found is searched again to its full depth and tuned
    lists. Segments with int8 rows return int8 estimates (``rescoring``); the
    best ``exact_depth`` chunks of all segments together are then scored from
    float32, so shown scores are exact and a search reads few float32 rows.
    ``allowed`` is a per-part mask of documents a filter lets through.
    ``recall_k`` (default ``k``) is how deep recall matters: a hybrid search
    fuses 100 documents a side but shows ``k``.
    """
    n = len(query_vectors)
    if exact:
        policy = dataclasses.replace(policy, exact_max_rows=1 << 62)  # every filtered segment gathers its rows
    searches = []
    for i, part in enumerate(view.parts):
        segment = part.segment
        mask = part.live_chunks if allowed is None else allowed[i][segment.chunk_doc]
        available = part.n_live_chunks if mask is part.live_chunks else int(mask.sum())
        if available == 0:
            continue
        if exact and mask is None and segment.index_type != vector_index.FLAT:
            mask = np.ones(segment.n_chunks, dtype=bool)
        searches.append((i, part, mask, available))
    total = sum(search[3] for search in searches)
    found: list[dict[int, tuple[np.ndarray, ...]]] = [{} for _ in range(n)]  # per query, part: score, part, doc, chunk
    shallow = []
    for i, part, mask, available in searches:
        deadline.check("the search")
        fetch = min(available, _chunks_to_fetch(part, k))
        share = fetch if exact else min(fetch, _share_to_fetch(part, k, available / total))
        if share < fetch:
            shallow.append(((i, part, mask, available), fetch, share))
        _search_part(
            found,
            list(range(n)),
            (i, part, mask, available),
            share,
            k,
            query_vectors,
            policy,
            recall_k or k,
            widen=share == fetch,
            exact=exact,
            rows_share=available / total if share < fetch else 1.0,
        )
    if shallow:  # a part may hold more of the top k than its share: search it again in full
        kth = [_kth_score(parts, k) for parts in found]
        for search, fetch, share in shallow:
            i = search[0]
            deeper = [q for q in range(n) if found[q][i][4] == share and found[q][i][5] >= kth[q]]
            if deeper:
                deadline.check("the search")
                _search_part(found, deeper, search, fetch, k, query_vectors, policy, recall_k or k, widen=True)
    depth = 0 if exact else exact_depth(recall_k or k)  # an exact search's scores are float32's already
    return [
        best_documents(view, _made_exact(view, [entry[:4] for entry in parts.values()], query, depth), k)
        for parts, query in zip(found, query_vectors)
    ]


def exact_depth(recall_k: int) -> int:
    """How many of a search's best chunks by int8 estimate are scored exactly: twice the documents recall is
    wanted for, and 10 more (an int8 estimate is close to the exact score; the order past them matters little)."""
    return 2 * recall_k + 10


def _made_exact(view: View, found: list[tuple[np.ndarray, ...]], query: np.ndarray, depth: int):
    """``found`` (per part: score, part, doc row, chunk row) with the best ``depth`` estimated scores
    replaced by exact inner products with ``query`` ``(dim,)``, in one entry."""
    if depth == 0 or not any(_estimated(view.parts[int(entry[1][0])]) for entry in found if len(entry[1])):
        return found
    scores, part_of, doc_rows, chunk_rows = (np.concatenate(column) for column in zip(*found))
    scores = scores.copy()
    top = np.argsort(-scores, kind="stable")[:depth]
    estimated = [(int(i), top[part_of[top] == i]) for i in np.unique(part_of[top]) if _estimated(view.parts[int(i)])]
    for i, at in estimated:  # every segment's rows asked for at once: the disk reads them side by side
        read_rows_ahead(view.parts[i].segment.index.rows, chunk_rows[at])
    for i, at in estimated:
        scores[at] = vector_index.exact_scores(view.parts[i].segment.index, chunk_rows[at], query, read_rows=False)
    return [(scores, part_of, doc_rows, chunk_rows)]


def _search_part(found, pending, search, fetch, k, query_vectors, policy, recall_k, widen, exact=False, rows_share=1.0):
    """Search one part for the queries ``pending``, recording in ``found[q][part]`` its best chunk of each
    document, the number of chunks the search returned and the lowest of their scores. With ``widen``, a
    query short of ``k`` distinct documents is searched again, four times deeper, until the part is
    exhausted. Unless ``exact``, compressed parts return int8 estimates (``vector_index.search``).
    ``rows_share``: the part's share of the rows searched, where it fetches only its share of the top ``k``
    (an IVF then probes fewer lists: ``ivf_tuning.probed_lists``)."""
    i, part, mask, available = search
    segment = part.segment
    while pending:
        scores, rows = vector_index.search(
            segment.index,
            query_vectors[pending],
            fetch,
            mask,
            available,
            policy,
            recall_k,
            estimates=not exact,
            share=rows_share,
        )
        short = []
        for row, q in enumerate(pending):
            valid = rows[row] >= 0
            chunk_rows, chunk_scores = rows[row][valid], scores[row][valid]
            docs = segment.chunk_doc[chunk_rows]
            _, first = np.unique(docs, return_index=True)
            if not widen or len(first) >= k or fetch >= available:
                lowest = float(chunk_scores.min()) if len(chunk_scores) else np.inf
                found[q][i] = (
                    chunk_scores[first],
                    np.full(len(first), i),
                    docs[first],
                    chunk_rows[first],
                    len(chunk_rows),
                    lowest,
                )
            else:
                short.append(q)
        pending, fetch = short, min(available, fetch * 4)


def _estimated(part) -> bool:
    """Whether a part's dense scores may be int8 estimates (compressed codes with int8 rows)."""
    return part.segment.index.int8 is not None


def _kth_score(found: dict, k: int) -> float:
    """The ``k``-th best document score among the parts' ``found``, or -inf where fewer were found. A part
    that returned all its share of chunks, the lowest scoring at least this, may hold more of the top ``k``."""
    scores = np.concatenate([entry[0] for entry in found.values()]) if found else np.zeros(0)
    return float(np.partition(scores, len(scores) - k)[len(scores) - k]) if len(scores) >= k else -np.inf


def _chunks_to_fetch(part, k: int) -> int:
    """Chunks to fetch first for ``k`` distinct documents of ``part``: ``k`` times its chunks per live
    document (at most 4), and 16 more; a search still short of ``k`` documents widens. Fetching
    ``4 k`` everywhere cost a hybrid search (100 a side) 1,200 rescored rows per segment where
    documents are one chunk long."""
    return int(np.ceil(k * _chunks_per_document(part))) + 16


def _share_to_fetch(part, k: int, share: float) -> int:
    """Chunks to fetch first from ``part`` holding ``share`` of the rows searched: twice the chunks its
    share of the top ``k`` documents would hold, and ``SHARE_SLACK`` more. With twenty equal parts and
    ``k`` 10, a part holds at least 4 of the top 10 (and is searched again in full) once in a thousand
    queries; each asks its codes for 100 candidates rather than 250 to 450."""
    return int(np.ceil(2 * k * _chunks_per_document(part) * share)) + SHARE_SLACK


def _chunks_per_document(part) -> float:
    return min(4.0, max(1.0, part.n_live_chunks / max(part.n_live_docs, 1)))


def best_documents(view: View, found: list[tuple[np.ndarray, ...]], k: int) -> Ranking:
    """The ``k`` best of the segments' candidates ``(score, part, doc row, chunk row)``, by key."""
    if not found:
        return [], {}
    scores, part_of, doc_rows, chunk_rows = (np.concatenate(column) for column in zip(*found))
    best = np.argsort(-scores, kind="stable")[:k]  # ties keep segment order, then row order
    ranked, where = [], {}
    for score, i, doc_row, chunk_row in zip(
        scores[best].tolist(), part_of[best].tolist(), doc_rows[best].tolist(), chunk_rows[best].tolist()
    ):
        key = int(view.parts[i].segment.keys[doc_row])
        ranked.append((key, score))
        where[key] = (i, chunk_row)
    return ranked, where


def bm25_ranking(
    view: View,
    terms: Sequence[str],
    k: int,
    allowed: list[np.ndarray] | None,
    k1: float,
    b: float,
    statistics: BM25Statistics | None = None,
) -> Ranking:
    """Top ``k`` documents by BM25 over ``terms``, with collection-wide statistics, and their rows.

    ``statistics``: those of a collection larger than ``view`` (its shards together, ``bm25_statistics``);
    default ``None``: the view's own.
    """
    parts = [
        (p.segment.postings, p.segment.doc_lengths, p.live_docs, None if allowed is None else allowed[i])
        for i, p in enumerate(view.parts)
    ]
    totals = (view.n_live_docs, view.live_length) if statistics is None else statistics.totals
    df = None if statistics is None else statistics.df
    if _postings_of(view, terms) >= SKIP_MIN_POSTINGS:
        from retriever.search.bm25_maxscore import bm25_top_maxscore  # loads numba, for large views only

        bounds = [p.segment.range_bounds for p in view.parts]
        deleted = [p.deleted if p.live_docs is not None else None for p in view.parts]
        top = bm25_top_maxscore(parts, bounds, list(terms), k, k1, b, totals=totals, deleted=deleted, df=df)
    else:
        top = bm25_top(parts, list(terms), k, k1, b, totals=totals, df=df)
    ranked, rows = [], {}
    for i, row, score in top:
        key = int(view.parts[i].segment.keys[row])
        ranked.append((key, score))
        rows[key] = (i, row)
    return ranked, rows


def _postings_of(view: View, terms: Sequence[str]) -> int:
    """How many postings ``terms`` have in the view's segments (deleted rows included)."""
    total = 0
    for part in view.parts:
        postings = part.segment.postings
        for term in set(terms):
            at = postings.vocabulary.get(term)
            if at is not None:
                total += int(postings.indptr[at + 1] - postings.indptr[at])
    return total


def keyword_chunk(segment: Segment, doc_row: int, terms: Sequence[str]) -> int:
    """The chunk of ``doc_row`` holding the most distinct ``terms`` (the first on ties)."""
    lo, hi = int(segment.doc_chunks[doc_row]), int(segment.doc_chunks[doc_row + 1])
    if hi - lo == 1 or not terms:
        return lo
    counts = np.zeros(hi - lo, dtype=np.int64)
    for term in terms:
        rows, _ = segment.chunk_terms.of(term)
        a, b = np.searchsorted(rows, [lo, hi])
        counts[np.asarray(rows[a:b]) - lo] += 1
    return lo + int(np.argmax(counts))


def term_idf(view: View, terms: Sequence[str]) -> dict[str, float]:
    """BM25's ``idf`` of each of ``terms`` over the view's documents (deleted rows still counted: for display only)."""
    df = dict.fromkeys(terms, 0)
    for part in view.parts:
        postings = part.segment.postings
        vocabulary = postings.vocabulary
        for term in terms:
            at = vocabulary.get(term)
            if at is not None:
                df[term] += int(postings.indptr[at + 1] - postings.indptr[at])
    n = max(view.n_live_docs, max(df.values(), default=0))
    return dict(zip(df, bm25_idf(n, np.asarray(list(df.values()), dtype=np.float64)).tolist()))
