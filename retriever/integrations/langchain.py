"""LangChain: ``SemsearchVectorStore`` and ``SemsearchEmbeddings`` over a collection or a running server.

::

    from retriever.integrations.langchain import SemsearchVectorStore

    store = SemsearchVectorStore("notes")          # opened, or created with the packaged all-MiniLM-L6-v2
    store.add_texts(["Green tea is steamed after picking."], [{"year": 2021}])
    store.similarity_search("how is tea made", k=3, filter={"year": {"$gte": 2020}})
    store.as_retriever(search_kwargs={"k": 3, "mode": "dense"})

The store translates and delegates; the collection does the work. A
LangChain ``Document`` is a semsearch document (``page_content`` its text,
``metadata`` its metadata, ``id`` its id; a missing id becomes a uuid4
string); adding is an upsert, one atomic commit (a server commits each request
of ``batch_size``); searching is ``Collection.search`` in the store's ``mode``
(``"hybrid"`` by default, ``"dense"`` or ``"bm25"``; ``mode=`` per call too)
with ``filter=`` in semsearch's ``where`` language (``retriever.filters``),
and a hit comes back as its best passage (the whole text when it fits one
chunk window) with the document's metadata and id. Where the document
records its structure, a hit's metadata also says where in its source the
passage starts: ``location`` (``Hit.location``, e.g. ``{"page": 12}``), and
for a page ``page`` and ``page_label`` as LangChain's PDF loaders write them
(``page`` counted from 0, ``page_label`` the page number from 1 as text);
the ``locations`` columns they come from stay out, and a field the document
has itself under one of these names is left as it is. ``get_by_ids`` returns
the stored documents, their metadata whole.

Which model embeds: the collection's, always, for documents and queries alike
(one model, one way to embed).

- A semsearch model (``embedding`` left out, or a ``SemsearchEmbeddings``):
  the collection's own ``Embedder``; a new directory gets the packaged model
  (or the ``SemsearchEmbeddings``' one).
- Any other LangChain ``Embeddings`` (a hosted model, a test fake): a new
  directory is created with an ``ExternalEmbedder`` around it
  (``embedder_for``). The manifest records its identity
  (``langchain:<package>.<Class>/<model>`` and its dimension), chunks go to
  its ``embed_documents`` and queries to its ``embed_query``, long texts are
  split into windows of 1,000 UTF-8 bytes, and reopening the directory with
  another model is a ``ModelMismatchError``. Such a collection is used
  through this store, or ``Collection.open(dir, model=embedder_for(embedding))``;
  ``semsearch serve`` cannot load its model.
- A ``RemoteCollection``: the server's model. With a ``Collection`` or
  ``RemoteCollection``, an ``embedding`` given too must be its model.

Scores are semsearch's: cosine (dense), BM25 (bm25) or the fused score in
[0, 1] (hybrid). As relevance in [0, 1], dense cosine is clipped at 0 and
fused scores kept; BM25 has no upper bound and gives none.

Needs ``langchain-core`` (``pip install 'semsearch[langchain]'``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import weakref
from typing import Any, Callable, Iterable, Sequence, Union

try:
    from langchain_core.documents import Document as LangChainDocument
    from langchain_core.embeddings import Embeddings
    from langchain_core.runnables.config import run_in_executor
    from langchain_core.vectorstores import VectorStore
    from langchain_core.vectorstores.utils import maximal_marginal_relevance
except ImportError:
    raise ImportError("retriever.integrations.langchain needs LangChain: pip install 'semsearch[langchain]'") from None

import numpy as np

from retriever import validation
from retriever.collection import DEFAULT_MODE, Collection
from retriever.documents import Document, Hit
from retriever.encoding.embedder import Embedder
from retriever.errors import BadInputError, ModelMismatchError
from retriever.integrations.external_embedder import DEFAULT_WINDOW_BYTES, ExternalEmbedder
from retriever.remote import DEFAULT_BATCH, RemoteCollection

__all__ = ["SemsearchVectorStore", "SemsearchEmbeddings", "embedder_for"]

Target = Union[Collection, RemoteCollection, str, os.PathLike]
MODEL_NAME_FIELDS = ("model", "model_name", "model_id")  # where LangChain classes keep their model's name
NAME_PREFIX = "langchain:"  # of the identity a LangChain model gets in a manifest


class SemsearchEmbeddings(Embeddings):
    """LangChain embeddings with a semsearch model: unit vectors, mean-pooled, as a collection stores them.

    Args:
        model: A ``Collection`` or ``RemoteCollection`` (its model), an
            ``Embedder``, a model directory or name, or ``None`` for the
            packaged all-MiniLM-L6-v2 (a name is loaded on first use).
        on_overflow: Text over the model's window: ``"warn"`` (default; its
            first window is embedded, with an ``InputTooLongWarning``) or ``"error"``.
    """

    def __init__(self, model: Any = None, *, on_overflow: str = "warn") -> None:
        validation.check_embed_options(None, on_overflow)
        if not isinstance(model, (Collection, RemoteCollection)) and not validation.is_embedder(model):
            validation.check_model(model)
        self._model, self.on_overflow = model, on_overflow

    @property
    def model(self) -> Collection | RemoteCollection | Embedder:
        """What embeds: the collection, the server or the ``Embedder`` (loaded here when named)."""
        if self._model is None or isinstance(self._model, (str, os.PathLike)):
            self._model = Embedder(self._model)
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One ``dim``-long vector per text."""
        return self._embed(texts).tolist() if len(texts) else []

    def embed_query(self, text: str) -> list[float]:
        """The text's vector (semsearch embeds queries and documents alike)."""
        return self._embed([text])[0].tolist()

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.embed(list(texts), on_overflow=self.on_overflow)


def embedder_for(
    embeddings: Embeddings, *, name: str | None = None, window_bytes: int = DEFAULT_WINDOW_BYTES
) -> ExternalEmbedder:
    """A collection's embedder around a LangChain ``Embeddings`` (see the module docstring).

    Args:
        embeddings: The LangChain model.
        name: Its identity (default ``langchain:<package>.<Class>``, and ``/<model>`` when it names one).
        window_bytes: Chunk window in UTF-8 bytes (default 1,000).
    """
    if not isinstance(embeddings, Embeddings):
        raise BadInputError(f"embeddings must be a LangChain Embeddings, got {type(embeddings).__name__}")
    kind = type(embeddings)
    label = f"{NAME_PREFIX}{kind.__module__.split('.')[0]}.{kind.__qualname__}"
    model = next(
        (v for v in (getattr(embeddings, f, None) for f in MODEL_NAME_FIELDS) if isinstance(v, str) and v), None
    )
    return ExternalEmbedder(
        name or (f"{label}/{model}" if model else label),
        embeddings.embed_documents,
        embeddings.embed_query,
        window_bytes=window_bytes,
        source=embeddings,
    )


class SemsearchVectorStore(VectorStore):
    """A LangChain vector store over a semsearch collection or server (see the module docstring).

    Args:
        collection: A ``Collection``, a ``RemoteCollection``, or a directory
            (opened, or created when it holds no collection).
        embedding: The model: left out for the collection's own (a new
            directory: the packaged one), a ``SemsearchEmbeddings``, or any
            LangChain ``Embeddings`` for a directory.
        mode: How searches rank: ``"hybrid"`` (default), ``"dense"`` or ``"bm25"``.

    Raises:
        BadInputError: A bad argument, or ``embedding`` cannot serve ``collection``.
        ModelMismatchError: ``collection`` was built with another model than ``embedding``.
    """

    def __init__(self, collection: Target, embedding: Embeddings | None = None, *, mode: str = DEFAULT_MODE) -> None:
        if not isinstance(mode, str) or mode not in Collection.SEARCH_MODES:
            raise BadInputError(f"mode must be one of {', '.join(Collection.SEARCH_MODES)}, got {mode!r}")
        if embedding is not None and not isinstance(embedding, Embeddings):
            raise BadInputError(f"embedding must be a LangChain Embeddings, got {type(embedding).__name__}")
        self.mode = mode
        self._embedding = embedding
        self._owns_collection = not isinstance(collection, (Collection, RemoteCollection))
        self.collection = _collection_for(collection, embedding)

    def __repr__(self) -> str:
        return f"SemsearchVectorStore({self.collection!r}, mode={self.mode!r})"

    def close(self) -> None:
        """Close the collection if this store opened it (from a directory)."""
        if self._owns_collection and isinstance(self.collection, Collection):
            self.collection.close()

    @property
    def embeddings(self) -> Embeddings:
        """The model that embeds the store's documents and queries, as LangChain ``Embeddings``."""
        if self._embedding is None:
            source = None
            if isinstance(self.collection, Collection):  # a LangChain model's embedder keeps it
                source = getattr(self.collection.embedder, "source", None)
            self._embedding = source if isinstance(source, Embeddings) else SemsearchEmbeddings(self.collection)
        return self._embedding

    # -- writes -----------------------------------------------------------
    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict] | None = None,
        *,
        ids: list[str | None] | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add or replace texts; returns their ids in order (missing ones made as uuid4 strings).

        Args:
            texts: The documents' texts.
            metadatas: One mapping per text (default none).
            ids: One id (or ``None``) per text.
            batch_size: Documents per commit (default: all in one locally, 64 per request to a server).
        """
        _refuse_unknown(kwargs, "add_texts")
        texts = list(texts)
        metadatas = [None] * len(texts) if metadatas is None else list(metadatas)
        ids = [None] * len(texts) if ids is None else list(ids)
        if not len(texts) == len(metadatas) == len(ids):
            raise BadInputError(
                f"{len(texts)} texts, {len(metadatas)} metadatas and {len(ids)} ids: give one of each per text"
            )
        ids = [str(uuid.uuid4()) if doc_id is None else doc_id for doc_id in ids]
        docs = [
            Document(id=doc_id, text=text, metadata=_copy(meta)) for doc_id, text, meta in zip(ids, texts, metadatas)
        ]
        self._write(docs, batch_size)
        return ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete documents by id; ids not stored are skipped. ``ids=None`` is refused, never "delete all"."""
        _refuse_unknown(kwargs, "delete")
        if ids is None:
            raise BadInputError(
                "delete needs the ids to delete; to empty a local collection pass list(store.collection.ids())"
            )
        self.collection.delete(ids)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[LangChainDocument]:
        """The stored documents (whole texts) with these ids, in the order given; unknown ids are left out."""
        found = [self.collection.get(doc_id) for doc_id in validation.check_ids(ids)]
        return [_langchain_document(doc.id, doc.text, doc.metadata) for doc in found if doc is not None]

    def _write(self, docs: list[Document], batch_size: int | None) -> None:
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise BadInputError(f"batch_size must be a positive integer or None, got {batch_size!r}")
        if isinstance(self.collection, RemoteCollection):
            self.collection.upsert(docs, batch_size=batch_size or DEFAULT_BATCH)
            return
        step = batch_size or max(len(docs), 1)
        for start in range(0, len(docs), step):
            self.collection.upsert(docs[start : start + step])

    # -- searches ---------------------------------------------------------
    def similarity_search(
        self,
        query: str,
        k: int = 4,
        filter: dict | None = None,  # noqa: A002 - LangChain's name
        **kwargs: Any,
    ) -> list[LangChainDocument]:
        """The ``k`` best documents for ``query`` (``filter``: a ``where``; ``mode=`` overrides the store's)."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: dict | None = None,  # noqa: A002
        **kwargs: Any,
    ) -> list[tuple[LangChainDocument, float]]:
        """``(document, score)`` by descending score: cosine (dense), BM25 (bm25) or fused (hybrid)."""
        mode = kwargs.pop("mode", self.mode)
        _refuse_unknown(kwargs, "similarity_search")
        hits = self.collection.search(query, k=k, where=filter, mode=mode, evidence="none")
        return [(_hit_document(hit), hit.score) for hit in hits]

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict | None = None,  # noqa: A002
        **kwargs: Any,
    ) -> list[LangChainDocument]:
        """Dense search with a query vector ``(dim,)`` from the store's model (``embeddings.embed_query``)."""
        _refuse_unknown(kwargs, "similarity_search_by_vector")
        hits = self.collection.search(vector=embedding, k=k, where=filter, evidence="none")
        return [_hit_document(hit) for hit in hits]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict | None = None,
        **kwargs: Any,
    ) -> list[LangChainDocument]:  # noqa: A002
        """``k`` of the best ``fetch_k`` that also differ from each other (``lambda_mult`` 1: relevance only)."""
        found = self.similarity_search_with_score(query, fetch_k, filter, **kwargs)
        if not found:
            return []
        query_vector = np.asarray(self.embeddings.embed_query(query))
        vectors = np.asarray(self.embeddings.embed_documents([doc.page_content for doc, _ in found]))
        return [found[i][0] for i in maximal_marginal_relevance(query_vector, vectors, lambda_mult=lambda_mult, k=k)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return _relevance(self.mode)

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[LangChainDocument, float]]:
        relevance = _relevance(kwargs.get("mode", self.mode))
        return [(doc, relevance(score)) for doc, score in self.similarity_search_with_score(query, k, **kwargs)]

    async def _asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[LangChainDocument, float]]:
        return await run_in_executor(None, self._similarity_search_with_relevance_scores, query, k, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict] | None = None,
        *,
        ids: list[str | None] | None = None,
        collection: Target | None = None,
        mode: str = DEFAULT_MODE,
        batch_size: int | None = None,
    ) -> "SemsearchVectorStore":
        """A store holding ``texts``, over ``collection`` (default: a new temporary directory, removed with the store).

        ``embedding`` chooses the model as in the constructor.
        """
        if collection is not None:
            store = cls(collection, embedding, mode=mode)
        else:
            folder = tempfile.mkdtemp(prefix="semsearch-langchain-")
            store = cls(folder, embedding, mode=mode)
            weakref.finalize(store, _remove, store.collection, folder)
        store.add_texts(texts, metadatas, ids=ids, batch_size=batch_size)
        return store


def _collection_for(target: Any, embedding: Embeddings | None) -> Collection | RemoteCollection:
    """The collection a store works on: ``target`` itself (``embedding`` must be its model), or a directory's."""
    if isinstance(target, (Collection, RemoteCollection)):
        if embedding is not None:
            _check_same_model(target, embedding)
        return target
    if not isinstance(target, (str, os.PathLike)):
        raise BadInputError(
            f"collection must be a Collection, a RemoteCollection or a directory, got {type(target).__name__}"
        )
    collection = Collection.open_or_create(target, _model_for(embedding))
    built_with = collection.model["name"]
    if embedding is None and built_with.startswith(NAME_PREFIX):
        collection.close()
        raise BadInputError(
            f"collection {target} was built with the LangChain model {built_with!r}: pass that model as embedding="
        )
    return collection


def _model_for(embedding: Embeddings | None) -> Any:
    """What ``Collection.open_or_create`` embeds with for ``embedding``."""
    if embedding is None:
        return None
    if not isinstance(embedding, SemsearchEmbeddings):
        return embedder_for(embedding)
    model = embedding.model
    if isinstance(model, RemoteCollection):
        raise BadInputError(
            "a server's embeddings cannot build a local collection: use the server's collection "
            "(SemsearchVectorStore(RemoteCollection(url))) or a local model"
        )
    return model.embedder if isinstance(model, Collection) else model


def _check_same_model(collection: Collection | RemoteCollection, embedding: Embeddings) -> None:
    """Raise ``ModelMismatchError`` unless ``embedding`` is the model ``collection`` embeds with."""
    expected, given = (
        _identity(collection),
        _identity(embedding.model if isinstance(embedding, SemsearchEmbeddings) else embedder_for(embedding)),
    )
    if given[1:] != expected[1:]:
        raise ModelMismatchError(
            f"the collection embeds with model {expected[0]!r} (dim {expected[2]}); the "
            f"embedding given is {given[0]!r} (dim {given[2]}): leave embedding out, or give "
            "the collection's own model"
        )


def _identity(model: Any) -> tuple[str, str, int]:
    """``(name, sha256, dim)`` of what embeds for a collection, a server or an embedder."""
    if isinstance(model, RemoteCollection):
        info = model.info()
        return info["model"], info["model_sha256"], int(info["dim"])
    if isinstance(model, Collection):
        identity = model.model
        return identity["name"], identity["sha256"], int(identity["dim"])
    return model.name, model.weights_sha256, int(model.dim)


def _relevance(mode: str) -> Callable[[float], float]:
    """Score to relevance in [0, 1] for ``mode``: cosine clipped at 0, fused kept; BM25 refused."""
    if mode == "bm25":
        raise BadInputError(
            "BM25 scores have no upper bound, so they give no relevance in [0, 1]: search in mode 'dense' or 'hybrid'"
        )
    if mode == "dense":
        return lambda score: min(1.0, max(0.0, score))
    return lambda score: score


def _langchain_document(doc_id: str, text: str, metadata: dict[str, Any]) -> LangChainDocument:
    return LangChainDocument(id=doc_id, page_content=text, metadata=dict(metadata))


def _hit_document(hit: Hit) -> LangChainDocument:
    """A hit as a LangChain document: its passage, and its metadata with where in its source it is."""
    found = location_fields(hit.location)
    return _langchain_document(
        hit.id, hit.text, hit.metadata | {name: value for name, value in found.items() if name not in hit.metadata}
    )


def location_fields(location: dict[str, Any] | None) -> dict[str, Any]:
    """A hit's location as LangChain metadata: ``{"location": ...}``, and for a page ``page`` (from 0) and
    ``page_label`` (the page number, from 1, as text), as LangChain's PDF loaders write them; ``{}`` for none."""
    if not location:
        return {}
    page = location.get("page")
    pages = {"page": page - 1, "page_label": str(page)} if isinstance(page, int) else {}
    return {"location": location, **pages}


def _copy(metadata: Any) -> Any:
    """The caller's metadata as a new mapping (``None``: empty), so that a write never changes it; else as given."""
    if metadata is None:
        return {}
    return dict(metadata) if isinstance(metadata, dict) else metadata


def _refuse_unknown(kwargs: dict[str, Any], verb: str) -> None:
    if kwargs:
        raise BadInputError(f"{verb} takes no argument(s) {', '.join(sorted(kwargs))}")


def _remove(collection: Collection | RemoteCollection, folder: str) -> None:
    """Close and delete a store's temporary collection."""
    if isinstance(collection, Collection):
        collection.close()
    shutil.rmtree(folder, ignore_errors=True)
