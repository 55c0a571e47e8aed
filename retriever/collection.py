"""``Collection``: one directory holding a manifest, a SQL catalog and immutable segments.

The facade users touch from Python::

    col = Collection.create("notes")                     # packaged MiniLM by default
    col.upsert([{"id": "a", "text": "...", "metadata": {"year": 2024}}])   # its language detected: metadata lang
    hits = col.search("what was said about X", k=5, where={"lang": "en"})
    col.delete(["a"])

Each verb checks its arguments once (``retriever.validation``) and delegates:
reads and searches to a ``Searcher`` over the ``GenerationReader``'s view of
the committed generation, writes to the ``Writer`` (commit, deletions,
merging under the single-writer lock), encoding to the ``Embedder`` and
``Chunker``. The rooms are ``retriever.encoding``, ``retriever.storage`` and
``retriever.search``. This module holds construction, the model, reads and
search; the verbs of other concerns are mixed in: writes
(``collection_writing``), tagging (``collection_tagging``) and upkeep
(``collection_upkeep``: model switch, snapshots, check, compaction).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from retriever import validation
from retriever.collection_evaluating import EvaluationVerbs
from retriever.collection_info import collection_info, metadata_fields
from retriever.collection_judging import JudgingVerbs
from retriever.collection_setup import chunker_for, language_settings, new_manifest, write_empty_collection
from retriever.collection_tagging import Examples, TaggingVerbs
from retriever.collection_upkeep import UpkeepVerbs
from retriever.collection_writing import Vectors, WriteVerbs
from retriever.documents import Document, Hit
from retriever.encoding.chunking import Chunker
from retriever.encoding.embedder import Embedder
from retriever.errors import CorruptCollectionError
from retriever.models_in_force import ModelsInForce
from retriever.search import vector_index
from retriever.search.bm25 import Analyzer
from retriever.search.evidence import DEFAULT_EVIDENCE
from retriever.search.languages import ENGLISH
from retriever.search.multilingual import MultilingualAnalyzer
from retriever.search.options import DEFAULT_MODE, SEARCH_MODES, SearchOptions, options_or_fields
from retriever.search.searcher import Searcher
from retriever.storage.catalog import Catalog
from retriever.storage.changes import WriteReport
from retriever.storage.cleanup import prepare_directory
from retriever.storage.manifest import MANIFEST, Manifest
from retriever.storage.merging import MergePolicy
from retriever.storage.reader import GenerationReader
from retriever.storage.writer import Writer
from retriever.tagging.applying import TagReport
from retriever.tagging.on_commit import TagOnCommit

__all__ = ["Collection", "WriteReport", "TagReport", "DEFAULT_MODE", "SearchOptions", "Vectors", "Examples"]

#: How long ``get`` waits for a commit whose catalog rows it read to publish their generation.
PUBLISH_WAIT_S = 2.0


class Collection(WriteVerbs, TaggingVerbs, UpkeepVerbs, JudgingVerbs, EvaluationVerbs):
    """A searchable set of documents in one directory. Use ``create`` or ``open``.

    Attributes:
        root: The collection directory.
        manifest: Its ``Manifest`` (model identity, chunking, index and BM25 settings).
        catalog: The SQL catalog of document rows and generations.
        reader: The committed generation's view (``reader.current()``).
        writer: The single writer (``writer.locked()``, commit, delete, merge).
    """

    SEARCH_MODES: tuple[str, ...] = SEARCH_MODES

    def __init__(self, root: Path, manifest: Manifest, embedder: Embedder | None, lock_timeout: float):
        self.root = Path(root)
        self.models = ModelsInForce(self.root, manifest)
        self._chunker: Chunker | None = None
        self.catalog = Catalog(manifest.catalog_location(self.root))
        english = Analyzer(manifest.bm25["stemmer"], manifest.bm25["stopwords"])
        self.analyzer = MultilingualAnalyzer(english, manifest.bm25.get("languages"))  # none: English only
        self.index_policy = vector_index.IndexPolicy.from_dict(manifest.index.get("policy"))
        self.merge_policy = MergePolicy.from_dict(manifest.index.get("merge"))
        self.reader = GenerationReader(self.root, self.catalog)
        self.writer = Writer(
            self.root, self.catalog, self.reader, self.analyzer, self.index_policy, self.merge_policy, lock_timeout
        )
        self.writer.on_commit = TagOnCommit(self.root, lambda: self.models.model_at(self.catalog.state().generation))
        self.timings = self.writer.timings  # what listens to it hears searches, commits and merges
        self.searcher = Searcher(
            self.catalog,
            self.reader,
            self.analyzer,
            manifest.bm25,
            self.index_policy,
            lambda texts, generation: self.models.embedder_at(generation).embed(texts),
            self.timings,
        )
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
        language: str = ENGLISH,
        detect_languages: bool = True,
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
            language: The default language of its documents (ISO 639-1, default ``"en"``): the
                language of a document too short, or too unsure, to detect.
            detect_languages: Detect each document's language (default True); without, a
                document is in ``language`` unless its metadata's ``lang`` says otherwise.

        Returns:
            The new, empty collection.

        Raises:
            BadInputError: An argument is wrong, ``path`` is a file, holds a
                collection already, or holds other files; or the window
                exceeds the model's.
        """
        validation.check_create_args(path, model, window_tokens, overlap_tokens, title_prefix, lock_timeout)
        languages = language_settings(language, detect_languages)
        root = Path(path)
        prepare_directory(root)
        embedder = model if validation.is_embedder(model) else Embedder(model)
        chunker = chunker_for(embedder, window_tokens, overlap_tokens, title_prefix)
        manifest = new_manifest(embedder, chunker, index_policy, merge_policy, catalog_url, languages)
        write_empty_collection(root, manifest)
        collection = cls(root, manifest, embedder, lock_timeout)
        collection._chunker = chunker
        return collection

    @classmethod
    def open(
        cls, path: str | os.PathLike, model: str | os.PathLike | Embedder | None = None, *, lock_timeout: float = 60.0
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
            FilterError: ``where`` is not a valid filter (see ``retriever.filters``).
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
        waited_until = time.monotonic() + PUBLISH_WAIT_S
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
            if self.reader.current() is view:
                again = self.catalog.lookup([doc_id]).get(doc_id)
                if again is None or again.key != row.key or time.monotonic() > waited_until:
                    return None  # deleted or replaced since the catalog was read; or never published
                time.sleep(0.005)  # a commit published its catalog rows and is about to move HEAD

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
        fusion: str | None = None,
        alpha: float | None = None,
        exact: bool = False,
        evidence: str = DEFAULT_EVIDENCE,
        feedback: bool | None = None,
        lang: str | None = None,
        options: SearchOptions | None = None,
    ) -> list[Hit]:
        """The ``k`` documents that best match ``query`` (or ``vector``).

        Args:
            query: Free text.
            k: Number of documents to return (default 10, at most 10,000).
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
                by ``alpha``) or ``"rrf"`` (reciprocal-rank fusion); default: the
                collection's own setting (``search_settings``).
            alpha: Weight of the dense side in the convex combination; default: the collection's own.
            exact: Search every vector exactly, also in segments that have an
                approximate index (default False).
            evidence: Which sentences of each hit's chunk to return as its
                evidence (``Hit.evidence``): ``"terms"`` (default: scored by
                the query's terms, no model call), ``"auto"`` (terms, and the
                model for chunks without any: a few dozen sentences at most),
                ``"semantic"`` (every sentence by the model: slower) or ``"none"``.
            feedback: For hybrid: search the dense side again with the query moved toward the
                first fusion's top documents (pseudo-relevance feedback); default: the collection's own.
            lang: The query's language (ISO 639-1): BM25 reads it so, and so matches documents in that
                language; default: read in each language the collection holds.
            options: All but ``query`` and ``vector`` as one ``SearchOptions`` (its keywords then left unset).

        Returns:
            Hits by descending score, one per document, each showing its best
            chunk and the sentences of it that match best. Scores are cosine similarity (dense), BM25 (bm25) or the
            fused score (hybrid).

        Raises:
            BadInputError: An argument is wrong (empty query, ``k`` out of
                range, unknown mode, fusion or language, a vector of the wrong shape).
            FilterError: ``where`` is not a valid filter.
            DeadlineExceededError: Run under ``retriever.deadline`` and past it.
        """
        validation.check_query(query, vector is not None)
        options = (
            options_or_fields(
                options,
                k=k,
                where=where,
                mode=mode,
                fusion=fusion,
                alpha=alpha,
                exact=exact,
                evidence=evidence,
                feedback=feedback,
                lang=lang,
            )
            .for_query(query)
            .settled(self.search_settings())
        )
        if vector is not None:
            vector = validation.check_vectors(vector, 1, self.model["dim"], "query vector", single=True)
        return self.searcher.search(query, vector, options)

    def info(self) -> dict[str, Any]:
        """Counts (documents per language too), model, index and catalog settings, segments, taggers, size on disk
        and last update."""
        return collection_info(self)

    def metadata_fields(self) -> dict[str, list]:
        """Metadata field names with example values (for building filters); a tagged field lists all its labels."""
        return metadata_fields(self.catalog, self.root)
