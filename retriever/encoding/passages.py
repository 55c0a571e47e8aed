"""Documents into chunk vectors: the encoding half of a write.

Each document is tokenised once, split into overlapping windows by the
``Chunker``, and every window embedded in one ``Embedder`` call over token
ids; or, when the caller brings its own vectors, stored as one chunk
spanning its text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from retriever.documents import Document
from retriever.encoding.chunking import Chunker
from retriever.encoding.embedder import Embedder


@dataclass
class Embedded:
    """A document's chunks: character spans ``[(start, end)]`` and their ``(chunks, dim)`` vectors.

    ``model`` is the weights hash of the model that embedded them (``None``: vectors of the caller's).
    """

    spans: list[tuple[int, int]]
    vectors: np.ndarray
    model: str | None = None


def embed_documents(docs: Sequence[Document], chunker: Chunker, embedder: Embedder) -> dict[str, Embedded]:
    """Chunk and embed ``docs``; returns ``{id: Embedded}``."""
    if not docs:
        return {}
    splits = [chunker.split(doc) for doc in docs]  # each document tokenised once
    vectors = embedder.embed_token_ids([chunk.token_ids for chunk_list in splits for chunk in chunk_list])
    out, at = {}, 0
    for doc, chunk_list in zip(docs, splits):
        out[doc.id] = Embedded(
            [(c.start, c.end) for c in chunk_list], vectors[at : at + len(chunk_list)], embedder.weights_sha256
        )
        at += len(chunk_list)
    return out


def given_vectors(docs: Sequence[Document], batch: Sequence[Document], vectors: np.ndarray) -> dict[str, Embedded]:
    """``docs`` as one chunk each, with their rows of ``vectors`` ``(len(batch), dim)``, row-aligned with ``batch``."""
    row_of = {doc.id: i for i, doc in enumerate(batch)}
    return {doc.id: Embedded([(0, len(doc.text))], vectors[row_of[doc.id] : row_of[doc.id] + 1]) for doc in docs}
