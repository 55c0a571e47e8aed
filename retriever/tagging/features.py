"""What a tagger sees of a document: one vector pooled from its stored chunk vectors, or its words.

A document's vector is the mean of its chunks' vectors, normalised to unit
length. Each chunk vector is already the model's mean-pooled embedding of one
window (title in front when the collection embeds titles), so every window
counts the same and a long document is the average of what it says; no text
is encoded again. Free-text examples are chunked and embedded as a document
would be, then pooled the same way.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from retriever.documents import Document
from retriever.encoding.chunking import Chunker
from retriever.encoding.embedder import Embedder
from retriever.encoding.passages import embed_documents
from retriever.search import vector_index
from retriever.storage.segment import Segment
from retriever.storage.view import View

BATCH_DOCS = 4096  # documents pooled at a time: bounds the chunk vectors held at once


def pool(vectors: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Unit means of consecutive groups of rows.

    Args:
        vectors: ``(sum(counts), dim)`` float32 chunk vectors, grouped by document.
        counts: ``(docs,)`` chunks per document, each at least 1.

    Returns:
        ``(docs, dim)`` float32, rows of unit norm (a zero mean stays zero).
    """
    counts = np.asarray(counts, dtype=np.int64)
    if len(counts) == 0:
        return np.zeros((0, vectors.shape[1]), dtype=np.float32)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sums = np.add.reduceat(np.asarray(vectors, dtype=np.float32), starts, axis=0)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0).astype(np.float32)


def segment_vectors(segment: Segment, rows: np.ndarray) -> np.ndarray:
    """Pooled vectors of document ``rows`` of ``segment``: ``(len(rows), dim)`` float32 unit rows."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.zeros((len(rows), int(segment.meta["dim"])), dtype=np.float32)
    for at in range(0, len(rows), BATCH_DOCS):
        batch = rows[at : at + BATCH_DOCS]
        lo, hi = segment.doc_chunks[batch], segment.doc_chunks[batch + 1]
        counts = hi - lo
        firsts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
        chunk_rows = firsts + np.arange(int(counts.sum()), dtype=np.int64)
        out[at : at + len(batch)] = pool(vector_index.reconstruct(segment.index, chunk_rows), counts)
    return out


def segment_texts(segment: Segment, rows: Sequence[int], titles: Sequence[str]) -> list[str]:
    """``title + "\\n" + text`` of document ``rows`` of ``segment`` (what TF-IDF reads)."""
    return [f"{title}\n{segment.text(int(row))}" for row, title in zip(rows, titles)]


def live_rows(view: View) -> Iterator[tuple[Segment, np.ndarray, np.ndarray]]:
    """``(segment, live document rows, their keys)`` for each part of ``view`` (each read ahead whole: the
    caller passes over all of them)."""
    for part in view.parts:
        rows = np.arange(part.segment.n_docs, dtype=np.int64)
        if part.live_docs is not None:
            rows = rows[part.live_docs]
        if len(rows):
            part.segment.read_ahead()
            yield part.segment, rows, np.asarray(part.segment.keys[rows])


def text_vectors(texts: Sequence[tuple[str, str]], chunker: Chunker, embedder: Embedder) -> np.ndarray:
    """Pooled vectors of free ``(title, text)`` pairs, chunked and embedded as documents: ``(n, dim)``."""
    docs = [Document(id=f"example-{i}", text=text, title=title) for i, (title, text) in enumerate(texts)]
    embedded = embed_documents(docs, chunker, embedder)
    if not docs:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    vectors = np.concatenate([embedded[doc.id].vectors for doc in docs])
    return pool(vectors, np.asarray([len(embedded[doc.id].spans) for doc in docs]))
