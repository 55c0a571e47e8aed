"""``Collection``: one directory holding a manifest, a SQL catalog and immutable segments.

The facade users touch from Python::

    col = Collection.create("notes")                     # packaged MiniLM by default
    col.upsert([{"id": "a", "text": "...", "metadata": {"lang": "en"}}])
    hits = col.search("what was said about X", k=5, where={"lang": "en"})
    col.delete(["a"])

A commit writes one new segment (``retriever.segment``) and new deletion
files for the segments it touches, fsyncs them, and then publishes the
generation in one SQL transaction that also changes the document rows. A
crash before that transaction leaves the previous generation in force, and
the next writer removes the unreferenced files. After a commit, a bounded
merge may fold small segments together (``retriever.merging``).

Searches run in memory: the segments are memory-mapped, a ``HEAD`` file's
identity tells a reader that a new generation was published, and the
catalog is asked once per search, for the hits' display fields (and once
more for a filter's matching keys).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import socket
import threading
import time
import uuid
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
from filelock import FileLock, Timeout

from retriever import deadline, validation, vector_index
from retriever.atomic import atomic_write_text, fsync_dir, write_durably
from retriever.batching import MicroBatcher
from retriever.bm25 import DEFAULT_B, DEFAULT_K1, Analyzer, bm25_top
from retriever.catalog import Catalog, CatalogState, DocumentRow, Publish, SegmentRef, StoredDocument
from retriever.catalog_url import for_manifest as catalog_url_for_manifest
from retriever.chunking import Chunker
from retriever.documents import Document, Hit, coerce_document
from retriever.embedder import Embedder
from retriever.errors import (
    BadInputError,
    CollectionLockedError,
    CorruptCollectionError,
    DeadlineExceededError,
    ModelMismatchError,
)
from retriever.fusion import DEFAULT_ALPHA, DEFAULT_FUSION, FUSIONS, fuse
from retriever.manifest import DEFAULT_CATALOG, MANIFEST, Manifest
from retriever.merging import MergePolicy
from retriever.segment import SEGMENTS_DIR, Segment, SegmentData, deletion_file, merge, segment_name, write_deletions
from retriever.view import SegmentView, View, load_view, refs

LOCK_FILE = ".write.lock"
HEAD_FILE = "HEAD"
STAGED_PREFIX = ".staged-"  # segments written by prepare(), not yet committed
STAGED_ROWS = "documents.json"  # their catalog rows, beside them until the commit
STAGED_MAX_AGE = 24 * 3600  # a staged folder this old, or whose process died, was left by a killed job
DEFAULT_OVERLAP = 32
DEFAULT_MODE = "hybrid"
HYBRID_DEPTH = 100  # documents taken from each side before fusing
_OWN_FILES = {MANIFEST, DEFAULT_CATALOG, LOCK_FILE, SEGMENTS_DIR, HEAD_FILE}


@dataclass
class WriteReport:
    """What one write did.

    Attributes:
        added: Ids that were new.
        updated: Ids whose content changed and were replaced.
        unchanged: Ids whose content hash matched; no work was done.
        deleted: Ids removed.
        chunks: Chunks embedded and written.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    chunks: int = 0

    def merge(self, other: "WriteReport") -> None:
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.chunks += other.chunks


@dataclass
class _Embedded:
    """A document's chunks: character spans and their vectors."""

    spans: list[tuple[int, int]]
    vectors: np.ndarray


class Collection:
    """A searchable set of documents in one directory. Use ``create`` or ``open``."""

    SEARCH_MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")

    def __init__(self, root: Path, manifest: Manifest, embedder: Embedder | None, lock_timeout: float):
        self.root = Path(root)
        self.manifest = manifest
        self._embedder = embedder
        self._chunker: Chunker | None = None
        self.catalog = Catalog(manifest.catalog_location(self.root))
        self._lock = FileLock(str(self.root / LOCK_FILE), timeout=lock_timeout)
        self._lock_timeout = lock_timeout
        self._view: View | None = None
        self._head_seen: tuple | None = None
        self._reload = threading.Lock()
        self._dense_batcher: MicroBatcher | None = None  # see batch_searches
        self.analyzer = Analyzer(manifest.bm25["stemmer"], manifest.bm25["stopwords"])
        self.index_policy = vector_index.IndexPolicy.from_dict(manifest.index.get("policy"))
        self.merge_policy = MergePolicy.from_dict(manifest.index.get("merge"))
        catalog_uuid = self.catalog.state().collection_uuid
        if catalog_uuid != manifest.uuid:
            raise CorruptCollectionError(
                f"catalog {self.catalog._safe_url()} belongs to collection {catalog_uuid}, "
                f"not to {self.root} ({manifest.uuid})"
            )

    # -- construction -----------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        model: str | os.PathLike | Embedder | None = None,
        *,
        catalog_url: str | None = None,
        window_tokens: int | None = None,
        overlap_tokens: int | None = None,
        title_prefix: bool = True,
        index_policy: vector_index.IndexPolicy | None = None,
        merge_policy: MergePolicy | None = None,
        lock_timeout: float = 60.0,
    ) -> "Collection":
        """Create an empty collection directory.

        Args:
            path: Directory to create (it may exist if empty).
            model: Model directory, hub id, ``Embedder``, or ``None`` for the
                packaged all-MiniLM-L6-v2.
            catalog_url: SQLAlchemy URL of the catalog; default a SQLite file
                inside the directory.
            window_tokens: Tokens per chunk (default: the model's window less
                its two special tokens).
            overlap_tokens: Tokens shared by consecutive chunks (default 32,
                or a quarter of the window when that is smaller).
            title_prefix: Embed each chunk with its document's title in front.
            index_policy: Which vector index a segment gets by its size
                (default ``IndexPolicy()``: exact below 32,768 chunks, IVF above).
            merge_policy: When segments merge (default ``MergePolicy()``).
        """
        validation.check_create_args(path, model, window_tokens, overlap_tokens, title_prefix, lock_timeout)
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise BadInputError(f"cannot create a collection at {root}: it is a file")
        if (root / MANIFEST).exists():
            raise BadInputError(f"a collection already exists at {root}")
        if root.is_dir():
            foreign = {p.name for p in root.iterdir()} - _OWN_FILES
            foreign = {name for name in foreign if not name.startswith(DEFAULT_CATALOG) and name != "index"}
            if foreign:
                raise BadInputError(
                    f"cannot create a collection at {root}: the directory is not empty "
                    f"({', '.join(sorted(foreign)[:3])}...)"
                )
            _remove_partial_collection(root)
        embedder = model if isinstance(model, Embedder) else Embedder(model)
        window = window_tokens or embedder.max_tokens - 2
        if window > embedder.max_tokens - 2:
            raise BadInputError(f"chunk window of {window} tokens exceeds the model's {embedder.max_tokens - 2}")
        if overlap_tokens is None:
            overlap_tokens = min(DEFAULT_OVERLAP, window // 4)
        chunker = Chunker(embedder.text_tokenizer, window, overlap_tokens, title_prefix)
        manifest = Manifest(
            uuid=str(uuid.uuid4()),
            created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            model=embedder.identity(),
            chunking=chunker.settings(),
            index={
                "library": "faiss",
                "metric": "inner_product",
                "policy": (index_policy or vector_index.IndexPolicy()).to_dict(),
                "merge": (merge_policy or MergePolicy()).to_dict(),
            },
            bm25={"k1": DEFAULT_K1, "b": DEFAULT_B, "stemmer": "porter", "stopwords": "en", "fields": "title+text"},
            catalog_url=catalog_url_for_manifest(catalog_url),  # the password is kept in memory only
        )
        root.mkdir(parents=True, exist_ok=True)
        (root / SEGMENTS_DIR).mkdir(exist_ok=True)
        Catalog(manifest.catalog_location(root)).create(manifest.uuid)
        write_head(root, 0)
        manifest.save(root)  # last: a directory without a manifest is not a collection
        collection = cls(root, manifest, embedder, lock_timeout)
        collection._chunker = chunker
        return collection

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        model: str | os.PathLike | Embedder | None = None,
        *,
        lock_timeout: float = 60.0,
    ) -> "Collection":
        """Open an existing collection.

        Args:
            path: The collection directory.
            model: Optional model to use; it must be the one the collection was
                built with (same weights), else ``ModelMismatchError``. By
                default the manifest's model is loaded when first needed.
        Raises:
            FormatVersionError: The collection has an older format (``semsearch upgrade`` converts it).
        """
        validation.check_open_args(path, model, lock_timeout)
        root = Path(path)
        manifest = Manifest.load(root)
        embedder = None
        if model is not None:
            embedder = model if isinstance(model, Embedder) else Embedder(model)
            _check_model(root, manifest, embedder)
        return cls(root, manifest, embedder, lock_timeout)

    @classmethod
    def open_or_create(cls, path: str | os.PathLike, model=None, **kwargs) -> "Collection":
        """``open`` when ``path`` holds a collection, else ``create``."""
        if (Path(path) / MANIFEST).exists():
            return cls.open(path, model, lock_timeout=kwargs.get("lock_timeout", 60.0))
        return cls.create(path, model, **kwargs)

    def close(self) -> None:
        self.catalog.close()

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Collection({str(self.root)!r}, model={self.manifest.model['name']!r})"

    # -- model ------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """The collection's embedder, loaded (and checked) on first use."""
        if self._embedder is None:
            embedder = Embedder(self.manifest.model["name"])
            _check_model(self.root, self.manifest, embedder)
            self._embedder = embedder
        return self._embedder

    @property
    def chunker(self) -> Chunker:
        if self._chunker is None:
            settings = self.manifest.chunking
            self._chunker = Chunker(
                self.embedder.text_tokenizer,
                settings["window_tokens"],
                settings["overlap_tokens"],
                settings["title_prefix"],
            )
        return self._chunker

    def batch_searches(self, max_batch: int = 32, max_wait_s: float = 0.001) -> None:
        """Scan the vectors once for concurrent searches, for servers: one index search per segment for a batch.

        The dense side of searches without a filter (and not ``exact``), from any number of
        threads, meets in a ``retriever.batching.MicroBatcher`` (up to
        ``max_batch`` query vectors; searches that queue while a batch runs
        make the next one, and it waits ``max_wait_s`` for more only while
        searches arrive together). The query vectors themselves come from the
        embedder, whose ``batch_queries`` encodes concurrent queries in one
        call; the keyword side of a hybrid search runs in the caller's thread
        while its batch scans. Each search gets the hits it would get alone.
        """
        if self._dense_batcher is None:
            self._dense_batcher = MicroBatcher(self._dense_batch, max_batch, max_wait_s)

    def _dense_batch(self, items: list[tuple[View, np.ndarray, int]]) -> list:
        """Dense rankings of ``(view, query vector (1, dim), depth)`` items, each group of one view and depth at once."""
        groups: dict[tuple[int, int], list[int]] = {}
        for position, (view, _, depth) in enumerate(items):
            groups.setdefault((id(view), depth), []).append(position)
        results: list = [None] * len(items)
        for positions in groups.values():
            view, _, depth = items[positions[0]]
            vectors = np.concatenate([items[p][1] for p in positions])
            for position, ranking in zip(positions, self._dense_rankings(view, vectors, depth, None, False)):
                results[position] = ranking
        return results

    def embed(self, texts: Sequence[str] | str, **kwargs) -> np.ndarray:
        """Embed texts with the collection's model; see ``Embedder.embed``."""
        texts = validation.check_texts(texts)
        return self.embedder.embed(texts, **kwargs)

    # -- reads ------------------------------------------------------------
    def __len__(self) -> int:
        return self.catalog.counts()[0]

    def __contains__(self, doc_id: str) -> bool:
        validation.check_id_arg(doc_id)
        return bool(self.catalog.lookup([doc_id]))

    def ids(self) -> Iterator[str]:
        """Every document id, sorted."""
        return self.catalog.iter_ids()

    def get(self, doc_id: str) -> Document | None:
        """The stored document, or ``None``."""
        validation.check_id_arg(doc_id)
        row = self.catalog.lookup([doc_id]).get(doc_id)
        if row is None:
            return None
        view = self._current()
        found = view.find(row.key)
        if found is None:  # replaced or deleted since the catalog was read
            return self.get(doc_id) if self._current() is not view else None
        part, doc_row = found
        return Document(id=row.id, text=view.parts[part].segment.text(doc_row), title=row.title, metadata=row.meta)

    def chunk_spans(self, doc_id: str) -> list[tuple[int, int]]:
        """Character spans of a document's chunks, in order (empty if the id is unknown)."""
        validation.check_id_arg(doc_id)
        row = self.catalog.lookup([doc_id]).get(doc_id)
        found = self._current().find(row.key) if row is not None else None
        if found is None:
            return []
        segment = self._current().parts[found[0]].segment
        lo, hi = segment.doc_chunks[found[1]], segment.doc_chunks[found[1] + 1]
        return [(int(s), int(e)) for s, e in segment.spans[lo:hi]]

    def search(
        self,
        query: str | None = None,
        k: int = 10,
        where: dict[str, Any] | None = None,
        mode: str = DEFAULT_MODE,
        *,
        vector: Sequence[float] | np.ndarray | None = None,
        fusion: str = DEFAULT_FUSION,
        alpha: float = DEFAULT_ALPHA,
        exact: bool = False,
    ) -> list[Hit]:
        """The ``k`` documents that best match ``query`` (or ``vector``).

        Args:
            query: Free text.
            k: Number of documents to return (default 10).
            where: Metadata filter (see ``retriever.filters``); applied before
                ranking, so ``k`` hits come back whenever ``k`` documents match
                (in ``bm25`` mode: match the filter and share a term with the query).
            mode: ``"dense"`` (embedding similarity of the best chunk),
                ``"bm25"`` (keywords over the whole document) or ``"hybrid"``
                (both, fused; the default). With ``vector`` and no ``query``,
                the search is dense.
            vector: A query embedding, ``(dim,)``, used instead of embedding
                ``query`` (normalised as the model's own vectors are).
            fusion: For hybrid: ``"convex"`` (min-max-normalised scores mixed
                by ``alpha``, default) or ``"rrf"`` (reciprocal-rank fusion).
            alpha: Weight of the dense side in the convex combination (default 0.6).
            exact: Search every vector exactly, also in segments that have an
                approximate index (default False).

        Returns:
            Hits by descending score, one per document, each showing its best
            chunk. Scores are cosine similarity (dense), BM25 (bm25) or the
            fused score (hybrid).
        """
        validation.check_search_args(
            query, k, where, mode, self.SEARCH_MODES, fusion, alpha, has_vector=vector is not None, exact=exact
        )
        if query is not None and (not isinstance(query, str) or not query.strip()):
            raise BadInputError("query is empty")
        if vector is not None:
            vector = self._query_vector(vector)
        if query is None and vector is None:
            raise BadInputError("query is empty: give a query text or a query vector")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise BadInputError(f"k must be a positive integer, got {k!r}")
        if mode not in self.SEARCH_MODES:
            raise BadInputError(f"unknown search mode {mode!r}; use one of {', '.join(self.SEARCH_MODES)}")
        if fusion not in FUSIONS:
            raise BadInputError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}")
        if query is None:
            if mode == "bm25":
                raise BadInputError("bm25 search needs a query text; a vector alone searches in dense mode")
            mode = "dense"
        view = self._current()
        allowed = None
        if where is not None:
            keys = self.catalog.matching_keys(where)
            if not len(keys):
                return []
            allowed = [part.allowed_docs(keys) for part in view.parts]
        depth = k if mode != "hybrid" else max(k, HYBRID_DEPTH)
        dense: list[tuple[int, float]] = []
        dense_chunks: dict[int, tuple[int, int]] = {}
        batched = None
        if mode in ("dense", "hybrid"):
            query_vector = vector if vector is not None else self.embedder.embed([query])
            if self._dense_batcher is not None and allowed is None and not exact:
                batched = self._dense_batcher.submit((view, query_vector, depth))  # scanned with concurrent searches
            else:
                dense, dense_chunks = self._dense_ranking(view, query_vector, depth, allowed, exact)
        sparse: list[tuple[int, float]] = []
        sparse_rows: dict[int, tuple[int, int]] = {}
        if mode in ("bm25", "hybrid"):
            sparse, sparse_rows = self._bm25_ranking(view, query, depth, allowed)
        if batched is not None:
            dense, dense_chunks = _batched_result(batched)
        if mode == "dense":
            ranked = dense
        elif mode == "bm25":
            ranked = sparse
        else:
            ranked = fuse(dense, sparse, fusion, alpha)
        return self._hits(view, ranked[:k], dense_chunks, sparse_rows, query)

    def _query_vector(self, vector) -> np.ndarray:
        """A query vector as ``(1, dim)`` float32, unit norm."""
        vectors = _check_vectors(vector, 1, self.manifest.model["dim"], "query vector", single=True)
        return vectors

    def _dense_ranking(
        self, view: View, query_vector: np.ndarray, k: int, allowed: list[np.ndarray] | None, exact: bool
    ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]:
        """Top ``k`` documents (by key) by their best chunk's cosine, and where that chunk is."""
        return self._dense_rankings(view, query_vector, k, allowed, exact)[0]

    def _dense_rankings(
        self, view: View, query_vectors: np.ndarray, k: int, allowed: list[np.ndarray] | None, exact: bool
    ) -> list[tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]]:
        """``_dense_ranking`` for each row of ``query_vectors`` ``(q, dim)``, one index search per segment for all."""
        n = len(query_vectors)
        found: list[list[tuple[np.ndarray, ...]]] = [[] for _ in range(n)]  # per query: score, part, doc row, chunk row
        policy = self.index_policy
        if exact:
            policy = vector_index.IndexPolicy(policy.ann_min_rows, policy.target_recall, exact_max_rows=1 << 62)
        for i, part in enumerate(view.parts):
            deadline.check("the search")
            segment = part.segment
            mask = part.live_chunks
            if allowed is not None:
                mask = allowed[i][segment.chunk_doc]
            available = part.n_live_chunks if mask is part.live_chunks else int(mask.sum())
            if available == 0:
                continue
            if exact and mask is None and segment.index_type != vector_index.FLAT:
                mask = np.ones(segment.n_chunks, dtype=bool)
            fetch = min(available, max(4 * k, k + 16))
            pending = list(range(n))
            while pending:  # widen, for the queries still short of k distinct documents, until nothing is left
                scores, rows = vector_index.search(segment.index, query_vectors[pending], fetch, mask, available, policy)
                short = []
                for row, q in enumerate(pending):
                    valid = rows[row] >= 0
                    chunk_rows, chunk_scores = rows[row][valid], scores[row][valid]
                    docs = segment.chunk_doc[chunk_rows]
                    _, first = np.unique(docs, return_index=True)
                    if len(first) >= k or fetch >= available:
                        found[q].append((chunk_scores[first], np.full(len(first), i), docs[first], chunk_rows[first]))
                    else:
                        short.append(q)
                pending, fetch = short, min(available, fetch * 4)
        return [self._best_documents(view, parts, k) for parts in found]

    @staticmethod
    def _best_documents(
        view: View, found: list[tuple[np.ndarray, ...]], k: int
    ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]:
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

    def _bm25_ranking(
        self, view: View, query: str, k: int, allowed: list[np.ndarray] | None
    ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]:
        """Top ``k`` documents (by key) by BM25 with collection-wide statistics, and their rows."""
        parts = [
            (p.segment.postings, p.segment.doc_lengths, p.live_docs, None if allowed is None else allowed[i])
            for i, p in enumerate(view.parts)
        ]
        settings = self.manifest.bm25
        top = bm25_top(
            parts, self.analyzer(query), k, settings["k1"], settings["b"], totals=(view.n_live_docs, view.live_length)
        )
        ranked, rows = [], {}
        for i, row, score in top:
            key = int(view.parts[i].segment.keys[row])
            ranked.append((key, score))
            rows[key] = (i, row)
        return ranked, rows

    def _hits(
        self,
        view: View,
        ranked: list[tuple[int, float]],
        dense_chunks: dict[int, tuple[int, int]],
        sparse_rows: dict[int, tuple[int, int]],
        query: str | None,
    ) -> list[Hit]:
        """Hits for ranked keys; one catalog read for their display fields.

        Each hit shows its best dense chunk, or (found by keywords alone) the
        chunk holding the most distinct query terms.
        """
        display = self.catalog.by_keys([key for key, _ in ranked])
        keyword_only = query and any(key not in dense_chunks for key, _ in ranked)
        terms = sorted(set(self.analyzer(query))) if keyword_only else []
        hits = []
        for key, score in ranked:
            row = display.get(key)
            if row is None:  # deleted since this view was loaded
                continue
            if key in dense_chunks:
                i, chunk = dense_chunks[key]
            else:
                i, doc_row = sparse_rows[key]
                chunk = _keyword_chunk(view.parts[i].segment, doc_row, terms)
            segment = view.parts[i].segment
            start, end = (int(x) for x in segment.spans[chunk])
            hits.append(Hit(row.id, score, row.title, segment.chunk_text(chunk), start, end, row.meta))
        return hits

    def info(self) -> dict[str, Any]:
        """Counts, model, index and catalog settings, segments, size on disk and last update."""
        n_docs, n_chunks = self.catalog.counts()
        catalog_state = self.catalog.state()
        view = self._current()
        return {
            "path": str(self.root.resolve()),
            "documents": n_docs,
            "chunks": n_chunks,
            "model": self.manifest.model["name"],
            "model_sha256": self.manifest.model["sha256"],
            "dim": self.manifest.model["dim"],
            "chunking": self.manifest.chunking,
            "index": _index_summary(view),
            "index_policy": self.manifest.index,
            "segments": [
                {
                    "name": p.ref.name,
                    "documents": p.n_live_docs,
                    "chunks": p.n_live_chunks,
                    "deleted_documents": p.segment.n_docs - p.n_live_docs,
                    "index": p.segment.meta["index"],
                }
                for p in view.parts
            ],
            "format_version": self.manifest.format_version,
            "catalog": self.catalog._safe_url(),
            "generation": catalog_state.generation,
            "size_bytes": _size_on_disk(self.root),
            "created_at": self.manifest.created_at,
            "updated_at": dt.datetime.fromtimestamp(catalog_state.updated_at, dt.timezone.utc).isoformat(
                timespec="seconds"
            ),
        }

    def metadata_fields(self) -> dict[str, list]:
        """Metadata field names with example values (for building filters)."""
        return self.catalog.metadata_fields()

    def _current(self) -> View:
        """The committed generation's view, reloaded when ``HEAD`` says it moved."""
        stamp = _head_stamp(self.root)
        view = self._view
        if view is not None and stamp is not None and stamp == self._head_seen:
            return view
        with self._reload:
            view = self._view  # another thread may have reloaded while this one waited
            if view is not None and stamp is not None and stamp == self._head_seen:
                return view
            for _ in range(10):
                state = self.catalog.state()
                if view is not None and view.generation == state.generation:
                    self._head_seen = stamp
                    return view
                try:
                    view = load_view(self.root, state, view)
                except FileNotFoundError as exc:
                    if self.catalog.state().generation != state.generation:
                        continue  # a writer moved on and removed this generation's files
                    raise CorruptCollectionError(f"generation {state.generation} of {self.root}: {exc} is missing") from None
                self._view, self._head_seen = view, stamp
                return view
        raise CollectionLockedError(f"{self.root} changes too fast to load a consistent generation")

    # -- writes -----------------------------------------------------------
    def add(self, documents: Iterable[Document | dict[str, Any]], vectors=None) -> WriteReport:
        """Insert new documents; an id that already exists is an error (use ``upsert``).

        Args:
            documents: Documents or mappings with ``id``, ``text``, ``title``, ``metadata``.
            vectors: Optional ``(len(documents), dim)`` embeddings computed elsewhere:
                each document is then stored as one chunk spanning its text, with
                its row of ``vectors`` (normalised) as the chunk's vector.
        """
        documents = validation.check_documents(documents)
        docs = _coerce_batch(documents)
        existing = self.catalog.lookup([d.id for d in docs])
        if existing:
            raise BadInputError(
                f"{len(existing)} document id(s) already exist ({', '.join(sorted(existing)[:3])}); use upsert"
            )
        return self.upsert(docs, vectors=vectors)

    def upsert(self, documents: Iterable[Document | dict[str, Any]], vectors=None) -> WriteReport:
        """Insert or replace documents, in one atomic commit.

        Unchanged documents (same content hash) cost nothing; changed ones
        have their old chunks replaced; a change of metadata alone re-embeds
        nothing. Embedding happens before the write lock is taken.

        Args:
            documents: As for ``add``.
            vectors: As for ``add``.
        """
        documents = validation.check_documents(documents)
        docs = _coerce_batch(documents)
        given = None
        if vectors is not None:
            given = _check_vectors(vectors, len(docs), self.manifest.model["dim"], "vectors")
        if not docs:
            return WriteReport()
        plan = _classify(docs, self.catalog.lookup([d.id for d in docs]))
        changed = [doc for doc, kind in plan if kind == "text"]
        staged = [self._stage(changed, self._embed(changed, docs, given))] if changed else []
        try:
            with self._write_lock():
                kinds, chunks = self._commit(staged, [doc for doc, kind in plan if kind != "text"], docs, given)
        finally:
            _remove_files([folder for folder in staged if folder.exists()])
        return _report(docs, kinds, chunks)

    def prepare(self, documents: Iterable[Document | dict[str, Any]], vectors=None) -> Path:
        """Chunk, embed and write documents as a staged segment, without committing.

        The part of a write that costs: a scale-out worker runs it anywhere the
        collection's directory is reachable, without the write lock; the driver
        publishes the result with ``commit_prepared``. Nothing is visible before that.

        Args:
            documents: As for ``add``.
            vectors: As for ``add``.
        Returns:
            The staged segment's folder (inside the collection).
        """
        docs = _coerce_batch(validation.check_documents(documents))
        given = None
        if vectors is not None:
            given = _check_vectors(vectors, len(docs), self.manifest.model["dim"], "vectors")
        if not docs:
            raise BadInputError("prepare needs at least one document")
        return self._stage(docs, self._embed(docs, docs, given))

    def commit_prepared(self, folders: Sequence[str | os.PathLike]) -> WriteReport:
        """Publish staged segments (from ``prepare``) in one atomic commit, as ``upsert`` would.

        Documents whose stored content is identical are skipped, a change of
        metadata alone updates the catalog, and a later segment wins over an
        earlier one for the same id. The staged folders are consumed.
        """
        staged = [Path(folder) for folder in folders]
        for folder in staged:
            if folder.parent.resolve() != (self.root / SEGMENTS_DIR).resolve() or not folder.name.startswith(STAGED_PREFIX):
                raise BadInputError(f"{folder} is not a staged segment of {self.root}")
            if not folder.is_dir():
                raise BadInputError(f"staged segment {folder} is gone (committed already, or removed)")
        rows = [row for folder in staged for row in _staged_rows(folder)]
        try:
            with self._write_lock():
                kinds, chunks = self._commit(staged, [], [], None)
        finally:
            _remove_files([folder for folder in staged if folder.exists()])
        order = list(dict.fromkeys(row["id"] for row in rows))
        return _report([Document(doc_id, "-") for doc_id in order], kinds, chunks)

    def delete(self, ids: Iterable[str]) -> WriteReport:
        """Remove documents by id (a list, not one bare string); unknown ids are ignored. Returns what was deleted."""
        ids = validation.check_ids(ids)
        wanted = list(dict.fromkeys(ids))
        for doc_id in wanted:
            if not isinstance(doc_id, str):
                raise BadInputError(f"document ids are strings, got {doc_id!r}")
        report = WriteReport()
        with self._write_lock():
            stored = self.catalog.lookup(wanted)
            if not stored:
                return report
            state, view = self._writer_state()
            parts, touched = self._with_deletions(view, [row.key for row in stored.values()], state.generation + 1)
            change = Publish(refs(parts), state.next_key, state.next_segment, remove=sorted(stored))
            self._publish(state, change, new_files=touched)
            report.deleted = sorted(stored)
        return report

    def compact(self) -> dict[str, Any]:
        """Merge every segment into one without deleted rows, and shrink the catalog.

        The merged segment's vector index is chosen by its size (see
        ``IndexPolicy``). Returns ``{"segments_before", "segments_after",
        "bytes_before", "bytes_after"}``.
        """
        before = _size_on_disk(self.root)
        with self._write_lock():
            state, view = self._writer_state()
            n_before = len(view.parts)
            needs = len(view.parts) > 1 or any(p.n_live_docs < p.segment.n_docs for p in view.parts)
            if needs:
                self._merge(state, view, [p.ref.name for p in view.parts])
            self.catalog.vacuum()
            n_after = len(self._current().parts)
        return {
            "segments_before": n_before,
            "segments_after": n_after,
            "bytes_before": before,
            "bytes_after": _size_on_disk(self.root),
        }

    def _embed(self, docs: list[Document], batch: list[Document], given: np.ndarray | None) -> dict[str, _Embedded]:
        """Chunks and vectors of ``docs`` (taken from ``given``, row-aligned with ``batch``, when set)."""
        if not docs:
            return {}
        if given is not None:
            row_of = {doc.id: i for i, doc in enumerate(batch)}
            return {doc.id: _Embedded([(0, len(doc.text))], given[row_of[doc.id] : row_of[doc.id] + 1]) for doc in docs}
        splits = [self.chunker.split(doc) for doc in docs]  # each document tokenised once
        vectors = self.embedder.embed_token_ids([chunk.token_ids for chunk_list in splits for chunk in chunk_list])
        out, at = {}, 0
        for doc, chunk_list in zip(docs, splits):
            out[doc.id] = _Embedded([(c.start, c.end) for c in chunk_list], vectors[at : at + len(chunk_list)])
            at += len(chunk_list)
        return out

    def _stage(self, docs: list[Document], embedded: dict[str, _Embedded]) -> Path:
        """Write ``docs`` as a staged segment (placeholder keys) with their catalog rows beside it."""
        data = SegmentData.from_documents(
            np.arange(len(docs)),
            [doc.title for doc in docs],
            [doc.text for doc in docs],
            [embedded[doc.id].spans for doc in docs],
            np.concatenate([embedded[doc.id].vectors for doc in docs]),
            self.analyzer,
        )
        folder = self.root / SEGMENTS_DIR / f"{STAGED_PREFIX}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            data.write(folder, self.index_policy)
            rows = [
                {
                    "id": doc.id,
                    "title": doc.title,
                    "metadata": doc.metadata,
                    "content_hash": doc.content_hash(),
                    "text_hash": doc.text_hash(),
                    "chunks": len(embedded[doc.id].spans),
                }
                for doc in docs
            ]
            atomic_write_text(folder / STAGED_ROWS, json.dumps(rows, ensure_ascii=False))
        except BaseException:
            _remove_files([folder])
            raise
        return folder

    def _commit(
        self, staged: list[Path], others: list[Document], batch: list[Document], given: np.ndarray | None
    ) -> tuple[dict[str, str], int]:
        """Publish staged segments and the catalog changes of ``others`` in one generation (lock held).

        Every document is classified again against the catalog as it is now:
        a staged row whose content is stored already is dropped (marked
        deleted in its new segment), one whose text is stored gets only a
        metadata update, and a document of ``others`` whose text changed
        since it was classified is embedded and staged now.

        Returns:
            ``({id: "added" | "updated" | "unchanged"}, chunks written)``.
        """
        rows_of = [_staged_rows(folder) for folder in staged]
        ids = [row["id"] for rows in rows_of for row in rows] + [doc.id for doc in others]
        stored = self.catalog.lookup(ids)
        late = [doc for doc, kind in _classify(others, stored) if kind == "text"]
        if late:  # changed by another writer between the first look and the lock
            staged.append(self._stage(late, self._embed(late, batch, given)))
            rows_of.append(_staged_rows(staged[-1]))
        last = {row["id"]: (i, r) for i, rows in enumerate(rows_of) for r, row in enumerate(rows)}
        state, view = self._writer_state()
        kinds: dict[str, str] = {}
        metadata, inserts, replaced = [], [], []
        next_key, next_segment = state.next_key, state.next_segment
        segments: list[SegmentRef] = []
        touched: list[Path] = []
        try:
            plans = []
            for i, (folder, rows) in enumerate(zip(staged, rows_of)):
                keys = np.arange(next_key, next_key + len(rows), dtype=np.int64)
                next_key += len(rows)
                dropped = []
                for r, row in enumerate(rows):
                    old = stored.get(row["id"])
                    if last[row["id"]] != (i, r) or (old is not None and old.content_hash == row["content_hash"]):
                        dropped.append(r)
                        kinds.setdefault(row["id"], "unchanged")
                    elif old is not None and old.text_hash == row["text_hash"]:
                        dropped.append(r)
                        metadata.append((row["id"], old.key, row["metadata"], row["content_hash"]))
                        kinds[row["id"]] = "updated"
                    else:
                        inserts.append(DocumentRow(row["id"], int(keys[r]), row["title"], row["metadata"],
                                                   row["content_hash"], row["text_hash"], row["chunks"]))
                        if old is not None:
                            replaced.append(old.key)
                        kinds[row["id"]] = "updated" if old is not None else "added"
                plans.append((folder, keys, dropped))
            for doc, kind in _classify(others, stored):
                if kind == "metadata":
                    metadata.append((doc.id, stored[doc.id].key, doc.metadata, doc.content_hash()))
                    kinds[doc.id] = "updated"
                elif kind == "unchanged":
                    kinds[doc.id] = "unchanged"
            if not inserts and not metadata:
                return kinds, 0
            parts, touched = self._with_deletions(view, replaced, state.generation + 1)
            segments = refs(parts)
            for folder, keys, dropped in plans:
                if len(dropped) == len(keys):
                    continue
                name = segment_name(next_segment)
                next_segment += 1
                target = self.root / SEGMENTS_DIR / name
                write_durably(folder / "keys.npy", lambda path, k=keys: np.save(path, k, allow_pickle=False))
                (folder / STAGED_ROWS).unlink()
                os.rename(folder, target)
                touched.append(target)
                deletions = 0
                if dropped:
                    write_deletions(target, state.generation + 1, np.asarray(dropped))
                    deletions = state.generation + 1
                segments.append(SegmentRef(name, deletions))
            fsync_dir(self.root / SEGMENTS_DIR)
        except BaseException:
            _remove_files(touched)
            raise
        removed = [row.id for row in inserts if row.id in stored]
        change = Publish(segments, next_key, next_segment, remove=removed, insert=inserts, metadata=metadata)
        self._publish(state, change, new_files=touched)
        self._merge_after_commit()
        return kinds, sum(row.n_chunks for row in inserts)

    def _with_deletions(
        self, view: View, keys: Sequence[int], generation: int
    ) -> tuple[list[SegmentView], list[Path]]:
        """The view's parts with ``keys`` deleted: new deletion files written for ``generation``.

        Returns:
            ``(parts, files written)``; parts whose every row is gone are left out.
        """
        parts, written = [], []
        rows_per_part = view.locate(np.sort(np.asarray(keys, dtype=np.int64)))
        try:
            for part, rows in zip(view.parts, rows_per_part):
                if len(rows) == 0:
                    parts.append(part)
                    continue
                deleted = np.union1d(part.deleted, rows)
                if len(deleted) == part.segment.n_docs:
                    continue  # nothing live is left: the segment leaves the generation
                written.append(part.segment.folder / deletion_file(generation))
                write_deletions(part.segment.folder, generation, deleted)
                parts.append(SegmentView.open(SegmentRef(part.ref.name, generation), part.segment))
        except BaseException:
            _remove_files(written)
            raise
        return parts, written

    def _publish(self, state: CatalogState, change: Publish, new_files: Sequence[Path]) -> None:
        """Commit ``change`` as generation + 1, then point ``HEAD`` at it and drop unreferenced files."""
        try:
            generation = self.catalog.publish(state.generation, change)
        except BaseException:
            _remove_files(new_files)
            raise
        write_head(self.root, generation)
        new_state = self.catalog.state()
        with self._reload:
            self._view = load_view(self.root, new_state, self._view)
            self._head_seen = _head_stamp(self.root)
        _remove_unreferenced(self.root, new_state)

    def _writer_state(self) -> tuple[CatalogState, View]:
        """The committed state and its view, for a writer holding the lock."""
        state = self.catalog.state()
        view = self._current()
        if view.generation != state.generation:
            view = load_view(self.root, state, view)
        return state, view

    def _merge_after_commit(self) -> None:
        """Run at most one merge that the merge policy asks for (lock held)."""
        state, view = self._writer_state()
        names = self.merge_policy.plan(view.parts)
        if names:
            try:
                self._merge(state, view, names)
            except DeadlineExceededError:
                pass  # the commit stands; the next writer (or compact) merges

    def _merge(self, state: CatalogState, view: View, names: Sequence[str]) -> None:
        """Replace the segments ``names`` by one holding their live rows; no catalog row changes."""
        chosen = [p for p in view.parts if p.ref.name in names]
        rest = [p.ref for p in view.parts if p.ref.name not in names]
        live = [p for p in chosen if p.n_live_docs]
        if live:
            data = merge([p.segment for p in live], [p.deleted for p in live])
            name = segment_name(state.next_segment)
            folder = self.root / SEGMENTS_DIR / name
            try:
                data.write(folder, self.index_policy)
            except BaseException:
                _remove_files([folder])
                raise
            rest.append(SegmentRef(name, 0))
            rest.sort(key=lambda ref: ref.name)
            written = [folder]
        else:
            written = []
        change = Publish(rest, state.next_key, state.next_segment + (1 if live else 0))
        self._publish(state, change, new_files=written)

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        """Hold the collection's single-writer lock (released if the process dies).

        On taking it, the files an interrupted writer left behind are removed.
        """
        try:
            self._lock.acquire()
        except Timeout:
            raise CollectionLockedError(
                f"{self.root} is being written by another process (waited {self._lock_timeout:.0f}s)"
            ) from None
        try:
            state = self.catalog.state()
            _remove_unreferenced(self.root, state)
            if _read_head(self.root) != state.generation:  # a writer died between publish and HEAD
                write_head(self.root, state.generation)
            yield
        finally:
            self._lock.release()


def _batched_result(future: Future):
    """The ranking a search batch computed for this search, within this thread's deadline."""
    left = deadline.remaining()
    try:
        return future.result(None if left is None else max(left, 0.0))
    except FutureTimeout:
        future.cancel()
        raise DeadlineExceededError("the search ran past its deadline while waiting for its batch") from None


def _staged_rows(folder: Path) -> list[dict[str, Any]]:
    """The catalog rows written beside a staged segment, one per document row."""
    try:
        return json.loads((folder / STAGED_ROWS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptCollectionError(f"staged segment {folder} is incomplete: {exc}") from None


def _report(docs: Sequence[Document], kinds: dict[str, str], chunks: int) -> WriteReport:
    """A ``WriteReport`` in the order of ``docs``."""
    report = WriteReport(chunks=chunks)
    for doc in docs:
        getattr(report, kinds.get(doc.id, "unchanged")).append(doc.id)
    return report


def _classify(docs: list[Document], stored: dict[str, StoredDocument]) -> list[tuple[Document, str]]:
    """Each document with what a write must do: ``"unchanged"``, ``"metadata"`` or ``"text"``."""
    plan = []
    for doc in docs:
        row = stored.get(doc.id)
        if row is not None and row.content_hash == doc.content_hash():
            plan.append((doc, "unchanged"))
        elif row is not None and row.text_hash == doc.text_hash():
            plan.append((doc, "metadata"))
        else:
            plan.append((doc, "text"))
    return plan


def _index_summary(view: View) -> str:
    """``"2 segments: IVF1024 nprobe 16 (1,000,000 chunks), exact (2,000 chunks)"``."""
    if not view.parts:
        return "no segments (empty)"
    described = []
    for part in view.parts:
        index = part.segment.meta["index"]
        kind = f"IVF{index['nlist']} nprobe {index['nprobe']}" if index["type"] == vector_index.IVF else "exact"
        described.append(f"{kind} ({part.n_live_chunks:,} chunks)")
    count = f"{len(view.parts)} segment{'s' if len(view.parts) > 1 else ''}"
    return f"{count}: {', '.join(described)}"


def _keyword_chunk(segment: Segment, doc_row: int, terms: Sequence[str]) -> int:
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


def _check_vectors(vectors, n: int, dim: int, what: str, single: bool = False) -> np.ndarray:
    """``vectors`` as ``(n, dim)`` float32 rows of unit norm; a clear error when they cannot be."""
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"{what} must be numbers: {exc}") from None
    if single and array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape != (n, dim):
        expected = f"({dim},)" if single else f"({n}, {dim})"
        raise BadInputError(f"{what} must have shape {expected} for this collection, got {tuple(array.shape)}")
    if not np.isfinite(array).all():
        raise BadInputError(f"{what} hold NaN or infinite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if (norms == 0).any():
        raise BadInputError(f"{what} hold an all-zero row, which has no direction")
    return np.ascontiguousarray(array / norms, dtype=np.float32)


def _coerce_batch(documents: Iterable[Document | dict[str, Any]]) -> list[Document]:
    if isinstance(documents, (Document, dict)):
        documents = [documents]
    if isinstance(documents, (str, bytes)):
        raise BadInputError("documents must be a list of documents or mappings, got a string")
    docs = [coerce_document(item) for item in documents]
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise BadInputError(f"document id {doc.id!r} appears twice in one batch")
        seen.add(doc.id)
    return docs


def _check_model(root: Path, manifest: Manifest, embedder: Embedder) -> None:
    expected = manifest.model
    if embedder.weights_sha256 != expected["sha256"] or embedder.dim != expected["dim"]:
        raise ModelMismatchError(
            f"collection {root} was built with model {expected['name']!r} "
            f"(sha256 {expected['sha256'][:12]}, dim {expected['dim']}); "
            f"{embedder.name!r} (sha256 {embedder.weights_sha256[:12]}, dim {embedder.dim}) "
            "is a different model"
        )


def write_head(root: Path, generation: int) -> None:
    """Point ``HEAD`` at ``generation``: a new file (new inode) that readers ``stat``."""
    atomic_write_text(Path(root) / HEAD_FILE, f"{generation}\n")


def _read_head(root: Path) -> int | None:
    try:
        return int((Path(root) / HEAD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _head_stamp(root: Path) -> tuple | None:
    try:
        st = os.stat(Path(root) / HEAD_FILE)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _remove_unreferenced(root: Path, state: CatalogState) -> None:
    """Remove segment folders and deletion files that ``state`` does not reference."""
    folder = Path(root) / SEGMENTS_DIR
    if not folder.is_dir():
        return
    wanted = {ref.name: ref.deletions for ref in state.segments}
    removed = False
    for path in folder.iterdir():
        if path.name.startswith(STAGED_PREFIX) and _staging_may_be_alive(path):
            continue  # a worker may still be writing it, or a driver about to commit it
        if path.name not in wanted:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            removed = True
            continue
        for deletions in path.glob("deleted.*.npy"):
            if deletions.name != deletion_file(wanted[path.name]):
                deletions.unlink(missing_ok=True)
                removed = True
    if removed:
        fsync_dir(folder)


def _staging_may_be_alive(folder: Path) -> bool:
    """Whether the process that staged ``folder`` may still use it.

    On this host that is whether the process lives; elsewhere, whether the
    folder is younger than ``STAGED_MAX_AGE``.
    """
    host, pid, _ = (folder.name[len(STAGED_PREFIX) :].rsplit("-", 2) + ["", ""])[:3]
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        return time.time() - folder.stat().st_mtime < STAGED_MAX_AGE
    except OSError:
        return False


def _remove_files(paths: Sequence[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _remove_partial_collection(root: Path) -> None:
    """Clear what an interrupted ``create`` left (no manifest was written)."""
    for name in (DEFAULT_CATALOG, f"{DEFAULT_CATALOG}-wal", f"{DEFAULT_CATALOG}-shm", HEAD_FILE):
        (root / name).unlink(missing_ok=True)
    shutil.rmtree(root / SEGMENTS_DIR, ignore_errors=True)
    shutil.rmtree(root / "index", ignore_errors=True)


def _size_on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
