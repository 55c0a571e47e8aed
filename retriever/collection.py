"""``Collection``: one directory holding a manifest, a SQL catalog and immutable segments.

The facade users touch from Python::

    col = Collection.create("notes")                     # packaged MiniLM by default
    col.upsert([{"id": "a", "text": "...", "metadata": {"lang": "en"}}])
    hits = col.search("what was said about X", k=5, where={"lang": "en"})
    col.delete(["a"])

Each verb checks its arguments once (``retriever.validation``) and delegates:
reads and searches to a ``Searcher`` over the ``GenerationReader``'s view of
the committed generation, writes to the ``Writer`` (commit, deletions,
merging under the single-writer lock), encoding to the ``Embedder`` and
``Chunker``. The rooms are ``retriever.encoding``, ``retriever.storage`` and
``retriever.search``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, Union

import numpy as np

from retriever import validation
from retriever.documents import Document, Hit
from retriever.encoding.chunking import Chunker
from retriever.encoding.embedder import Embedder
from retriever.encoding.passages import embed_documents, given_vectors
from retriever.errors import BadInputError, CorruptCollectionError, ModelSwitchedError
from retriever.models_in_force import ModelsInForce
from retriever.search import vector_index
from retriever.search.bm25 import DEFAULT_B, DEFAULT_K1, Analyzer
from retriever.search.evidence import DEFAULT_EVIDENCE
from retriever.search.fusion import DEFAULT_ALPHA, DEFAULT_FUSION
from retriever.search.searcher import Searcher
from retriever.storage.catalog import Catalog
from retriever.storage.catalog_url import for_manifest as catalog_url_for_manifest
from retriever.storage.changes import Change, WriteReport, classify
from retriever.storage.checking import check_collection
from retriever.storage.cleanup import prepare_directory, remove_files, size_on_disk
from retriever.storage.faults import file_system_faults
from retriever.storage.generations import write_head
from retriever.storage.integrity import CheckReport
from retriever.storage.manifest import MANIFEST, Manifest
from retriever.storage.merging import MergePolicy
from retriever.storage.model_switch import SwitchReport, switch_model
from retriever.storage.reader import GenerationReader
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.snapshots import SnapshotReport, restore_snapshot, take_snapshot
from retriever.storage.staging import EmbedFn, check_staged, stage, staged_rows
from retriever.storage.writer import Writer
from retriever.tagging import applying as tag_applying
from retriever.tagging import fitting as tag_fitting
from retriever.tagging.applying import TagReport
from retriever.tagging.evaluation import TagEvaluation
from retriever.tagging.examples import Example, check_examples
from retriever.tagging.on_commit import TagOnCommit
from retriever.tagging.store import load_taggers

__all__ = ["Collection", "WriteReport", "TagReport", "DEFAULT_MODE"]

DEFAULT_OVERLAP = 32
DEFAULT_MODE = "hybrid"
Vectors = Union[np.ndarray, Sequence[Sequence[float]]]  # (documents, dim) embeddings computed elsewhere
Examples = Union[str, os.PathLike, Iterable[Union[Example, dict[str, Any]]]]  # a file, or labelled records
BM25_SETTINGS = {"k1": DEFAULT_K1, "b": DEFAULT_B, "stemmer": "porter", "stopwords": "en", "fields": "title+text"}


class Collection:
    """A searchable set of documents in one directory. Use ``create`` or ``open``.

    Attributes:
        root: The collection directory.
        manifest: Its ``Manifest`` (model identity, chunking, index and BM25 settings).
        catalog: The SQL catalog of document rows and generations.
        reader: The committed generation's view (``reader.current()``).
        writer: The single writer (``writer.locked()``, commit, delete, merge).
    """

    SEARCH_MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")

    def __init__(self, root: Path, manifest: Manifest, embedder: Embedder | None, lock_timeout: float):
        self.root = Path(root)
        self.models = ModelsInForce(self.root, manifest)
        self._chunker: Chunker | None = None
        self.catalog = Catalog(manifest.catalog_location(self.root))
        self.analyzer = Analyzer(manifest.bm25["stemmer"], manifest.bm25["stopwords"])
        self.index_policy = vector_index.IndexPolicy.from_dict(manifest.index.get("policy"))
        self.merge_policy = MergePolicy.from_dict(manifest.index.get("merge"))
        self.reader = GenerationReader(self.root, self.catalog)
        self.writer = Writer(
            self.root, self.catalog, self.reader, self.analyzer, self.index_policy, self.merge_policy, lock_timeout
        )
        self.writer.on_commit = TagOnCommit(self.root, lambda: self.models.model_at(self.catalog.state().generation))
        self.timings = self.writer.timings  # what listens to it hears searches, commits and merges
        self.searcher = Searcher(
            self.catalog, self.reader, self.analyzer, manifest.bm25, self.index_policy,
            lambda texts, generation: self.models.embedder_at(generation).embed(texts), self.timings,
        )  # fmt: skip
        catalog_uuid = self.catalog.state().collection_uuid
        if catalog_uuid != manifest.uuid:
            raise CorruptCollectionError(
                f"catalog {self.catalog.safe_url()} belongs to collection {catalog_uuid}, "
                f"not to {self.root} ({manifest.uuid})"
            )
        if embedder is not None:
            self.models.adopt(embedder, self.catalog.state().generation)

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
            lock_timeout: Seconds a write waits for another writer (-1: forever).

        Returns:
            The new, empty collection.

        Raises:
            BadInputError: An argument is wrong, ``path`` is a file, holds a
                collection already, or holds other files; or the window
                exceeds the model's.
        """
        validation.check_create_args(path, model, window_tokens, overlap_tokens, title_prefix, lock_timeout)
        root = Path(path)
        prepare_directory(root)
        embedder = model if validation.is_embedder(model) else Embedder(model)
        chunker = _chunker_for(embedder, window_tokens, overlap_tokens, title_prefix)
        index = {
            "library": "faiss",
            "metric": "inner_product",
            "policy": (index_policy or vector_index.IndexPolicy()).to_dict(),
            "merge": (merge_policy or MergePolicy()).to_dict(),
        }
        catalog = catalog_url_for_manifest(catalog_url)  # the password is kept in memory only
        manifest = Manifest.new(embedder.identity(), chunker.settings(), index, dict(BM25_SETTINGS), catalog)
        _write_empty_collection(root, manifest)
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
            model: Optional model to use; it must be the one the committed
                generation was embedded with (same weights: the model the
                collection was built with, or the one it switched to). By
                default the manifest's model is loaded when first needed.
            lock_timeout: Seconds a write waits for another writer (-1: forever).

        Returns:
            The collection, reading its last committed generation.

        Raises:
            CollectionNotFoundError: ``path`` holds no collection.
            FormatVersionError: The collection has an older format (``semsearch upgrade`` converts it).
            ModelMismatchError: ``model`` is not the collection's model.
            CorruptCollectionError: The manifest and catalog disagree.
        """
        validation.check_open_args(path, model, lock_timeout)
        root = Path(path)
        manifest = Manifest.load(root)
        embedder = None
        if model is not None:
            embedder = model if validation.is_embedder(model) else Embedder(model)
        return cls(root, manifest, embedder, lock_timeout)  # checks the embedder's model

    @classmethod
    def open_or_create(cls, path: str | os.PathLike, model=None, **kwargs) -> "Collection":
        """``open`` when ``path`` holds a collection, else ``create`` (with ``kwargs``)."""
        if (Path(path) / MANIFEST).exists():
            return cls.open(path, model, lock_timeout=kwargs.get("lock_timeout", 60.0))
        return cls.create(path, model, **kwargs)

    def close(self) -> None:
        """Release the catalog's connections."""
        self.catalog.close()

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Collection({str(self.root)!r}, model={self.manifest.model['name']!r})"

    # -- model ------------------------------------------------------------
    @property
    def manifest(self) -> Manifest:
        """The collection's manifest, as last read (again when a new generation shows it changed)."""
        return self.models.manifest

    @property
    def model(self) -> dict[str, Any]:
        """Identity of the model the committed generation was embedded with: ``name``, ``sha256``, ``dim``, ..."""
        return self.models.model_at(self.reader.current().generation)

    @property
    def embedder(self) -> Embedder:
        """The embedder of the committed generation's model, loaded (and checked against the manifest) on first use.

        Raises:
            BadInputError: The manifest names a model directory the user must
                name themselves (``check_manifest_model``).
        """
        return self.models.embedder_at(self.reader.current().generation)

    def switch_model(self, model: str | os.PathLike | Embedder, *, progress: bool = True) -> SwitchReport:
        """Re-embed every document with ``model`` and make it the collection's model, in one generation.

        Searches and writes use the old model until the new generation is
        published; a process killed before that leaves the old one in force.
        Chunks, keys and the BM25 side stay as they are, so ``model`` must
        tokenize as the collection's model does (an adapted copy of it does).

        Returns:
            The report: the model, the generation it is in force from, segments and chunks re-embedded.

        Raises:
            ModelMismatchError: ``model`` tokenizes otherwise, or its window is shorter than the chunks.
            BadInputError: A document holds caller's vectors over more text than ``model``'s window.
            CollectionLockedError: Another writer held the lock too long.
        """
        embedder = model if validation.is_embedder(model) else Embedder(model)
        with file_system_faults(self.root, "the model switch"):
            return switch_model(self, embedder, progress=progress)

    @property
    def chunker(self) -> Chunker:
        """The ``Chunker`` with the collection's window, overlap and title settings."""
        if self._chunker is None:
            settings = self.manifest.chunking
            self._chunker = Chunker(
                self.embedder.text_tokenizer,
                settings["window_tokens"],
                settings["overlap_tokens"],
                settings["title_prefix"],
            )
        return self._chunker

    def embed(self, texts: Sequence[str] | str, **kwargs) -> np.ndarray:
        """Embed texts with the collection's model.

        Args:
            texts: One string or a sequence of strings.
            **kwargs (Any): ``batch_size``, ``show_progress``, ``on_overflow``, as for ``Embedder.embed``.

        Returns:
            ``(len(texts), dim)`` float32, rows of unit norm.

        Raises:
            BadInputError: A text is not a string or not UTF-8.
        """
        return self.embedder.embed(texts, **kwargs)

    def batch_searches(self, max_batch: int = 32, max_wait_s: float = 0.001) -> None:
        """Scan the vectors once for concurrent searches, for servers: one index search per segment for a batch.

        The dense side of searches without a filter (and not ``exact``), from any number of
        threads, meets in a ``retriever.encoding.batching.MicroBatcher`` (up to
        ``max_batch`` query vectors; searches that queue while a batch runs
        make the next one, and it waits ``max_wait_s`` for more only while
        searches arrive together). The query vectors themselves come from the
        embedder, whose ``batch_queries`` encodes concurrent queries in one
        call; the keyword side of a hybrid search runs in the caller's thread
        while its batch scans. Each search gets the hits it would get alone.
        """
        self.searcher.batch_searches(max_batch, max_wait_s)

    # -- reads ------------------------------------------------------------
    def __len__(self) -> int:
        return self.catalog.counts()[0]

    def __contains__(self, doc_id: str) -> bool:
        validation.check_id_arg(doc_id)
        return bool(self.catalog.lookup([doc_id]))

    def ids(self, where: dict[str, Any] | None = None) -> Iterator[str]:
        """Every document id, sorted; with ``where``, the ids of documents whose metadata match it.

        Raises:
            FilterError: ``where`` is not a valid filter (see ``retriever.search.filters``).
        """
        if where is None:
            return self.catalog.iter_ids()
        rows = self.catalog.by_keys(self.catalog.matching_keys(where).tolist())
        return iter(sorted(row.id for row in rows.values()))

    def get(self, doc_id: str) -> Document | None:
        """The stored document, or ``None`` when ``doc_id`` is unknown.

        Raises:
            BadInputError: ``doc_id`` is not a UTF-8 string.
        """
        validation.check_id_arg(doc_id)
        while True:
            row = self.catalog.lookup([doc_id]).get(doc_id)
            if row is None:
                return None
            view = self.reader.current()
            found = view.find(row.key)
            if found is not None:
                part, doc_row = found
                text = view.parts[part].segment.text(doc_row)
                return Document(id=row.id, text=text, title=row.title, metadata=row.meta)
            if self.reader.current() is view:  # deleted since the catalog was read
                return None

    def chunk_spans(self, doc_id: str) -> list[tuple[int, int]]:
        """Character spans ``[(start, end)]`` of a document's chunks, in order (empty if the id is unknown)."""
        validation.check_id_arg(doc_id)
        row = self.catalog.lookup([doc_id]).get(doc_id)
        view = self.reader.current()
        found = view.find(row.key) if row is not None else None
        if found is None:
            return []
        segment = view.parts[found[0]].segment
        lo, hi = segment.doc_chunks[found[1]], segment.doc_chunks[found[1] + 1]
        return [(int(s), int(e)) for s, e in segment.spans[lo:hi]]

    def search(
        self,
        query: str | None = None,
        k: int = 10,
        where: dict[str, Any] | None = None,
        mode: str = DEFAULT_MODE,
        *,
        vector: np.ndarray | Sequence[float] | None = None,
        fusion: str = DEFAULT_FUSION,
        alpha: float = DEFAULT_ALPHA,
        exact: bool = False,
        evidence: str = DEFAULT_EVIDENCE,
        feedback: bool = True,
    ) -> list[Hit]:
        """The ``k`` documents that best match ``query`` (or ``vector``).

        Args:
            query: Free text.
            k: Number of documents to return (default 10, at most 10,000).
            where: Metadata filter (see ``retriever.search.filters``); applied before
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
            alpha: Weight of the dense side in the convex combination (default 0.7).
            exact: Search every vector exactly, also in segments that have an
                approximate index (default False).
            evidence: Which sentences of each hit's chunk to return as its
                evidence (``Hit.evidence``): ``"terms"`` (default: scored by
                the query's terms, no model call), ``"auto"`` (terms, and the
                model for chunks without any: a few dozen sentences at most),
                ``"semantic"`` (every sentence by the model: slower) or ``"none"``.
            feedback: For hybrid: search the dense side again with the query moved toward the
                first fusion's top documents (pseudo-relevance feedback; default True).

        Returns:
            Hits by descending score, one per document, each showing its best
            chunk and the sentences of it that match best. Scores are cosine similarity (dense), BM25 (bm25) or the
            fused score (hybrid).

        Raises:
            BadInputError: An argument is wrong (empty query, ``k`` out of
                range, unknown mode or fusion, a vector of the wrong shape).
            FilterError: ``where`` is not a valid filter.
            DeadlineExceededError: Run under ``retriever.deadline`` and past it.
        """
        validation.check_search_args(
            query, k, where, mode, self.SEARCH_MODES, fusion, alpha, vector is not None, exact, evidence, feedback)
        if vector is not None:
            vector = validation.check_vectors(vector, 1, self.model["dim"], "query vector", single=True)
        if query is None:
            mode = "dense"
        return self.searcher.search(query, vector, k, where, mode, fusion, alpha, exact, evidence, feedback)

    def info(self) -> dict[str, Any]:
        """Counts, model, index and catalog settings, segments, taggers, size on disk and last update."""
        n_docs, n_chunks = self.catalog.counts()
        catalog_state = self.catalog.state()
        view = self.reader.current()
        model = self.models.model_at(view.generation)
        return {
            "path": str(self.root.resolve()),
            "documents": n_docs,
            "chunks": n_chunks,
            "model": model["name"],
            "model_sha256": model["sha256"],
            "dim": model["dim"],
            "chunking": self.manifest.chunking,
            "index": view.summary(),
            "index_policy": self.manifest.index,
            "segments": view.segments(),
            "format_version": self.manifest.format_version,
            "catalog": self.catalog.safe_url(),
            "generation": catalog_state.generation,
            "size_bytes": size_on_disk(self.root),
            "taggers": {name: {"method": t.method, "labels": t.classes} for name, t in load_taggers(self.root).items()},
            "created_at": self.manifest.created_at,
            "updated_at": dt.datetime.fromtimestamp(catalog_state.updated_at, dt.timezone.utc).isoformat(
                timespec="seconds"
            ),
        }

    def metadata_fields(self) -> dict[str, list]:
        """Metadata field names with example values (for building filters); a tagged field lists all its labels."""
        fields = self.catalog.metadata_fields()
        for name, tagger in load_taggers(self.root).items():
            seen = fields.get(name, [])
            fields[name] = list(tagger.classes) + [v for v in seen if v not in tagger.classes]
        return fields

    # -- tagging ----------------------------------------------------------
    def tag(
        self,
        field: str,
        examples: Examples,
        *,
        method: str = tag_fitting.AUTO,
        min_probability: float = 0.0,
        dry_run: bool = False,
        progress: bool = False,
    ) -> TagReport:
        """Learn ``field`` from a few labelled examples and label every document, in one generation.

        A logistic regression over the documents' stored vectors (each
        document's chunk vectors pooled into one; nothing is re-encoded) or
        over TF-IDF; ``auto`` cross-validates both on the examples and takes
        the better. Every document gets ``field`` and ``<field>_probability``
        in its metadata, so ``where={field: label}`` filters by it; the tagger
        is kept in the collection and labels documents added later, at commit.

        Args:
            field: The metadata field to write.
            examples: An examples file (``.jsonl`` or ``.csv``) or records with
                ``label`` and ``id`` (a document here) or ``text``
                (``retriever.tagging.examples``).
            method: ``"auto"`` (default), ``"embedding"`` or ``"tfidf"``.
            min_probability: Leave ``field`` out below this probability (default 0.0).
            dry_run: Only count what each label would get; write nothing.
            progress: Show a progress bar.

        Returns:
            The ``TagReport``: label counts, documents written, the evaluation behind ``auto``.

        Raises:
            BadInputError: A bad field, method, probability or example (an id not
                in the collection, one label only).
            CollectionLockedError: Another process held the write lock too long.
        """
        started = time.perf_counter()
        checked = self._tag_examples(examples)
        validation.check_tag_args(field, method, min_probability)
        tagger, evaluation = tag_fitting.train(self, field, checked, method, min_probability)
        report = tag_applying.apply_tagger(self, tagger, checked, dry_run=dry_run, progress=progress)
        report.evaluation = evaluation
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def evaluate_tags(self, examples: Examples, *, folds: int | None = None) -> TagEvaluation:
        """Cross-validate the frozen-embedding tagger against TF-IDF on ``examples``; writes nothing.

        Args:
            examples: As for ``tag``.
            folds: Stratified folds (default: 5, or fewer when a label has fewer examples).

        Returns:
            Accuracy, macro-F1 and per-label figures of both, and the method ``tag`` would use.
        """
        if folds is not None and (isinstance(folds, bool) or not isinstance(folds, int) or folds < 2):
            raise BadInputError(f"folds must be an integer of at least 2, got {folds!r}")
        return tag_fitting.evaluate(self, self._tag_examples(examples), folds)

    def stale_tags(self, field: str) -> list[str]:
        """Ids of documents the tagger of ``field`` has not labelled (added while it could not), sorted.

        Raises:
            BadInputError: The collection has no tagger for ``field``.
        """
        validation.check_tag_args(field, tag_fitting.AUTO, 0.0)
        return tag_applying.stale_documents(self, field)

    def taggers(self) -> dict[str, dict[str, Any]]:
        """The collection's taggers by field: method, labels, model, examples per label, threshold, training time."""
        return {
            name: {
                "method": t.method, "labels": t.classes, "model": t.model, "examples": t.examples,
                "min_probability": t.min_probability, "probability_field": t.probability_field,
                "trained_at": t.trained_at,
            }
            for name, t in load_taggers(self.root).items()
        }

    @staticmethod
    def _tag_examples(examples: Examples) -> list[Example]:
        if isinstance(examples, (str, os.PathLike)):
            from retriever.tagging.examples import read_examples

            return read_examples(examples)
        if isinstance(examples, (bytes, dict)) or not hasattr(examples, "__iter__"):
            raise BadInputError(f"examples must be a file path or a list of records, got {type(examples).__name__}")
        return check_examples(examples)

    # -- writes -----------------------------------------------------------
    def classify(self, documents: Iterable[Document | dict[str, Any]]) -> list[tuple[Document, Change]]:
        """What writing ``documents`` would do to each, against the catalog as it is now.

        Returns:
            ``(document, change)`` in order, ``change`` one of ``"unchanged"``
            (content stored already), ``"metadata"`` (a catalog update only) or
            ``"text"`` (new or changed: it must be chunked and embedded).

        Raises:
            BadInputError: A document breaks a field rule, or an id appears twice.
        """
        docs = validation.check_documents(documents)
        return classify(docs, self.catalog.lookup([d.id for d in docs]))

    def add(self, documents: Iterable[Document | dict[str, Any]], vectors: Vectors | None = None) -> WriteReport:
        """Insert new documents; an id that already exists is an error (use ``upsert``).

        Args:
            documents: Documents or mappings with ``id``, ``text``, ``title``, ``metadata``.
            vectors: Optional ``(len(documents), dim)`` embeddings computed elsewhere:
                each document is then stored as one chunk spanning its text, with
                its row of ``vectors`` (normalised) as the chunk's vector.

        Returns:
            What was written (``added``; ``chunks``).

        Raises:
            BadInputError: A document is bad, an id exists already or appears
                twice, or ``vectors`` do not fit.
            CollectionLockedError: Another process held the write lock too long.
        """
        docs = validation.check_documents(documents)
        existing = self.catalog.lookup([d.id for d in docs])
        if existing:
            raise BadInputError(
                f"{len(existing)} document id(s) already exist ({', '.join(sorted(existing)[:3])}); use upsert"
            )
        return self.upsert(docs, vectors=vectors)

    def upsert(self, documents: Iterable[Document | dict[str, Any]], vectors: Vectors | None = None) -> WriteReport:
        """Insert or replace documents, in one atomic commit.

        Unchanged documents (same content hash) cost nothing; changed ones
        have their old chunks replaced; a change of metadata alone re-embeds
        nothing. Embedding happens before the write lock is taken.

        Args:
            documents: As for ``add``.
            vectors: As for ``add``.

        Returns:
            What was written (``added``, ``updated``, ``unchanged``; ``chunks``).

        Raises:
            BadInputError: A document is bad, an id appears twice, or ``vectors`` do not fit.
            CollectionLockedError: Another process held the write lock too long.
        """
        docs = validation.check_documents(documents)
        embed = self._embed_fn(docs, vectors)
        if not docs:
            return WriteReport()
        plan = classify(docs, self.catalog.lookup([d.id for d in docs]))
        changed = [doc for doc, kind in plan if kind == "text"]
        others = [doc for doc, kind in plan if kind != "text"]
        try:
            kinds, chunks = self._write(changed, others, embed)
        except ModelSwitchedError:  # the collection switched models while they were embedded: embed them again
            kinds, chunks = self._write(changed, others, embed)
        return WriteReport.of([doc.id for doc in docs], kinds, chunks)

    def _write(self, changed: list[Document], others: list[Document], embed: EmbedFn) -> tuple[dict[str, str], int]:
        """Embed and stage ``changed``, then commit it with ``others`` under the lock (``Writer.commit``)."""
        staged = []
        try:
            with file_system_faults(self.root, "the write"):
                staged = [self._stage(changed, embed(changed))] if changed else []
                with self.writer.locked():
                    return self.writer.commit(staged, others, embed)
        finally:
            remove_files(staged)

    def prepare(
        self, documents: Iterable[Document | dict[str, Any]], vectors: Vectors | None = None, *, owner: str | None = None
    ) -> Path:
        """Chunk, embed and write documents as a staged segment, without committing.

        The part of a write that costs: a scale-out worker runs it anywhere the
        collection's directory is reachable, without the write lock; the driver
        publishes the result with ``commit_prepared``. Nothing is visible before that.

        Args:
            documents: As for ``add``.
            vectors: As for ``add``.
            owner: ``<host>-<pid>`` of the process that will commit the
                folder (default this one); while it lives, the folder is kept.

        Returns:
            The staged segment's folder (inside the collection).

        Raises:
            BadInputError: No documents, a bad one, or ``vectors`` that do not fit.
        """
        docs = validation.check_documents(documents)
        embed = self._embed_fn(docs, vectors)
        if not docs:
            raise BadInputError("prepare needs at least one document")
        return self._stage(docs, embed(docs), owner)

    def commit_prepared(self, folders: Sequence[str | os.PathLike]) -> WriteReport:
        """Publish staged segments (from ``prepare``) in one atomic commit, as ``upsert`` would.

        Documents whose stored content is identical are skipped, a change of
        metadata alone updates the catalog, and a later segment wins over an
        earlier one for the same id. The staged folders are consumed.

        Returns:
            What was written, in the order the ids first appear.

        Raises:
            BadInputError: A folder is not a staged segment of this collection, or is gone.
            CollectionLockedError: Another process held the write lock too long.
        """
        staged = [Path(folder) for folder in folders]
        check_staged(self.root, staged)
        rows = [row for folder in staged for row in staged_rows(folder)]
        try:
            with self.writer.locked():
                kinds, chunks = self.writer.commit(staged, [], self._embed_fn([], None))
        finally:
            remove_files(staged)
        return WriteReport.of(list(dict.fromkeys(row["id"] for row in rows)), kinds, chunks)

    def delete(self, ids: Iterable[str]) -> WriteReport:
        """Remove documents by id, in one atomic commit; unknown ids are ignored.

        Args:
            ids: A list (or any iterable) of id strings; one bare string is refused.

        Returns:
            The report, with ``deleted`` the ids that were stored.

        Raises:
            BadInputError: ``ids`` is a string or holds a non-string.
            CollectionLockedError: Another process held the write lock too long.
        """
        wanted = list(dict.fromkeys(validation.check_ids(ids)))
        with file_system_faults(self.root, "the delete"), self.writer.locked():
            return WriteReport(deleted=self.writer.delete(wanted))

    def snapshot(self, dest: str | os.PathLike) -> SnapshotReport:
        """Copy the last committed generation into the new directory ``dest``, while writers go on.

        Segment files are hard-linked where the file system allows (they never
        change), copied otherwise; the catalog is copied in one transaction
        (SQLite's online backup, or PostgreSQL's tables into a SQLite file).
        The snapshot is a collection: it opens and searches as one, and
        ``Collection.restore`` makes it live again elsewhere.

        Returns:
            What was written: generation, documents, segments, files linked
            and copied, bytes, tries, seconds.

        Raises:
            BadInputError: ``dest`` exists, lies inside this collection, or its parent is missing.
        """
        return take_snapshot(self.root, self.manifest, self.catalog, Path(dest), self.writer.locked)

    @classmethod
    def restore(cls, snapshot: str | os.PathLike, dest: str | os.PathLike) -> "Collection":
        """A snapshot made live at the new directory ``dest`` (the snapshot stays as it is), opened.

        Raises:
            CollectionNotFoundError: ``snapshot`` holds no collection.
            BadInputError: ``dest`` exists, or ``snapshot`` was not written by ``snapshot``.
        """
        restore_snapshot(Path(snapshot), Path(dest))
        return cls.open(dest)

    def check(self, repair: bool = False) -> CheckReport:
        """Verify every byte of the last committed generation against the checksums recorded when written.

        Args:
            repair: Publish a new generation without the damaged segments and
                their documents (their ids are in the report, for re-indexing).

        Returns:
            Segments and files verified, each damaged file with the reason,
            the ids of the documents of each damaged segment, segments too old
            to carry checksums, and whether a repair was published.
        """
        return check_collection(self.root, self.catalog, self.writer, repair)

    def compact(self, *, index_codes: str | None = None, max_segment_chunks: int | None = None) -> dict[str, Any]:
        """Merge the segments into as few as fit, without deleted rows, and shrink the catalog.

        Segments are packed into the fewest of at most ``max_segment_chunks``
        live chunks each (one, up to a million chunks). A merged segment's vector
        index is chosen by its size (see ``IndexPolicy``).

        Args:
            index_codes: Change what the collection's IVF indexes hold (``"float32"``,
                ``"compressed"`` or ``"always"``, see ``IndexPolicy.codes``): the manifest
                records it, and the merged segment is built with it, vectors kept (no re-embedding).
            max_segment_chunks: Largest segment written (default ``MergePolicy.max_merge_chunks``,
                1,000,000: a merge holds about 9 KB per chunk at its peak).

        Returns:
            ``{"segments_before", "segments_after", "bytes_before", "bytes_after"}``.
        """
        validation.check_optional_count(max_segment_chunks, "max_segment_chunks")
        before = size_on_disk(self.root)
        with file_system_faults(self.root, "compaction"), self.writer.locked():
            if index_codes is not None and index_codes != self.index_policy.codes:
                policy = dataclasses.replace(self.index_policy, codes=index_codes)  # checks the value
                manifest = self.models.reload()  # as another process may have rewritten it
                manifest.index["policy"] = policy.to_dict()
                manifest.save(self.root)  # a compaction killed after this is finished by the next one
                self.index_policy = self.writer.index_policy = self.searcher.index_policy = policy
            n_before, n_after = self.writer.compact(max_segment_chunks)
        return {
            "segments_before": n_before,
            "segments_after": n_after,
            "bytes_before": before,
            "bytes_after": size_on_disk(self.root),
        }

    def _embed_fn(self, docs: list[Document], vectors: Vectors | None) -> EmbedFn:
        """How this write turns documents into chunks: the model's, or ``vectors`` given for ``docs``."""
        if vectors is None:
            return lambda some: embed_documents(some, self.chunker, self.embedder)
        given = validation.check_vectors(vectors, len(docs), self.model["dim"], "vectors")
        return lambda some: given_vectors(some, docs, given)

    def _stage(self, docs: list[Document], embedded: dict, owner: str | None = None) -> Path:
        return stage(self.root, docs, embedded, self.analyzer, self.index_policy, owner)


def _write_empty_collection(root: Path, manifest: Manifest) -> None:
    """The directory, an empty catalog and ``HEAD`` at generation 0; the manifest last, since it makes a collection."""
    root.mkdir(parents=True, exist_ok=True)
    (root / SEGMENTS_DIR).mkdir(exist_ok=True)
    catalog = Catalog(manifest.catalog_location(root))
    try:
        catalog.create(manifest.uuid)
    finally:
        catalog.close()  # an open connection would hold SQLite's WAL unmerged until collected
    write_head(root, 0)
    manifest.save(root)


def _chunker_for(embedder: Embedder, window_tokens: int | None, overlap_tokens: int | None, title: bool) -> Chunker:
    """The chunker a new collection gets: the model's window (less two special tokens) unless told."""
    window = window_tokens or embedder.max_tokens - 2
    if window > embedder.max_tokens - 2:
        raise BadInputError(f"chunk window of {window} tokens exceeds the model's {embedder.max_tokens - 2}")
    if overlap_tokens is None:
        overlap_tokens = min(DEFAULT_OVERLAP, window // 4)
    return Chunker(embedder.text_tokenizer, window, overlap_tokens, title)
