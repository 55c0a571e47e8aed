"""``Collection``: one directory holding a manifest, a SQL catalog and a FAISS index.

The facade users touch from Python::

    col = Collection.create("notes")                     # packaged MiniLM by default
    col.upsert([{"id": "a", "text": "...", "metadata": {"lang": "en"}}])
    hits = col.search("what was said about X", k=5, where={"lang": "en"})
    col.delete(["a"])

Every write commits vectors and catalog together: the new FAISS file is
published first, then one SQL transaction changes the rows and the generation
that names that file. Readers check the generation before each search, so
they see every committed write and never a half-done one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import faiss
import numpy as np
from filelock import FileLock, Timeout

from retriever import vector_index
from retriever.bm25 import DEFAULT_B, DEFAULT_K1, Analyzer, BM25Index, bm25_path
from retriever.catalog import Catalog, ChunkRow, DocumentWrite
from retriever.chunking import Chunker
from retriever.documents import Document, Hit, coerce_document
from retriever.embedder import Embedder
from retriever.fusion import DEFAULT_ALPHA, DEFAULT_FUSION, FUSIONS, fuse
from retriever.errors import (
    BadInputError,
    CollectionLockedError,
    CorruptCollectionError,
    ModelMismatchError,
)
from retriever.manifest import DEFAULT_CATALOG, MANIFEST, Manifest

LOCK_FILE = ".write.lock"
DEFAULT_OVERLAP = 32
DEFAULT_MODE = "hybrid"
HYBRID_DEPTH = 100  # documents taken from each side before fusing
_OWN_FILES = {MANIFEST, DEFAULT_CATALOG, LOCK_FILE, vector_index.INDEX_DIR}


@dataclass(frozen=True)
class _Snapshot:
    """What searches read: one committed generation's vectors and BM25 index."""

    generation: int
    vectors: faiss.Index
    bm25: BM25Index


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
        self._snapshot: _Snapshot | None = None
        self._reload = threading.Lock()
        self.analyzer = Analyzer(manifest.bm25["stemmer"], manifest.bm25["stopwords"])
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
        """
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise BadInputError(f"cannot create a collection at {root}: it is a file")
        if (root / MANIFEST).exists():
            raise BadInputError(f"a collection already exists at {root}")
        if root.is_dir():
            foreign = {p.name for p in root.iterdir()} - _OWN_FILES
            foreign = {name for name in foreign if not name.startswith(DEFAULT_CATALOG)}
            if foreign:
                raise BadInputError(
                    f"cannot create a collection at {root}: the directory is not empty "
                    f"({', '.join(sorted(foreign)[:3])}...)"
                )
            _remove_partial_collection(root)
        embedder = model if isinstance(model, Embedder) else Embedder(model)
        window = window_tokens or embedder.max_tokens - 2
        if window > embedder.max_tokens - 2:
            raise BadInputError(
                f"chunk window of {window} tokens exceeds the model's {embedder.max_tokens - 2}"
            )
        if overlap_tokens is None:
            overlap_tokens = min(DEFAULT_OVERLAP, window // 4)
        chunker = Chunker(embedder.tokenizer, window, overlap_tokens, title_prefix)
        manifest = Manifest(
            uuid=str(uuid.uuid4()),
            created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            model=embedder.identity(),
            chunking=chunker.settings(),
            index={"library": "faiss", "factory": vector_index.FACTORY, "metric": "inner_product"},
            bm25={"k1": DEFAULT_K1, "b": DEFAULT_B, "stemmer": "porter", "stopwords": "en", "fields": "title+text"},
            catalog_url=catalog_url,
        )
        root.mkdir(parents=True, exist_ok=True)
        Catalog(manifest.catalog_location(root)).create(manifest.uuid)
        vector_index.write_generation(root, 0, vector_index.new_index(embedder.dim))
        BM25Index.empty(manifest.bm25["k1"], manifest.bm25["b"]).save(bm25_path(root, 0))
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
        """
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
                self.embedder.tokenizer,
                settings["window_tokens"],
                settings["overlap_tokens"],
                settings["title_prefix"],
            )
        return self._chunker

    def embed(self, texts: Sequence[str] | str, **kwargs) -> np.ndarray:
        """Embed texts with the collection's model; see ``Embedder.embed``."""
        return self.embedder.embed(texts, **kwargs)

    # -- reads ------------------------------------------------------------
    def __len__(self) -> int:
        return self.catalog.counts()[0]

    def __contains__(self, doc_id: str) -> bool:
        return bool(self.catalog.content_hashes([doc_id]))

    def ids(self) -> Iterator[str]:
        """Every document id, sorted."""
        return self.catalog.iter_ids()

    def get(self, doc_id: str) -> Document | None:
        """The stored document, or ``None``."""
        row = self.catalog.documents([doc_id]).get(doc_id)
        if row is None:
            return None
        return Document(id=row.id, text=row.text, title=row.title, metadata=dict(row.meta or {}))

    def search(
        self,
        query: str,
        k: int = 10,
        where: dict[str, Any] | None = None,
        mode: str = DEFAULT_MODE,
        *,
        fusion: str = DEFAULT_FUSION,
        alpha: float = DEFAULT_ALPHA,
    ) -> list[Hit]:
        """The ``k`` documents that best match ``query``.

        Args:
            query: Free text.
            k: Number of documents to return (default 10).
            where: Metadata filter (see ``retriever.filters``); applied before
                ranking, so ``k`` hits come back whenever ``k`` documents match
                (in ``bm25`` mode: match the filter and share a term with the query).
            mode: ``"dense"`` (embedding similarity of the best chunk),
                ``"bm25"`` (keywords over the whole document) or ``"hybrid"``
                (both, fused; the default).
            fusion: For hybrid: ``"convex"`` (min-max-normalised scores mixed
                by ``alpha``, default) or ``"rrf"`` (reciprocal-rank fusion).
            alpha: Weight of the dense side in the convex combination (default 0.6).

        Returns:
            Hits by descending score, one per document, each showing its best
            chunk. Scores are cosine similarity (dense), BM25 (bm25) or the
            fused score (hybrid).
        """
        if not isinstance(query, str) or not query.strip():
            raise BadInputError("query is empty")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise BadInputError(f"k must be a positive integer, got {k!r}")
        if mode not in self.SEARCH_MODES:
            raise BadInputError(f"unknown search mode {mode!r}; use one of {', '.join(self.SEARCH_MODES)}")
        if fusion not in FUSIONS:
            raise BadInputError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}")
        allowed_chunks = allowed_docs = None
        if where is not None:
            allowed_docs = self.catalog.matching_doc_ids(where)
            if not allowed_docs:
                return []
            if mode != "bm25":
                allowed_chunks = self.catalog.matching_chunk_ids(where)
        snapshot = self._current()
        depth = k if mode != "hybrid" else max(k, HYBRID_DEPTH)
        dense: list[tuple[str, float]] = []
        dense_spans: dict[str, tuple[int, int]] = {}
        if mode in ("dense", "hybrid"):
            dense, dense_spans = self._dense_ranking(snapshot.vectors, query, depth, allowed_chunks)
        sparse: list[tuple[str, float]] = []
        if mode in ("bm25", "hybrid"):
            sparse = snapshot.bm25.top(self.analyzer(query), depth, allowed_docs)
        if mode == "dense":
            ranked = dense
        elif mode == "bm25":
            ranked = sparse
        else:
            ranked = fuse(dense, sparse, fusion, alpha)
        return self._hits(ranked[:k], dense_spans, query)

    def _dense_ranking(
        self, index: faiss.Index, query: str, k: int, allowed: np.ndarray | None
    ) -> tuple[list[tuple[str, float]], dict[str, tuple[int, int]]]:
        """Top ``k`` documents by their best chunk's cosine, and that chunk's character span."""
        available = index.ntotal if allowed is None else allowed.size
        if available == 0:
            return [], {}
        query_vector = self.embedder.embed([query])
        fetch = min(available, max(4 * k, k + 16))
        while True:  # widen until k distinct documents are found or nothing is left
            scores, ids = vector_index.search(index, query_vector, fetch, allowed)
            rows = self.catalog.chunk_rows([i for i in ids[0] if i >= 0])
            best: dict[str, tuple[float, ChunkRow]] = {}
            for score, chunk_id in zip(scores[0], ids[0]):
                row = rows.get(int(chunk_id))
                if row is not None and row.doc_id not in best:
                    best[row.doc_id] = (float(score), row)
            if len(best) >= k or fetch >= available:
                break
            fetch = min(available, fetch * 4)
        ranked = sorted(best.items(), key=lambda item: -item[1][0])[:k]
        return [(doc_id, score) for doc_id, (score, _) in ranked], {d: (r.start, r.end) for d, (_, r) in ranked}

    def _hits(self, ranked: list[tuple[str, float]], dense_spans: dict[str, tuple[int, int]], query: str) -> list[Hit]:
        """Hits for ranked documents; those without a dense chunk show their best keyword chunk."""
        docs = self.catalog.documents([doc_id for doc_id, _ in ranked])
        missing = [doc_id for doc_id, _ in ranked if doc_id not in dense_spans]
        spans = {**(self._keyword_spans(missing, docs, query) if missing else {}), **dense_spans}
        hits = []
        for doc_id, score in ranked:
            doc = docs.get(doc_id)
            if doc is None:  # deleted since the index was loaded
                continue
            start, end = spans.get(doc_id, (0, len(doc.text)))
            hits.append(Hit(doc_id, score, doc.title, doc.text[start:end], start, end, dict(doc.meta or {})))
        return hits

    def _keyword_spans(self, doc_ids: list[str], docs: dict, query: str) -> dict[str, tuple[int, int]]:
        """For each document, the chunk holding the most distinct query terms (first on ties)."""
        terms = set(self.analyzer(query))
        by_doc: dict[str, list] = {}
        for row in self.catalog.chunks_of(doc_ids):
            by_doc.setdefault(row.doc_id, []).append(row)
        spans: dict[str, tuple[int, int]] = {}
        for doc_id, rows in by_doc.items():
            matches = self.analyzer.matches(docs[doc_id].text, terms) if doc_id in docs else []
            best = max(
                sorted(rows, key=lambda r: r.ordinal),
                key=lambda r: len({term for offset, term in matches if r.start <= offset < r.end}),
            )
            spans[doc_id] = (best.start, best.end)
        return spans

    def info(self) -> dict[str, Any]:
        """Counts, model, index and catalog settings, size on disk and last update."""
        n_docs, n_chunks = self.catalog.counts()
        catalog_state = self.catalog.state()
        return {
            "path": str(self.root.resolve()),
            "documents": n_docs,
            "chunks": n_chunks,
            "model": self.manifest.model["name"],
            "model_sha256": self.manifest.model["sha256"],
            "dim": self.manifest.model["dim"],
            "chunking": self.manifest.chunking,
            "index": self.manifest.index["factory"],
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

    def _current(self) -> _Snapshot:
        """Vectors and BM25 of the committed generation, reloaded when it moved."""
        for _ in range(10):
            generation = self.catalog.state().generation
            snapshot = self._snapshot
            if snapshot is not None and snapshot.generation == generation:
                return snapshot
            with self._reload:
                try:
                    snapshot = self._load(generation)
                except FileNotFoundError:
                    if self.catalog.state().generation != generation:
                        continue  # a writer moved on and removed the old files
                    raise CorruptCollectionError(
                        f"vector index for generation {generation} is missing from {self.root}"
                    ) from None
                self._snapshot = snapshot
                return snapshot
        raise CollectionLockedError(f"{self.root} changes too fast to load a consistent index")

    def _load(self, generation: int) -> _Snapshot:
        vectors = vector_index.read_generation(self.root, generation)
        try:
            bm25 = BM25Index.load(bm25_path(self.root, generation))
        except FileNotFoundError:
            bm25 = self._rebuild_bm25(generation)
        return _Snapshot(generation, vectors, bm25)

    def _rebuild_bm25(self, generation: int) -> BM25Index:
        """BM25 rebuilt from the catalog, for a generation whose BM25 file is missing."""
        if not vector_index.index_path(self.root, generation).exists():
            raise FileNotFoundError(vector_index.index_path(self.root, generation))
        settings = self.manifest.bm25
        rows = [(doc_id, self.analyzer(f"{title}\n{text}")) for doc_id, title, text in self.catalog.iter_texts()]
        bm25 = BM25Index.empty(settings["k1"], settings["b"]).updated([], rows)
        if self.catalog.state().generation == generation:
            bm25.save(bm25_path(self.root, generation))
        return bm25

    # -- writes -----------------------------------------------------------
    def add(self, documents: Iterable[Document | dict[str, Any]]) -> WriteReport:
        """Insert new documents; an id that already exists is an error (use ``upsert``)."""
        docs = _coerce_batch(documents)
        existing = self.catalog.content_hashes([d.id for d in docs])
        if existing:
            raise BadInputError(
                f"{len(existing)} document id(s) already exist ({', '.join(sorted(existing)[:3])}); use upsert"
            )
        return self.upsert(docs)

    def upsert(self, documents: Iterable[Document | dict[str, Any]]) -> WriteReport:
        """Insert or replace documents, in one atomic commit.

        Unchanged documents (same content hash) cost nothing; changed ones
        have their old chunks replaced; a change of metadata alone re-embeds
        nothing.
        """
        docs = _coerce_batch(documents)
        report = WriteReport()
        if not docs:
            return report
        with self._write_lock():
            existing = self.catalog.content_hashes([d.id for d in docs])
            changed: list[tuple[Document, str]] = []
            for doc in docs:
                digest = doc.content_hash()
                old = existing.get(doc.id)
                if old == digest:
                    report.unchanged.append(doc.id)
                    continue
                (report.updated if old else report.added).append(doc.id)
                changed.append((doc, digest))
            metadata_only = self._same_text(changed)
            changed = [(doc, digest) for doc, digest in changed if doc.id not in metadata_only]
            if not changed:
                if metadata_only:
                    self.catalog.update_metadata(list(metadata_only.values()))
                return report
            splits = [self.chunker.split(doc) for doc, _ in changed]
            texts = [chunk.embed_text for chunk_list in splits for chunk in chunk_list]
            vectors = self.embedder.embed_token_ids([c.token_ids for chunk_list in splits for c in chunk_list])
            state = self.catalog.state()
            next_id = state.next_chunk_id
            writes = []
            for (doc, digest), chunk_list in zip(changed, splits):
                ids = list(range(next_id, next_id + len(chunk_list)))
                next_id += len(chunk_list)
                writes.append(
                    DocumentWrite(
                        doc.id,
                        doc.title,
                        doc.text,
                        doc.metadata,
                        digest,
                        ids,
                        [(c.start, c.end) for c in chunk_list],
                    )
                )
            replaced = [doc_id for doc_id in report.updated if doc_id not in metadata_only]
            stale = self.catalog.chunk_ids_of(replaced) if replaced else np.zeros(0, np.int64)
            new_ids = np.arange(state.next_chunk_id, next_id, dtype=np.int64)
            self._commit(
                state.generation, stale, new_ids, vectors, replaced, writes, next_id, list(metadata_only.values())
            )
            report.chunks = len(texts)
        return report

    def delete(self, ids: Iterable[str]) -> WriteReport:
        """Remove documents by id; unknown ids are ignored. Returns what was deleted."""
        wanted = list(dict.fromkeys(ids))
        for doc_id in wanted:
            if not isinstance(doc_id, str):
                raise BadInputError(f"document ids are strings, got {doc_id!r}")
        report = WriteReport()
        with self._write_lock():
            present = sorted(self.catalog.content_hashes(wanted))
            if not present:
                return report
            state = self.catalog.state()
            stale = self.catalog.chunk_ids_of(present)
            self._commit(state.generation, stale, np.zeros(0, np.int64), None, present, [], state.next_chunk_id)
            report.deleted = present
        return report

    def _same_text(self, changed: list[tuple[Document, str]]) -> dict[str, tuple[str, dict, str]]:
        """Changed documents whose title and text are stored as is: only their metadata moved.

        Returns:
            ``{id: (id, metadata, content_hash)}`` for those documents.
        """
        stored = self.catalog.documents([doc.id for doc, _ in changed])
        return {
            doc.id: (doc.id, doc.metadata, digest)
            for doc, digest in changed
            if doc.id in stored and stored[doc.id].title == doc.title and stored[doc.id].text == doc.text
        }

    def _commit(
        self, generation, stale_ids, new_ids, vectors, remove_doc_ids, writes, next_chunk_id, metadata_updates=()
    ) -> None:
        """Publish generation + 1: vector and BM25 files first, then the catalog transaction."""
        current = self._load(generation)
        index = current.vectors
        if stale_ids.size:
            index.remove_ids(stale_ids)
        if new_ids.size:
            index.add_with_ids(vectors, new_ids)
        bm25 = current.bm25.updated(
            remove_doc_ids, [(w.id, self.analyzer(f"{w.title}\n{w.text}")) for w in writes]
        )
        new_files = (vector_index.index_path(self.root, generation + 1), bm25_path(self.root, generation + 1))
        try:
            vector_index.write_generation(self.root, generation + 1, index)
            bm25.save(new_files[1])
            new_generation = self.catalog.commit(generation, remove_doc_ids, writes, next_chunk_id, metadata_updates)
        except BaseException:
            for path in new_files:
                path.unlink(missing_ok=True)
            raise
        vector_index.remove_other_generations(self.root, keep=new_generation)
        with self._reload:
            self._snapshot = _Snapshot(new_generation, index, bm25)

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        """Hold the collection's single-writer lock (released if the process dies)."""
        try:
            self._lock.acquire()
        except Timeout:
            raise CollectionLockedError(
                f"{self.root} is being written by another process (waited {self._lock_timeout:.0f}s)"
            ) from None
        try:
            yield
        finally:
            self._lock.release()


def _coerce_batch(documents: Iterable[Document | dict[str, Any]]) -> list[Document]:
    if isinstance(documents, (Document, dict)):
        documents = [documents]
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


def _remove_partial_collection(root: Path) -> None:
    """Clear what an interrupted ``create`` left (no manifest was written)."""
    for name in (DEFAULT_CATALOG, f"{DEFAULT_CATALOG}-wal", f"{DEFAULT_CATALOG}-shm"):
        (root / name).unlink(missing_ok=True)
    shutil.rmtree(root / vector_index.INDEX_DIR, ignore_errors=True)


def _size_on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
