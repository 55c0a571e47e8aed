"""The UI's state: which collection folder, and what the URL and the session hold.

The query (``q``), result count (``k``), mode, JSON filter (``where``) and
collection (``c``) are widgets bound to the URL's query parameters; the open
document is ``doc`` with its matched ``span`` (``START-END``). The callbacks
here change that state; Streamlit reruns the script after each.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import streamlit as st

from app.ui import PAGE_SCRIPT
from retriever import Collection

ENV_COLLECTION = "SEMSEARCH_UI_COLLECTION"


def collection_root() -> Path | None:
    """The ``-c`` folder: from ``semsearch ui`` (environment) or ``streamlit run app/ui/page.py -- -c DIR``.

    Returns:
        The folder (``~`` expanded), or None when neither gives one.
    """
    value = os.environ.get(ENV_COLLECTION)
    if not value and sys.argv and Path(sys.argv[0]).resolve() == PAGE_SCRIPT:
        args = sys.argv[1:]
        for flag in ("-c", "--collection"):
            if flag in args and args.index(flag) + 1 < len(args):
                value = args[args.index(flag) + 1]
    return Path(value).expanduser() if value else None


def default_mode() -> str:
    """The mode ``Collection.search`` uses when none is given (never hard-coded here)."""
    parameter = inspect.signature(Collection.search).parameters.get("mode")
    modes = list(Collection.SEARCH_MODES)
    if parameter is not None and parameter.default in modes:
        return parameter.default
    return modes[0]


def url_index(options: list[str], key: str) -> int:
    """The default option of a URL-bound select: the URL's value when valid, else the first.

    Args:
        options: the select's options.
        key: the widget key, which is also its query parameter.

    Returns:
        An index into ``options``.
    """
    wanted = st.session_state.get(key, st.query_params.get(key))
    return options.index(wanted) if wanted in options else 0


def document_span() -> tuple[int | None, int | None]:
    """The URL's ``span`` as ``(start, end)`` character offsets, ``(None, None)`` when absent or malformed."""
    span = st.query_params.get("span", "")
    lo, _, hi = span.partition("-")
    if not all(part.isascii() and part.isdecimal() and len(part) <= 12 for part in (lo, hi)):
        return None, None  # "²-3" and "٣-5" are digits to str.isdigit, not to int()
    start, end = int(lo), int(hi)
    return (start, end) if start <= end else (None, None)


def current_query() -> str:
    """The search box's query, stripped; kept in the session while a document is shown (the box is not, so
    its URL parameter goes), else the URL's ``q``; ``""`` when there is none."""
    value = st.session_state.get("q") or st.query_params.get("q") or ""
    return value.strip() if isinstance(value, str) else ""


def open_document(doc_id: str, start: int, end: int) -> None:
    """Button callback: show document ``doc_id`` with characters ``start:end`` marked."""
    st.query_params["doc"] = doc_id
    st.query_params["span"] = f"{start}-{end}"


def close_document() -> None:
    """Button callback: back from the document to the results."""
    for key in ("doc", "span"):
        if key in st.query_params:
            del st.query_params[key]


def clear_filters(keys: list[str]) -> None:
    """Button callback: forget the filter widgets' values (``keys``) and empty the JSON filter."""
    for key in keys:
        if key in st.session_state:
            del st.session_state[key]
    st.session_state["where"] = ""
