"""``ShardedCollection``: N shard collections behind one folder, one manifest and the verbs of ``Collection``.

::

    col = ShardedCollection.create("notes", shards=4)        # packaged MiniLM by default
    col.upsert([{"id": "a", "text": "..."}])                 # each document to shard_of(id, 4)
    hits = col.search("what was said about X", k=5)          # as one collection of the same documents

Each shard is a whole ``Collection`` (``shard-000`` ..., ``layout``) with the
same model and settings; a document lives in the shard ``placement.shard_of``
names. Writes are routed by id and each shard's part written in a thread of
its own, each one an atomic commit of its shard: a write that fails, or a
process killed, part way leaves some shards written and others not, and
running the same write again finishes it (unchanged documents cost nothing).
Searches are exact (``search``): the same ids, order and scores as one
collection holding the same documents. Upkeep (compact, snapshot, check) runs
on every shard (``upkeep``); ``splitting.split_collection`` makes a sharded
collection of an existing one without re-embedding.
"""

from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from retriever import validation
from retriever.collection import Collection
from retriever.documents import Document, Hit
from retriever.encoding.embedder import Embedder
from retriever.errors import BadInputError, CorruptCollectionError
from retriever.search.evidence import DEFAULT_EVIDENCE
from retriever.search.options import DEFAULT_MODE, SEARCH_MODES, SearchOptions, options_or_fields
from retriever.sharding.layout import ShardsManifest, is_sharded
from retriever.sharding.placement import shard_of
from retriever.sharding.search import sharded_search
from retriever.sharding.upkeep import ShardedUpkeepVerbs
from retriever.sharding.writing import ShardedWriteVerbs
from retriever.storage.cleanup import prepare_directory

#: The most shards a collection may have.
MAX_SHARDS = 1000


class ShardedCollection(ShardedWriteVerbs, ShardedUpkeepVerbs):
    """A searchable set of documents spread over shard collections. Use ``create`` or ``open``.

    Attributes:
        root: The top folder (``shards.json`` and the shard folders).
        layout: Its ``ShardsManifest``.
        shards: The shard ``Collection``\\ s, in shard order.
    """

    SEARCH_MODES: tuple[str, ...] = SEARCH_MODES

    def __init__(self, root: Path, layout: ShardsManifest, shards: list[Collection]) -> None:
        self.root = Path(root)
        self.layout = layout
        self.shards = shards
        identities = {(shard.model["sha256"], shard.model["dim"]) for shard in shards}
        if len(identities) > 1:
            raise CorruptCollectionError(f"the shards of {self.root} hold different models")

    # -- construction -----------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        model: str | os.PathLike | Embedder | None = None,
        *,
        shards: int,
        lock_timeout: float = 60.0,
        **settings: Any,
    ) -> "ShardedCollection":
        """Create an empty sharded collection: ``shards`` empty shard collections and ``shards.json``.

        Args:
            path: Directory to create (it may exist if empty).
            model: As for ``Collection.create``; loaded once and shared by every shard.
            shards: How many shards (1 to ``MAX_SHARDS``); fixed for the collection's life.
            lock_timeout: Seconds a write waits for another writer, per shard.
            **settings: Any other keyword of ``Collection.create`` but ``catalog_url`` (each shard
                keeps its catalog in its folder): window, overlap, title prefix, index and merge
                policies, language settings.

        Raises:
            BadInputError: A bad argument, ``catalog_url`` given, or ``path`` not an empty directory.
        """
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
            raise BadInputError(f"shards must be a whole number from 1 to {MAX_SHARDS}, got {shards!r}")
        if settings.get("catalog_url") is not None:
            raise BadInputError("a sharded collection keeps a SQLite catalog in each shard: catalog_url is refused")
        settings.pop("catalog_url", None)
        root = Path(path)
        if is_sharded(root):
            raise BadInputError(f"a sharded collection already exists at {root}")
        validation.check_create_args(
            path,
            model,
            settings.get("window_tokens"),
            settings.get("overlap_tokens"),
            settings.get("title_prefix", True),
            lock_timeout,
        )
        prepare_directory(root)
        embedder = model if validation.is_embedder(model) else Embedder(model)
        layout = ShardsManifest.new(shards)
        made = [
            Collection.create(root / name, embedder, lock_timeout=lock_timeout, **settings) for name in layout.shards
        ]
        layout.save(root)  # last: a folder without it is no collection yet
        return cls(root, layout, made)

    @classmethod
    def open(
        cls, path: str | os.PathLike, model: str | os.PathLike | Embedder | None = None, *, lock_timeout: float = 60.0
    ) -> "ShardedCollection":
        """Open an existing sharded collection (every shard).

        Args:
            path: The top folder.
            model: As for ``Collection.open``; by default shard 0's model is loaded when first needed and
                shared by every shard.
            lock_timeout: Seconds a write waits for another writer, per shard.

        Raises:
            CollectionNotFoundError: ``path`` holds no sharded collection, or a shard is missing.
            CorruptCollectionError: ``shards.json`` is malformed, or the shards hold different models.
            ModelMismatchError: ``model`` is not the collection's model.
        """
        validation.check_open_args(path, model, lock_timeout)
        root = Path(path)
        layout = ShardsManifest.load(root)
        embedder = None
        if model is not None:
            embedder = model if validation.is_embedder(model) else Embedder(model)
        opened: list[Collection] = []
        try:
            for name in layout.shards:
                opened.append(Collection.open(root / name, embedder, lock_timeout=lock_timeout))
            return cls(root, layout, opened)
        except BaseException:
            for shard in opened:
                shard.close()
            raise

    def close(self) -> None:
        """Release every shard's catalog connections."""
        for shard in self.shards:
            shard.close()

    def __enter__(self) -> "ShardedCollection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ShardedCollection({str(self.root)!r}, shards={len(self.shards)}, model={self.model['name']!r})"

    # -- model and settings (every shard's are the same: shard 0's) --------
    @property
    def manifest(self):
        """Shard 0's ``Manifest`` (model identity, chunking, index and BM25 settings, which every shard shares)."""
        return self.shards[0].manifest

    @property
    def model(self) -> dict[str, Any]:
        """Identity of the model the documents were embedded with (``Collection.model``)."""
        return self.shards[0].model

    @property
    def embedder(self):
        """The collection's ``Embedder``, loaded once and shared by every shard."""
        return self.share_model()

    @property
    def chunker(self):
        """The ``Chunker`` with the collection's window, overlap and title settings."""
        return self.shards[0].chunker

    @property
    def analyzer(self):
        """The BM25 analysis every shard writes and searches with."""
        return self.shards[0].analyzer

    @property
    def index_policy(self):
        """Which vector index a segment gets (every shard's)."""
        return self.shards[0].index_policy

    def share_model(self) -> Embedder:
        """Shard 0's embedder, adopted by every other shard so that the model is loaded once; returned."""
        embedder = self.shards[0].embedder
        for shard in self.shards[1:]:
            if embedder.weights_sha256 not in shard.models.loaded:
                shard.models.adopt(embedder, shard.reader.current().generation)
        return embedder

    def embed(self, texts: Sequence[str] | str, **kwargs) -> np.ndarray:
        """Embed texts with the collection's model (``Collection.embed``)."""
        return self.embedder.embed(texts, **kwargs)

    def shard_for(self, doc_id: str) -> Collection:
        """The shard that holds (or would hold) document ``doc_id``."""
        return self.shards[shard_of(doc_id, len(self.shards))]

    # -- reads ------------------------------------------------------------
    def __len__(self) -> int:
        return sum(len(shard) for shard in self.shards)

    def __contains__(self, doc_id: str) -> bool:
        validation.check_id_arg(doc_id)
        return doc_id in self.shard_for(doc_id)

    def ids(self, where: dict[str, Any] | None = None) -> Iterator[str]:
        """Every document id, sorted (all shards merged); with ``where``, those whose metadata match it."""
        return heapq.merge(*(shard.ids(where) for shard in self.shards))

    def get(self, doc_id: str) -> Document | None:
        """The stored document, from its shard, or ``None`` when ``doc_id`` is unknown."""
        validation.check_id_arg(doc_id)
        return self.shard_for(doc_id).get(doc_id)

    def chunk_spans(self, doc_id: str) -> list[tuple[int, int]]:
        """Character spans of a document's chunks, in order (``Collection.chunk_spans``)."""
        validation.check_id_arg(doc_id)
        return self.shard_for(doc_id).chunk_spans(doc_id)

    def metadata_fields(self) -> dict[str, list]:
        """Metadata field names with example values, over every shard (``Collection.metadata_fields``)."""
        fields: dict[str, list] = {}
        for shard in self.shards:
            for name, values in shard.metadata_fields().items():
                known = fields.setdefault(name, [])
                known.extend(value for value in values if value not in known)
        return fields

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
        """The ``k`` documents that best match ``query`` (or ``vector``), over every shard.

        Takes what ``Collection.search`` takes and answers as it would for one collection holding the same
        documents: the same ids in the same order, with the same scores (``sharding.search``). Unset
        ``fusion``, ``alpha`` and ``feedback`` come from the collection's settings (``search_settings``).

        Raises:
            BadInputError: An argument is wrong. FilterError: ``where`` is not a valid filter.
        """
        validation.check_query(query, vector is not None)
        given = dict(k=k, where=where, mode=mode, fusion=fusion, alpha=alpha, exact=exact, evidence=evidence)
        options = options_or_fields(options, **given, feedback=feedback, lang=lang)
        options = options.for_query(query).settled(self.search_settings())
        if vector is not None:
            vector = validation.check_vectors(vector, 1, self.model["dim"], "query vector", single=True)
        return sharded_search(self.shards, query, vector, options)
