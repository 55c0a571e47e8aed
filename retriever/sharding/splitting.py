"""An existing collection split into shards without re-embedding: ``split_collection``.

Every live document of the source's committed generation is read from its
segment (text, chunk spans and stored chunk vectors) and its catalog row
(id, title, metadata, language), staged in the shard ``placement.shard_of``
names and committed there, a batch at a time, the shards side by side. The
chunks keep their spans and vectors, so the split collection searches as
the source does (``sharding.search``); the source is only read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from retriever.collection import Collection
from retriever.document_languages import with_languages
from retriever.documents import Document
from retriever.encoding.passages import Embedded
from retriever.errors import BadInputError
from retriever.search.vector_index import reconstruct
from retriever.sharding.collection import ShardedCollection
from retriever.sharding.parallel import in_parallel
from retriever.sharding.placement import routed
from retriever.storage.catalog import StoredDocument
from retriever.storage.cleanup import remove_files
from retriever.storage.staging import stage
from retriever.storage.view import View

#: Documents read from the source and committed to the shards at a time.
SPLIT_BATCH_DOCS = 512

Stored = tuple[Document, StoredDocument, Embedded]  # a document, its catalog row, its chunks


def split_collection(
    source: str | os.PathLike | Collection, dest: str | os.PathLike, shards: int, *, batch_docs: int = SPLIT_BATCH_DOCS
) -> ShardedCollection:
    """A new sharded collection at ``dest`` holding the source's documents, chunks and vectors, in ``shards`` shards.

    Args:
        source: A collection (or its directory), read at its committed generation; left as it is.
        dest: The new sharded collection's directory (it may exist if empty).
        shards: How many shards.
        batch_docs: Documents per commit of each batch (default ``SPLIT_BATCH_DOCS``).

    Returns:
        The sharded collection, open. It has the source's model, chunking, index, merge and language
        settings and its search settings; ids, titles, metadata and languages are kept.

    Raises:
        BadInputError: ``dest`` is not an empty directory, ``shards`` or ``batch_docs`` is out of range.
        CollectionNotFoundError: ``source`` holds no collection.
    """
    if isinstance(batch_docs, bool) or not isinstance(batch_docs, int) or batch_docs < 1:
        raise BadInputError(f"batch_docs must be a positive whole number, got {batch_docs!r}")
    opened = source if isinstance(source, Collection) else Collection.open(source)
    try:
        split = ShardedCollection.create(dest, opened.embedder, shards=shards, **_settings_of(opened))
        split.choose_search_settings(**opened.search_settings())
        view = opened.reader.current()
        model = opened.models.model_at(view.generation)["sha256"]
        for batch in _batches(opened, view, model, batch_docs):
            _write(split, batch)
        return split
    finally:
        if opened is not source:
            opened.close()


def _settings_of(collection: Collection) -> dict[str, Any]:
    """The ``Collection.create`` keywords that give a new collection ``collection``'s settings."""
    chunking = collection.manifest.chunking
    analyzer = collection.analyzer
    return {
        "window_tokens": chunking["window_tokens"],
        "overlap_tokens": chunking["overlap_tokens"],
        "title_prefix": chunking["title_prefix"],
        "index_policy": collection.index_policy,
        "merge_policy": collection.merge_policy,
        "language": analyzer.default_language,
        "detect_languages": analyzer.detect,
    }


def _batches(collection: Collection, view: View, model: str, size: int) -> Iterator[list[Stored]]:
    """The live documents of ``view``, ``size`` at a time, with their catalog rows and stored chunks."""
    for part in view.parts:
        segment = part.segment
        rows = np.arange(segment.n_docs) if part.live_docs is None else np.flatnonzero(part.live_docs)
        for start in range(0, len(rows), size):
            some = rows[start : start + size]
            keys = [int(key) for key in segment.keys[some]]
            catalog_rows = collection.catalog.by_keys(keys)
            batch = []
            for row, key in zip(some.tolist(), keys):
                stored = catalog_rows.get(key)
                if stored is None:  # deleted since the view was read
                    continue
                lo, hi = int(segment.doc_chunks[row]), int(segment.doc_chunks[row + 1])
                vectors = np.array(reconstruct(segment.index, np.arange(lo, hi, dtype=np.int64)), dtype=np.float32)
                spans = [(int(a), int(b)) for a, b in segment.spans[lo:hi]]
                document = Document(id=stored.id, text=segment.text(row), title=stored.title, metadata=stored.meta)
                batch.append((document, stored, Embedded(spans, vectors, model)))
            if batch:
                yield batch


def _write(split: ShardedCollection, batch: list[Stored]) -> None:
    """Stage ``batch`` in its shards and commit each shard's part, the shards side by side."""
    groups = routed([document.id for document, _, _ in batch], len(split.shards))

    def write(item: tuple[int, list[int]]) -> None:
        shard = split.shards[item[0]]
        some = [batch[p] for p in item[1]]
        docs = with_languages([d for d, _, _ in some], {row.id: row for _, row, _ in some}, shard.analyzer)
        embedded = {d.id: chunks for d, _, chunks in some}
        folder: list[Path] = []
        try:
            with shard.analyzer.writing(docs):
                folder.append(stage(shard.root, docs, embedded, shard.analyzer, shard.index_policy))
            shard.commit_prepared(folder)
        finally:
            remove_files(folder)

    in_parallel(write, list(groups.items()))
