"""The UI's cached resources: the open collection, its info, and search results.

A ``Collection`` is opened once per process and directory (and uuid, so a
re-created one is re-opened). Everything read from it is cached on the
committed generation, so any write, from this UI or another process, makes
the next read fresh. Parameters named ``_col`` are not part of a cache key.
"""

from __future__ import annotations

import json
import time
from typing import Any

import streamlit as st

from app.ui.formatting import source_of
from app.ui.passages import passage_html
from app.ui.state import default_mode
from retriever import Collection

LOCK_TIMEOUT_S = 30.0


@st.cache_resource(show_spinner="Opening the collection and loading its model…", max_entries=16)
def open_collection(path: str, uuid: str) -> Collection:
    """One open ``Collection`` per directory (and per uuid: a re-created one is re-opened)."""
    collection = Collection.open(path, lock_timeout=LOCK_TIMEOUT_S)
    collection.embed(["warm up"])  # load the model now, not on the first search
    return collection


@st.cache_data(show_spinner=False, max_entries=64)
def collection_info(path: str, uuid: str, generation: int, _col: Collection) -> dict[str, Any]:
    """``Collection.info()`` of ``_col`` at ``generation``."""
    return _col.info()


@st.cache_data(show_spinner=False, max_entries=64)
def metadata_examples(path: str, uuid: str, generation: int, _col: Collection) -> dict[str, list]:
    """``Collection.metadata_fields()`` of ``_col`` at ``generation``: field name -> sample values."""
    return _col.metadata_fields()


@st.cache_data(show_spinner=False, max_entries=256, ttl=3600)
def run_search(
    path: str, uuid: str, generation: int, query: str, k: int, mode: str, where_json: str, _col: Collection
) -> tuple[list[dict[str, Any]], float]:
    """Hits as dicts with their passage HTML, and the seconds the search took.

    Keyed on the committed generation, so any write makes the next search fresh.

    Args:
        path, uuid, generation: which collection, at which state (cache key only).
        query: the query text.
        k: how many hits.
        mode: one of ``Collection.SEARCH_MODES``; the default is not passed on.
        where_json: the filter as JSON, ``""`` for none.
        _col: the open collection.

    Returns:
        ``(rows, seconds)``: each row is ``Hit.to_dict()`` plus ``passage_html`` and ``source``.

    Raises:
        SemsearchError: the search failed (``BadInputError`` for a bad query or filter).
    """
    where = json.loads(where_json) if where_json else None
    kwargs: dict[str, Any] = {"k": k, "where": where, "evidence": "auto"}  # a person reads: meaning counts too
    if mode != default_mode():
        kwargs["mode"] = mode
    started = time.perf_counter()
    hits = _col.search(query, **kwargs)
    took = time.perf_counter() - started
    rows = []
    for hit in hits:
        doc = _col.get(hit.id)
        text = doc.text if doc is not None else hit.text
        start, end = (hit.start, hit.end) if doc is not None else (0, len(hit.text))
        evidence = hit.evidence if doc is not None else ()
        rows.append(
            hit.to_dict() | {"passage_html": passage_html(text, start, end, evidence), "source": source_of(hit)}
        )
    return rows, took
