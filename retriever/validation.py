"""Argument checks for the public Python API (``Collection``'s and ``Embedder``'s verbs).

The one validation layer: each public verb calls one of these first, and
nothing below the public surface checks the same again. A wrong type or
value is a ``BadInputError`` (``FilterError`` for ``where``) that names the
argument, never a ``TypeError`` or ``OverflowError`` from deep inside.
Checks that must look at every item of an iterable return the items (as a
list, so a generator is read once, or coerced, as ``check_documents`` does).
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable, Sequence

import numpy as np

from retriever.documents import Document, coerce_document
from retriever.errors import BadInputError
from retriever.filters import validate_where
from retriever.search.evidence import EVIDENCE_MODES
from retriever.search.fusion import FUSIONS
from retriever.unicode_policy import check_utf8, printable

MAX_K = 10_000  # documents one search may return


def check_query(query: Any, has_vector: bool = False) -> None:
    """``query`` of a search: a non-blank UTF-8 string, or ``None`` when a query vector is given (``has_vector``)."""
    if query is None and not has_vector:
        raise BadInputError("query is empty: give a query text or a query vector")
    if query is not None:
        if not isinstance(query, str):
            raise BadInputError(f"query must be a string, got {type(query).__name__}")
        check_utf8(query, "query")
        if not query.strip():
            raise BadInputError("query is empty")


def check_search_options(options: Any, modes: Sequence[str]) -> None:
    """The fields of a ``SearchOptions`` (``k``, ``where``, ``mode``, ``fusion``, ``alpha``, ``exact``,
    ``evidence``, ``feedback``); ``modes`` are the search modes there are.

    Raises:
        BadInputError: A field is wrong, named in the message. FilterError: ``where`` is not a valid filter.
    """
    if not isinstance(options.exact, bool):
        raise BadInputError(f"exact must be True or False, got {printable(repr(options.exact), 40)}")
    if options.feedback is not None and not isinstance(options.feedback, bool):
        raise BadInputError(f"feedback must be True or False, got {printable(repr(options.feedback), 40)}")
    evidence = options.evidence
    if not isinstance(evidence, str) or evidence not in EVIDENCE_MODES:
        raise BadInputError(f"evidence must be one of {', '.join(EVIDENCE_MODES)}, got {printable(repr(evidence), 40)}")
    if not _is_int(options.k) or not 1 <= options.k <= MAX_K:
        raise BadInputError(f"k must be an integer from 1 to {MAX_K:,}, got {printable(repr(options.k), 40)}")
    if options.where is not None:
        validate_where(options.where)
    mode, fusion, alpha = options.mode, options.fusion, options.alpha
    if not isinstance(mode, str) or mode not in modes:
        raise BadInputError(f"unknown search mode {printable(repr(mode), 40)}; use one of {', '.join(modes)}")
    if fusion is not None and (not isinstance(fusion, str) or fusion not in FUSIONS):
        raise BadInputError(f"unknown fusion {printable(repr(fusion), 40)}; use one of {', '.join(FUSIONS)}")
    if alpha is not None and (not _is_number(alpha) or not 0.0 <= alpha <= 1.0):
        raise BadInputError(f"alpha must be a number from 0 to 1, got {printable(repr(alpha), 40)}")


def check_query_mode(query: Any, options: Any) -> None:
    """A search with no query text (a vector alone) is dense or hybrid, never ``bm25`` (``options.mode``)."""
    if query is None and options.mode == "bm25":
        raise BadInputError("bm25 search needs a query text; a vector alone searches in dense mode")


def check_search_args(query: Any, options: Any, has_vector: bool = False) -> None:
    """A search's ``query`` (``check_query``) against its ``SearchOptions``, checked when they were made
    (``check_query_mode``)."""
    check_query(query, has_vector)
    check_query_mode(query, options)


def check_documents(documents: Any) -> list[Document]:
    """``documents`` of ``add`` / ``upsert`` / ``prepare``: one document, or an iterable of them (read once).

    Returns:
        The items as ``Document``s (mappings coerced, every field checked).
    Raises:
        BadInputError: An item is no document, breaks a field rule, or its id appears twice.
    """
    if isinstance(documents, (Document, dict)):
        documents = [documents]
    elif isinstance(documents, (str, bytes, bytearray)) or not isinstance(documents, Iterable):
        raise BadInputError(
            f"documents must be a Document, a dict or an iterable of them, got {type(documents).__name__}"
        )
    docs, seen = [], set()
    for i, item in enumerate(documents):
        if not isinstance(item, (Document, dict)):
            raise BadInputError(f"documents[{i}] must be a Document or a dict, got {type(item).__name__}")
        doc = coerce_document(item)
        if doc.id in seen:
            raise BadInputError(f"document id {doc.id!r} appears twice in one batch")
        seen.add(doc.id)
        docs.append(doc)
    return docs


def check_vectors(vectors: Any, n: int, dim: int, what: str = "vectors", single: bool = False) -> np.ndarray:
    """Caller-given embeddings as ``(n, dim)`` float32 rows of unit norm (``single``: one ``(dim,)`` vector).

    Raises:
        BadInputError: They are not numbers, have another shape, hold NaN or
            infinite values, or an all-zero row.
    """
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


def check_ids(ids: Any) -> list[str]:
    """``ids`` of ``delete``: an iterable of id strings (read once); a bare string is refused."""
    if isinstance(ids, (str, bytes, bytearray)):
        raise BadInputError(
            f"ids must be a list of ids, not one {type(ids).__name__}: write delete([{printable(repr(ids), 60)}])"
        )
    if not isinstance(ids, Iterable) or isinstance(ids, dict):
        raise BadInputError(f"ids must be an iterable of strings, got {type(ids).__name__}")
    items = list(ids)
    for i, doc_id in enumerate(items):
        check_id_arg(doc_id, f"ids[{i}]")
    return items


def check_id_arg(doc_id: Any, name: str = "doc_id") -> None:
    """One id given to look up (``get``, ``in``, ``delete``): a UTF-8 string."""
    if not isinstance(doc_id, str):
        raise BadInputError(f"{name} must be a string, got {type(doc_id).__name__}")
    check_utf8(doc_id, name)


def check_texts(texts: Any) -> list[str]:
    """``texts`` of ``embed``: one string or an iterable of strings (read once), all UTF-8."""
    if isinstance(texts, str):
        texts = [texts]
    elif isinstance(texts, (bytes, bytearray, dict)) or not isinstance(texts, Iterable):
        raise BadInputError(f"texts must be a string or an iterable of strings, got {type(texts).__name__}")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise BadInputError(f"texts[{i}] must be a string, got {type(text).__name__}")
        check_utf8(text, f"texts[{i}]")
    return items


def check_embed_options(batch_size: Any, on_overflow: Any) -> None:
    """``batch_size`` (``None`` or a positive integer) and ``on_overflow`` (``"warn"`` or ``"error"``) of ``embed``."""
    if batch_size is not None and (not _is_int(batch_size) or batch_size < 1):
        raise BadInputError(f"batch_size must be a positive integer, got {printable(repr(batch_size), 40)}")
    if on_overflow not in ("warn", "error"):
        raise BadInputError(f"on_overflow must be 'warn' or 'error', not {printable(repr(on_overflow), 40)}")


def check_optional_count(value: Any, name: str) -> None:
    """``None`` or a positive integer."""
    if value is not None and (not _is_int(value) or value < 1):
        raise BadInputError(f"{name} must be a positive integer or None, got {printable(repr(value), 40)}")


def check_path(path: Any, name: str = "path") -> None:
    """A collection directory: a string or ``os.PathLike``, not empty."""
    if not isinstance(path, (str, os.PathLike)):
        raise BadInputError(f"{name} must be a string or a path, got {type(path).__name__}")
    if not os.fspath(path):
        raise BadInputError(f"{name} is empty")
    if isinstance(os.fspath(path), bytes):
        raise BadInputError(f"{name} must be text, not bytes")
    if "\x00" in os.fspath(path):
        raise BadInputError(f"{name} holds a NUL character")


def check_open_args(path: Any, model: Any, lock_timeout: Any) -> None:
    """Arguments of ``Collection.open``."""
    check_path(path)
    check_model(model)
    check_lock_timeout(lock_timeout)


def check_create_args(
    path: Any, model: Any, window_tokens: Any, overlap_tokens: Any, title_prefix: Any, lock_timeout: Any
) -> None:
    """Arguments of ``Collection.create``."""
    check_open_args(path, model, lock_timeout)
    for name, value in (("window_tokens", window_tokens), ("overlap_tokens", overlap_tokens)):
        if value is not None and (not _is_int(value) or value < (1 if name == "window_tokens" else 0)):
            raise BadInputError(f"{name} must be a positive integer or None, got {printable(repr(value), 40)}")
    if not isinstance(title_prefix, bool):
        raise BadInputError(f"title_prefix must be True or False, got {printable(repr(title_prefix), 40)}")


def check_model(model: Any) -> None:
    """A model: ``None``, a directory or hub id (string or path), or an ``Embedder`` (its interface)."""
    if model is None:
        return
    if is_embedder(model):
        return
    if not isinstance(model, (str, os.PathLike)):
        raise BadInputError(f"model must be a path, a hub id or an Embedder, got {type(model).__name__}")
    check_path(model, "model")


def is_embedder(model: Any) -> bool:
    """Whether ``model`` is an embedder object rather than a model's name (read from its class, loading nothing)."""
    return not isinstance(model, (str, os.PathLike)) and all(
        hasattr(type(model), name) for name in ("embed", "embed_token_ids", "identity", "weights_sha256")
    )


def check_lock_timeout(lock_timeout: Any) -> None:
    """Seconds to wait for the write lock: a finite number, -1 (forever) or more."""
    if not _is_number(lock_timeout) or lock_timeout < -1:
        raise BadInputError(f"lock_timeout must be a number of seconds, got {printable(repr(lock_timeout), 40)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return _is_int(value)


MAX_FIELD_CHARS = 200  # a tagged field's name


def check_tag_args(field: Any, method: Any, min_probability: Any) -> None:
    """``tag``'s field (a short printable name), method (``auto``, ``embedding``, ``tfidf``) and threshold in [0, 1]."""
    if not isinstance(field, str) or not field.strip():
        raise BadInputError(f"field must be a non-empty string, got {printable(repr(field), 60)}")
    check_utf8(field, "field")
    if len(field) > MAX_FIELD_CHARS or not field.isprintable():
        raise BadInputError(f"field {printable(field, 60)} must be printable and at most {MAX_FIELD_CHARS} characters")
    if method not in ("auto", "embedding", "tfidf"):
        raise BadInputError(f"unknown tagging method {printable(repr(method), 60)}; choose auto, embedding or tfidf")
    if (
        isinstance(min_probability, bool)
        or not isinstance(min_probability, (int, float))
        or not (0.0 <= min_probability <= 1.0)
    ):
        raise BadInputError(f"min_probability must be a number from 0 to 1, got {printable(repr(min_probability), 60)}")
