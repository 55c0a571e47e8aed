"""Dense pseudo-relevance feedback for hybrid search (Rocchio on the query embedding).

A hybrid search fuses its two sides once (``fusion.feedback_fusion``: the search's
strategy at ``fusion.FEEDBACK_ALPHA``), to find the
documents most likely relevant; the query vector then moves toward the chunk
of each of the first ``FEEDBACK_DOCS`` that matches it best::

    q' = normalise(q + FEEDBACK_WEIGHT * mean(best chunks))

and the documents either side found are scored again with ``q'``
(``rescored``) before the fusion that is shown. The feedback comes from the
fused ranking, not the dense one alone (feedback from the dense top alone
lowered a visible collection; docs/benchmarks.md). Rescoring the candidates
both sides already found, rather than searching the index again with ``q'``,
scores as well and reads a few hundred rows instead of a second index scan;
the BM25 side is not run again.
"""

from __future__ import annotations

import numpy as np

from retriever.search import vector_index
from retriever.search.ranking import Ranking, best_documents
from retriever.storage.segment import Segment
from retriever.storage.view import View

FEEDBACK_DOCS = 2  # documents of the first fusion the query moves toward
FEEDBACK_WEIGHT = 0.5  # the mean of their best chunks, added to the unit query vector


def expanded_query(
    view: View, query_vector: np.ndarray, keys: list[int], dense_chunks: dict[int, tuple[int, int]]
) -> np.ndarray:
    """``(1, dim)`` unit vector: ``query_vector`` moved toward the best chunk of each document of ``keys``.

    Args:
        view: The generation searched.
        query_vector: ``(1, dim)`` unit vector.
        keys: Document keys, best first (the first ``FEEDBACK_DOCS`` are used).
        dense_chunks: ``key -> (part, chunk row)`` of the documents the dense side found; the others'
            chunks are scored against the query here.

    Returns:
        The expanded query, or ``query_vector`` itself when no document of ``keys`` is in ``view``.
    """
    query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    chunks = [feedback_chunk(view, key, dense_chunks, query) for key in keys[:FEEDBACK_DOCS]]
    return moved_toward(query_vector, [chunk for chunk in chunks if chunk is not None])


def feedback_chunk(
    view: View, key: int, dense_chunks: dict[int, tuple[int, int]], query: np.ndarray
) -> np.ndarray | None:
    """The ``(dim,)`` vector of document ``key``'s best chunk: the one the dense side found (``dense_chunks``),
    or else its chunk closest to ``query`` ``(dim,)``; ``None`` when ``key`` is not live in ``view``."""
    if key in dense_chunks:
        part, row = dense_chunks[key]
    elif (found := view.find(key)) is not None:
        part, row = found[0], int(best_chunks(view.parts[found[0]].segment, np.asarray([found[1]]), query)[1][0])
    else:
        return None
    return vector_index.reconstruct(view.parts[part].segment.index, np.asarray([row]))[0]


def moved_toward(query_vector: np.ndarray, chunks: list[np.ndarray]) -> np.ndarray:
    """``(1, dim)`` unit vector: ``query_vector`` plus ``FEEDBACK_WEIGHT`` times the mean of ``chunks``
    (``(dim,)`` each, best document first), normalised; ``query_vector`` itself when ``chunks`` is empty."""
    if not chunks:
        return query_vector
    query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    moved = query + FEEDBACK_WEIGHT * np.mean(chunks, axis=0)
    norm = float(np.linalg.norm(moved))
    return query_vector if norm == 0.0 else (moved / norm).astype(np.float32).reshape(1, -1)


def rescored(view: View, query_vector: np.ndarray, dense: Ranking, sparse: Ranking, k: int) -> Ranking:
    """The top ``k`` of the documents ``dense`` and ``sparse`` found, by ``query_vector``'s cosine with their best chunk.

    Args:
        view: The generation both rankings came from (their documents are live and pass the search's filter).
        query_vector: ``(1, dim)`` unit vector, e.g. ``expanded_query``'s.
        dense: A dense ranking (keys to ``(part, chunk row)``).
        sparse: A BM25 ranking (keys to ``(part, document row)``).
        k: Documents kept.

    Returns:
        A dense ranking: every chunk of each document scored exactly (float32 rows), its best one shown.
    """
    by_part: dict[int, set[int]] = {}
    for part, chunk_row in dense[1].values():
        by_part.setdefault(part, set()).add(int(view.parts[part].segment.chunk_doc[chunk_row]))
    for part, doc_row in sparse[1].values():
        by_part.setdefault(part, set()).add(doc_row)
    query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    found = []
    for part, doc_set in sorted(by_part.items()):
        docs = np.fromiter(sorted(doc_set), dtype=np.int64, count=len(doc_set))
        scores, rows = best_chunks(view.parts[part].segment, docs, query)
        found.append((scores, np.full(len(docs), part), docs, rows))
    return best_documents(view, found, k)


def best_chunks(segment: Segment, docs: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each document's best chunk by cosine with ``query`` ``(dim,)``: ``(scores, chunk rows)``, each
    ``(len(docs),)``, for document rows ``docs`` of ``segment`` (every chunk scored exactly; the first on ties)."""
    starts = np.asarray(segment.doc_chunks[docs], dtype=np.int64)
    counts = np.asarray(segment.doc_chunks[docs + 1], dtype=np.int64) - starts
    firsts = np.cumsum(counts) - counts  # where each document's chunks begin among ``rows``
    rows = np.repeat(starts - firsts, counts) + np.arange(int(counts.sum()))
    scores = vector_index.reconstruct(segment.index, rows) @ query
    best = np.lexsort((-scores, np.repeat(np.arange(len(docs)), counts)))[firsts]
    return scores[best], rows[best]
