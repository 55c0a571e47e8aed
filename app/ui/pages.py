"""The UI's reading pages: search and its result cards, a document, the collection, an empty root.

Each page is a function that draws into the current Streamlit container; the
page script (``app/ui/page.py``) chooses which. The add page is ``app.ui.add``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import streamlit as st

from app.ui.cache import run_search
from app.ui.filters import FilterField
from app.ui.formatting import format_age, format_bytes, metadata_chips
from app.ui.judging import QueryJudgments
from app.ui.markup import BRAND, FILE_ICON, esc, md_escape, plural, table_html
from app.ui.opening import offer_original, show_opener
from app.ui.passages import document_html
from app.ui.state import close_document, current_query, document_span, open_document
from retriever import BadInputError, Collection, SemsearchError
from retriever.locations import describe, location_at, without_locations

FILTER_KINDS = {"choice": "pick from values", "number": "range", "bool": "yes / no", "text": "exact value"}


def search_page(
    col: Collection,
    path: Path,
    uuid: str,
    generation: int,
    info: dict[str, Any],
    k: int,
    mode: str,
    where: dict | None,
    problem: str | None,
) -> None:
    """The search box (``q`` in the URL) and, for a query, its result cards.

    Args:
        col: the open collection at ``path``, whose manifest has ``uuid``.
        generation: its committed generation (a cache key).
        info: ``Collection.info()``.
        k, mode, where: the sidebar's settings.
        problem: why the sidebar's filter is unusable, or None.
    """
    query = st.text_input(
        "Search",
        key="q",
        bind="query-params",
        label_visibility="collapsed",
        icon=":material/search:",
        placeholder="Search by meaning: ask a question or describe what you are looking for",
    )
    if info["documents"] == 0:
        st.info(
            "This collection is empty. Add documents in the **Add documents** tab, or index files with "
            f"`semsearch index PATH -c {path}`.",
            icon=":material/inbox:",
        )
        return
    if not query or not query.strip():
        st.caption(
            f"Type a question and press Enter to search {info['documents']:,} documents. "
            "The link in the address bar keeps the search."
        )
        return
    if problem:
        st.warning(f"Fix the filter to search: {md_escape(problem)}.", icon=":material/filter_alt:")
        return
    where_json = json.dumps(where, sort_keys=True) if where else ""
    try:
        rows, took = run_search(str(path), uuid, generation, query.strip(), k, mode, where_json, col)
    except BadInputError as exc:
        st.warning(f"This search could not run: {md_escape(exc)}", icon=":material/warning:")
        return
    except SemsearchError as exc:
        st.error(f"Search failed: {md_escape(exc)}", icon=":material/error:")
        return
    filtered = " · filtered" if where else ""
    if not rows:
        if where:
            st.info(
                "No documents match these filters. Loosen or clear them in the sidebar.", icon=":material/search_off:"
            )
        else:
            st.info("No results.", icon=":material/search_off:")
        return
    st.html(f'<div class="ss-meta">{plural(len(rows), "result")} · {took * 1000:.0f} ms · {esc(mode)}{filtered}</div>')
    judgments = QueryJudgments.load(col, query)
    judgments.show_stray_notice([row["id"] for row in rows])
    for rank, row in enumerate(rows, 1):
        result_card(rank, row, judgments)


def result_card(rank: int, row: dict[str, Any], judgments: QueryJudgments) -> None:
    """One hit: rank, title, score, source and the place in it, the marked passage, metadata chips,
    "View document", the control that opens the original there (``app.ui.opening``), and whether it
    answers the query (``app.ui.judging``).

    Args:
        rank: 1 for the best hit.
        row: one of ``run_search``'s rows.
        judgments: the judgments given for the query, and their controls.
    """
    title = row["title"] or row["id"]
    source = row["source"]
    place = describe(row["location"])
    where = f' &nbsp;·&nbsp; <span class="ss-place">{esc(place)}</span>' if place else ""
    shown_id = "" if source == row["id"] else f" &nbsp;·&nbsp; id {esc(row['id'])}"
    source_line = FILE_ICON + esc(source) + where + shown_id
    chips = metadata_chips(row["metadata"])
    with st.container(border=True):
        st.html(
            f'<div class="ss-card-head"><span class="ss-rank">#{rank}</span>'
            f'<span class="ss-title">{esc(title)}</span>'
            f'<span class="ss-score" title="score of the best-matching passage">{row["score"]:.3f}</span></div>'
            f'<div class="ss-source">{source_line}</div>'
            f'<div class="ss-passage">{row["passage_html"]}</div>'
            + (f'<div class="ss-chips">{chips}</div>' if chips else "")
        )
        with st.container(horizontal=True, vertical_alignment="center"):
            st.button(
                "View document",
                key=f"view-{rank}",
                icon=":material/article:",
                type="tertiary",
                on_click=open_document,
                args=(row["id"], row["start"], row["end"]),
            )
            chosen = offer_original(
                row["metadata"], row["location"], key=str(rank), choice=f"{row['id']}\n{row['start']}"
            )
            judgments.controls(row["id"], key=str(rank))
        judgments.show_notice(row["id"])
        if chosen is not None:
            show_opener(chosen, row["location"])


def document_page(col: Collection, doc_id: str) -> None:
    """Document ``doc_id`` in full, the URL's ``span`` marked, with its metadata, and whether it answers the
    URL's query (``q``) when there is one; a warning when it is gone."""
    st.button("Back to results", icon=":material/arrow_back:", on_click=close_document, type="tertiary")
    query = current_query()
    doc = col.get(doc_id)
    if doc is None:
        st.warning(
            f"There is no document with id “{md_escape(doc_id)}” in this collection; it may have been deleted.",
            icon=":material/search_off:",
        )
        return
    start, end = document_span()
    location = location_at(doc.metadata, start) if start is not None and end is not None else None
    st.html(f'<div class="ss-brand">{esc(doc.title or doc.id)}</div>')
    source = doc.metadata.get("source")
    facts = [f"id {esc(doc.id)}"] + ([f"source {esc(source)}"] if source and source != doc.id else [])
    facts += [f'<span class="ss-place">{esc(describe(location))}</span>'] if location else []
    facts.append(f"{len(doc.text):,} characters")
    if start is not None and end is not None and end <= len(doc.text):
        facts.append(f'matched passage at characters {start:,}–{end:,} (<a href="#match">jump to it</a>)')
    st.html(f'<div class="ss-meta">{" · ".join(facts)}</div>')
    if query:
        judge_document(col, query, doc.id)
    chosen = offer_original(doc.metadata, location, key="document")
    if chosen is not None:
        show_opener(chosen, location)
    body, note = document_html(doc.text, start, end)
    if note:
        st.caption(note)
    st.html(f'<div class="ss-doc">{body}</div>')
    shown = without_locations(doc.metadata)  # the columns behind the place shown above, not a field to read
    if shown:
        with st.expander("Metadata", icon=":material/sell:"):
            st.json(shown)


def judge_document(col: Collection, query: str, doc_id: str) -> None:
    """The document view's line "Does it answer “QUERY”?" with the judgment controls (``app.ui.judging``)."""
    judgments = QueryJudgments.load(col, query, doc_id=doc_id)
    with st.container(horizontal=True, vertical_alignment="center"):
        st.html(f'<div class="ss-meta" style="margin:0">Does it answer “{esc(query)}”?</div>', width="content")
        judgments.controls(doc_id, key="document")
    judgments.show_notice(doc_id)


def collection_page(info: dict[str, Any], specs: list[FilterField], fields_examples: dict[str, list]) -> None:
    """The collection's facts, and its metadata fields with how each is filtered and example values.

    Args:
        info: ``Collection.info()``.
        specs: the fields the sidebar offers widgets for.
        fields_examples: ``Collection.metadata_fields()``: field name -> sample values.
    """
    chunking = info["chunking"]
    st.html(
        table_html(
            [
                ("Path", info["path"]),
                ("Documents", f"{info['documents']:,}"),
                ("Chunks", f"{info['chunks']:,}"),
                ("Model", f"{info['model']} (dimension {info['dim']}, sha256 {info['model_sha256'][:12]})"),
                ("Chunking", f"{chunking['window_tokens']} tokens, overlap {chunking['overlap_tokens']}"),
                ("Index", info["index"]),
                ("Search modes", ", ".join(Collection.SEARCH_MODES)),
                ("Catalog", info["catalog"]),
                ("Size on disk", f"{format_bytes(info['size_bytes'])} ({info['size_bytes']:,} bytes)"),
                ("Created", info["created_at"]),
                (
                    "Last update",
                    f"{info['updated_at']} ({format_age(info['updated_at'])}), generation {info['generation']}",
                ),
            ]
        )
    )
    st.subheader("Metadata fields")
    if not fields_examples:
        st.caption("No document has metadata yet.")
        return
    kinds = {spec.name: spec.kind for spec in specs}
    st.dataframe(
        {
            "Field": list(fields_examples),
            "Filter": [FILTER_KINDS.get(kinds.get(name, ""), "JSON filter") for name in fields_examples],
            "Example values": [", ".join(map(str, values[:8])) for values in fields_examples.values()],
        },
        hide_index=True,
        width="stretch",
    )


def empty_root(root: Path) -> None:
    """``root`` holds no collection: say how to make one, and offer to create an empty one there."""
    st.html(BRAND)
    if root.is_dir() and any(root.iterdir()):
        st.info(
            f"**{md_escape(root)}** holds no collection, and none of its sub-folders does. Create one with "
            f"`semsearch index PATH -c {root}/NAME`, then reload this page.",
            icon=":material/folder_off:",
        )
        return
    st.info(
        f"There is no collection at **{md_escape(root)}** yet. Create an empty one here (with the packaged "
        "all-MiniLM-L6-v2 model) and add documents, or index files with "
        f"`semsearch index PATH -c {root}`.",
        icon=":material/inbox:",
    )
    if st.button("Create the collection", type="primary", icon=":material/add:"):
        try:
            with st.spinner("Creating the collection…"):
                Collection.create(root).close()
        except SemsearchError as exc:
            st.error(f"Could not create it: {md_escape(exc)}")
            return
        st.rerun()
