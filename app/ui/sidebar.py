"""The UI's sidebar: the collection picker, its stats, and the search settings.

The settings are the result count, the mode, one widget per metadata field
(``f:<collection>:<field>`` keys, so each collection keeps its own) and a
free JSON filter, ANDed together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from app.ui.filters import FilterField, build_where, field_clause
from app.ui.formatting import format_age, format_bytes, model_label
from app.ui.json_input import parse_object
from app.ui.markup import BRAND, md_escape, stats_html
from app.ui.state import clear_filters, default_mode, url_index
from retriever import Collection
from retriever.errors import BadInputError

MAX_K = 50
DEFAULT_K = 10


def sidebar_collection(root: Path, paths: list[Path]) -> Path:
    """The brand, and a picker (``c`` in the URL) when ``root`` holds more than one collection.

    Args:
        root: the ``-c`` folder.
        paths: its collections, at least one.

    Returns:
        The chosen collection's directory.
    """
    st.sidebar.html(f'{BRAND}<div class="ss-sub">Search your documents by meaning</div>')
    if len(paths) == 1:
        return paths[0]
    names = [p.name for p in paths]
    name = st.sidebar.selectbox(
        "Collection",
        names,
        index=url_index(names, "c"),
        key="c",
        bind="query-params",
        help=f"Collections found in {md_escape(root)}",
    )
    return paths[names.index(name)]


def sidebar_stats(info: dict[str, Any]) -> None:
    """Document and chunk counts, model, index, size and age, from ``Collection.info()``."""
    left, right = st.sidebar.columns(2)
    left.metric("Documents", f"{info['documents']:,}")
    right.metric("Chunks", f"{info['chunks']:,}")
    st.sidebar.html(
        stats_html(
            [
                ("Model", model_label(info["model"]), info["model"]),
                ("Index", info["index"], f"dimension {info['dim']}"),
                ("On disk", format_bytes(info["size_bytes"]), f"{info['size_bytes']:,} bytes"),
                ("Updated", format_age(info["updated_at"]), info["updated_at"]),
            ]
        )
    )


def sidebar_settings(specs: list[FilterField], scope: str) -> tuple[int, str, dict | None, str | None]:
    """The search settings.

    Args:
        specs: the filterable metadata fields.
        scope: the collection's name, part of each field widget's key.

    Returns:
        ``(k, mode, where, problem)``: the combined filter (None for none), and a
        message when the JSON filter is unusable (None when it is fine).
    """
    st.sidebar.divider()
    st.sidebar.subheader("Search settings")
    k = st.sidebar.slider(
        "Results", 1, MAX_K, DEFAULT_K, key="k", bind="query-params", help="How many documents to show"
    )
    modes = list(Collection.SEARCH_MODES)
    mode = st.sidebar.selectbox(
        "Mode",
        modes,
        index=modes.index(default_mode()),
        key="mode",
        bind="query-params",
        help="How documents are matched to the query",
    )
    st.sidebar.subheader("Filters")
    clauses, keys = field_filters(specs, scope)
    if not specs:
        st.sidebar.caption("No metadata fields to filter on yet.")
    extra, problem = json_filter()
    st.sidebar.button(
        "Clear filters", on_click=clear_filters, args=(keys,), icon=":material/filter_alt_off:", type="tertiary"
    )
    return k, mode, build_where(clauses, extra), problem


def field_filters(specs: list[FilterField], scope: str) -> tuple[list[dict | None], list[str]]:
    """One widget per field: a multiselect, yes/no, a from/to range, or exact text.

    Returns:
        ``(clauses, keys)``: each field's filter clause (None when unset), and
        every widget key, for "Clear filters".
    """
    clauses, keys = [], []
    for spec in specs:
        key = f"f:{scope}:{spec.name}"
        keys.append(key)
        label = md_escape(spec.name)
        if spec.kind == "choice":
            value = st.sidebar.multiselect(label, spec.options, key=key, placeholder="any")
        elif spec.kind == "bool":
            value = st.sidebar.selectbox(label, ["any", "yes", "no"], key=key)
        elif spec.kind == "number":
            low_col, high_col = st.sidebar.columns(2)
            seen = f"Values seen: {spec.low:g} to {spec.high:g}"
            low = low_col.number_input(f"{label} from", value=None, key=key + ":lo", placeholder="any", help=seen)
            high = high_col.number_input(f"{label} to", value=None, key=key + ":hi", placeholder="any", help=seen)
            keys += [key + ":lo", key + ":hi"]
            value = (low, high)
        else:
            value = st.sidebar.text_input(label, key=key, placeholder="exact value, or a, b, c")
        clauses.append(field_clause(spec, value))
    return clauses, keys


def json_filter() -> tuple[dict | None, str | None]:
    """The free JSON filter (``where`` in the URL).

    Returns:
        ``(filter, problem)``: the parsed object (None when empty or unusable),
        and why it is unusable (None when it is fine).
    """
    raw = st.sidebar.text_area(
        "Filter as JSON",
        key="where",
        bind="query-params",
        height=80,
        placeholder='{"year": {"$gte": 2020}}',
        help="Any filter semsearch understands: equality, $gt $gte $lt $lte $ne, $in $nin, $and $or $not. "
        "Combined with the fields above.",
    )
    if not raw or not raw.strip():
        return None, None
    try:
        return parse_object(raw, "the JSON filter"), None
    except BadInputError as exc:
        return None, str(exc)
