"""LlamaIndex: ``SemsearchVectorStore`` and ``SemsearchEmbedding`` over a local collection.

The store delegates every verb to a ``Collection`` (a directory, opened or
created, or the object). A node is stored as one semsearch document: its id
is the node id, its text the node's text, its metadata the node's metadata
plus two fields of the store's own: ``ref_doc_id`` (the source document, so
that ``delete(ref_doc_id)`` removes every node of it and ``doc_ids=`` filters
by it) and ``_llamaindex`` (what rebuilds the node: its JSON without text,
metadata and embedding, its class, its length). Node metadata may not use
those two names. Documents written by semsearch itself come back as
``TextNode``s showing their best passage, with its character offsets.
A node found by a query also carries where in its source its passage starts,
where the document records its structure: ``location`` (``Hit.location``,
e.g. ``{"page": 12}``) and for a page ``page_label`` (the page number as text,
as LlamaIndex's PDF reader writes it) in its metadata, unless the node has a
field of that name itself; the ``locations`` columns stay out.

One model, one way to embed. The collection embeds with its own model; a
vector that comes with a node or a query is used only when it is known to be
that model's: made in this process by a ``SemsearchEmbedding`` with the same
weights, from a text within the model's window. ``add`` uses the nodes'
embeddings when every node of the call has such a vector, and otherwise
lets the collection embed the whole call (long texts split into chunks,
nothing cut), in one commit either way; a query vector that is not known is
replaced by the collection's embedding of ``query_str`` (a vector alone, with
no text, is used as given). An embedding whose length is not the model's
dimension is refused: it means the index was built with another
``embed_model``. So build indexes with ``embed_model=SemsearchEmbedding(...)``.

LlamaIndex ``MetadataFilters`` map onto semsearch's ``where`` (see
``where_from_filters``); an operator with no equivalent is a ``FilterError``.

Needs ``llama-index-core`` (``pip install 'semsearch[llamaindex]'``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.schema import BaseNode
    from llama_index.core.vector_stores.types import (
        BasePydanticVectorStore,
        MetadataFilters,
        VectorStoreQuery,
        VectorStoreQueryMode,
        VectorStoreQueryResult,
    )
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("the LlamaIndex adapter needs llama-index-core: pip install 'semsearch[llamaindex]'") from None

from retriever.collection import Collection
from retriever.documents import Hit
from retriever.encoding.embedder import Embedder
from retriever.errors import BadInputError
from retriever.integrations.llamaindex_nodes import (
    NODE_FIELD,
    REF_DOC_ID,
    document_of,
    is_node_box,
    location_fields,
    node_of,
    where_from_filters,
    where_of,
)

__all__ = ["SemsearchEmbedding", "SemsearchVectorStore", "where_from_filters", "REF_DOC_ID", "NODE_FIELD"]

SEARCH_MODES = {
    VectorStoreQueryMode.DEFAULT: "dense",
    VectorStoreQueryMode.HYBRID: "hybrid",
    VectorStoreQueryMode.SPARSE: "bm25",
    VectorStoreQueryMode.TEXT_SEARCH: "bm25",
}


# -- which vectors are the model's ---------------------------------------------
class _KnownVectors:
    """Fingerprints of the vectors ``SemsearchEmbedding`` made lately, per model (weights SHA-256).

    Holds the last ``capacity`` (16 bytes each); an older vector is simply not
    known any more, so its text is embedded again.
    """

    def __init__(self, capacity: int = 65_536) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _fingerprint(model_sha256: str, vector: Any) -> bytes:
        data = np.asarray(vector, dtype=np.float32).tobytes()
        return hashlib.blake2b(data, digest_size=16, key=model_sha256.encode()[:64]).digest()

    def record(self, model_sha256: str, vectors: Sequence[Any]) -> None:
        prints = [self._fingerprint(model_sha256, vector) for vector in vectors]
        with self._lock:
            for fingerprint in prints:
                self._seen[fingerprint] = None
                self._seen.move_to_end(fingerprint)
            while len(self._seen) > self.capacity:
                self._seen.popitem(last=False)

    def knows(self, model_sha256: str, vector: Any) -> bool:
        fingerprint = self._fingerprint(model_sha256, vector)
        with self._lock:
            return fingerprint in self._seen


_KNOWN_VECTORS = _KnownVectors()


# -- the embedding model ----------------------------------------------------------
class SemsearchEmbedding(BaseEmbedding):
    """A LlamaIndex embedding model from a semsearch model: unit vectors, mean-pooled, as a collection's own.

    Queries and texts are embedded alike, by the model's ``Embedder``; the async
    methods run it in a worker thread. A text longer than the model's window
    is cut (with an ``InputTooLongWarning``); the store re-embeds such a node
    in chunks.

    Args:
        model: A ``Collection`` (its model), an ``Embedder``, a model directory
            or name, or ``None`` for the packaged all-MiniLM-L6-v2.
        **kwargs (Any): LlamaIndex's ``BaseEmbedding`` fields, such as ``embed_batch_size``
            (texts per call of the model, default 64).
    """

    embed_batch_size: int = Field(default=64, gt=0, le=2048, description="Texts per call of the model.")
    _source: Collection | Embedder = PrivateAttr()

    def __init__(self, model: Collection | Embedder | str | os.PathLike | None = None, **kwargs: Any) -> None:
        source = model if isinstance(model, (Collection, Embedder)) else Embedder(model)
        name = source.model["name"] if isinstance(source, Collection) else source.name
        super().__init__(model_name=str(name), **kwargs)
        self._source = source

    @classmethod
    def class_name(cls) -> str:
        return "SemsearchEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The ``Embedder`` that makes the vectors (a collection's is loaded on first use)."""
        return self._source.embedder if isinstance(self._source, Collection) else self._source

    @property
    def model_sha256(self) -> str:
        """SHA-256 of the model's weights, as a collection's manifest records it."""
        if isinstance(self._source, Collection):
            return self._source.model["sha256"]
        return self._source.weights_sha256

    def embed(self, texts: list[str]) -> list[list[float]]:
        """``len(texts)`` vectors of ``dim`` floats, unit norm; those of texts within the window become known."""
        embedder = self.embedder
        vectors = embedder.embed(texts)
        within = np.asarray(embedder.count_tokens(texts), dtype=np.int64) <= embedder.max_tokens
        _KNOWN_VECTORS.record(self.model_sha256, vectors[within])
        return vectors.astype(np.float64).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.embed([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.embed(list(texts))

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)

    def get_agg_embedding_from_queries(self, queries: list[str], agg_fn: Callable | None = None) -> list[float]:
        """One vector for several query texts (their mean by default), known to be the model's."""
        return self._known_aggregate(queries, super().get_agg_embedding_from_queries(queries, agg_fn))

    async def aget_agg_embedding_from_queries(self, queries: list[str], agg_fn: Callable | None = None) -> list[float]:
        return self._known_aggregate(queries, await super().aget_agg_embedding_from_queries(queries, agg_fn))

    def _known_aggregate(self, queries: list[str], vector: list[float]) -> list[float]:
        if all(n <= self.embedder.max_tokens for n in self.embedder.count_tokens(queries)):
            _KNOWN_VECTORS.record(self.model_sha256, [vector])
        return vector


# -- the vector store ---------------------------------------------------------------
class SemsearchVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over a semsearch collection; nodes come back with their text and metadata.

    Query modes: ``DEFAULT`` (dense), ``HYBRID`` (semsearch's fusion of dense
    and BM25; ``alpha`` weighs the dense side), ``SPARSE`` and ``TEXT_SEARCH``
    (BM25). ``similarity_top_k`` nodes come back (``hybrid_top_k`` /
    ``sparse_top_k`` in their modes when set); filters, ``doc_ids`` and the
    ranking all run inside the collection.

    Args:
        collection: A ``Collection``, or a directory (opened, or created with
            ``model`` when it holds no collection).
        model: With a directory: the model of a collection created there
            (default: the packaged all-MiniLM-L6-v2), or the one an existing
            collection was built with.
    """

    stores_text: bool = True
    _collection: Collection = PrivateAttr()

    def __init__(self, collection: Collection | str | os.PathLike, *, model: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(collection, Collection):
            if model is not None:
                raise BadInputError("model= picks the model of a collection created here; give a directory with it")
            self._collection = collection
        elif isinstance(collection, (str, os.PathLike)):
            self._collection = Collection.open_or_create(Path(collection), model)
        else:
            raise BadInputError(f"collection must be a Collection or a directory, got {type(collection).__name__}")

    @classmethod
    def class_name(cls) -> str:
        return "SemsearchVectorStore"

    @property
    def client(self) -> Collection:
        return self._collection

    @property
    def collection(self) -> Collection:
        return self._collection

    # -- writes -------------------------------------------------------------------
    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """Store (or replace) nodes as documents, in one commit; returns their ids, in order.

        Raises:
            BadInputError: A node has an embedding of another dimension, empty
                text, metadata that is not JSON or uses a reserved field, or
                its id appears twice.
        """
        nodes = list(nodes)
        if not nodes:
            return []
        documents = [document_of(node) for node in nodes]
        self._collection.upsert(documents, vectors=self._model_vectors(nodes))
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        """Remove every node of the source document ``ref_doc_id`` (none there: nothing happens)."""
        ids = list(self._collection.ids(where={REF_DOC_ID: ref_doc_id}))
        if ids:
            self._collection.delete(ids)

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **kwargs: Any
    ) -> None:
        """Remove nodes by id, by filter, or those with a listed id that also match the filter."""
        ids = self._select(node_ids, filters, "delete_nodes")
        if ids:
            self._collection.delete(ids)

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Stored nodes by id (in the order given; unknown ids left out), by filter, or both."""
        documents = (self._collection.get(doc_id) for doc_id in self._select(node_ids, filters, "get_nodes"))
        return [node_of(doc.id, doc.text, doc.title, doc.metadata) for doc in documents if doc is not None]

    def clear(self) -> None:
        """Remove every document of the collection."""
        self._collection.delete(list(self._collection.ids()))

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **kwargs)

    # -- queries ------------------------------------------------------------------
    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The best nodes for ``query_str`` and/or ``query_embedding``, by the query's mode.

        Raises:
            BadInputError: An unsupported mode, ``node_ids`` (semsearch filters by
                metadata), no query text where the mode needs one, or an
                embedding of another dimension.
            FilterError: A filter with no semsearch equivalent.
        """
        requested = VectorStoreQueryMode(query.mode)
        mode = SEARCH_MODES.get(requested)
        if mode is None:
            supported = ", ".join(m.name for m in SEARCH_MODES)
            raise BadInputError(f"query mode {requested.name} is not supported by semsearch; use one of {supported}")
        if query.node_ids:
            raise BadInputError("node_ids cannot restrict a semsearch query; filter by metadata or doc_ids instead")
        text = query.query_str if query.query_str and query.query_str.strip() else None
        if text is None and mode != "dense":
            raise BadInputError(f"query mode {requested.name} needs query_str: its keyword side searches the text")
        vector = self._query_vector(query.query_embedding, text)
        if text is None and vector is None:
            raise BadInputError("the query needs query_str or query_embedding")
        k = {"hybrid": query.hybrid_top_k, "bm25": query.sparse_top_k}.get(mode) or query.similarity_top_k
        options = {"alpha": query.alpha} if mode == "hybrid" and query.alpha is not None else {}
        hits = self._collection.search(
            text, k=k, where=where_of(query), mode=mode, vector=vector, evidence="none", **options
        )
        return VectorStoreQueryResult(
            nodes=[self._node_of_hit(hit) for hit in hits],
            similarities=[hit.score for hit in hits],
            ids=[hit.id for hit in hits],
        )

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)

    # -- helpers ------------------------------------------------------------------
    def _model_vectors(self, nodes: list[BaseNode]) -> np.ndarray | None:
        """The nodes' embeddings when all are known to be the model's, else ``None`` (the collection embeds)."""
        for node in nodes:
            if node.embedding is not None:
                self._check_dimension(node.embedding, f"node {node.node_id!r}")
        model = self._collection.model["sha256"]
        if all(node.embedding is not None and _KNOWN_VECTORS.knows(model, node.embedding) for node in nodes):
            return np.asarray([node.embedding for node in nodes], dtype=np.float32)
        return None

    def _query_vector(self, embedding: list[float] | None, text: str | None) -> list[float] | None:
        """The query embedding when it is the model's or stands alone; ``None`` when ``text`` should be embedded."""
        if embedding is None:
            return None
        self._check_dimension(embedding, "the query embedding")
        if text is None or _KNOWN_VECTORS.knows(self._collection.model["sha256"], embedding):
            return embedding
        return None

    def _check_dimension(self, embedding: Sequence[float], what: str) -> None:
        model = self._collection.manifest.model
        if len(embedding) != model["dim"]:
            raise BadInputError(
                f"{what} has {len(embedding)} dimensions, but this collection's model {model['name']} makes "
                f"{model['dim']}: embed with SemsearchEmbedding(store.collection) (embed_model=...)"
            )

    def _select(self, node_ids: list[str] | None, filters: MetadataFilters | None, verb: str) -> list[str]:
        """The ids named, the ids matching ``filters``, or the named ids that match."""
        if node_ids is None and filters is None:
            raise BadInputError(f"{verb} needs node_ids or filters")
        if filters is None:
            return list(node_ids)
        matching = list(self._collection.ids(where=where_from_filters(filters)))
        if node_ids is None:
            return matching
        matched = set(matching)
        return [doc_id for doc_id in node_ids if doc_id in matched]

    def _node_of_hit(self, hit: Hit) -> BaseNode:
        """The node of a hit, with its whole text (a hit shows one chunk: the stored text is read when it has more)."""
        box = hit.metadata.get(NODE_FIELD)
        found = location_fields(hit.location)
        metadata = hit.metadata | {name: value for name, value in found.items() if name not in hit.metadata}
        if not is_node_box(box):
            return node_of(hit.id, hit.text, hit.title, metadata, span=(hit.start, hit.end))
        text = hit.text
        if not (hit.start == 0 and hit.end == box.get("chars")):
            stored = self._collection.get(hit.id)
            text = stored.text if stored is not None else hit.text
        return node_of(hit.id, text, hit.title, metadata)
