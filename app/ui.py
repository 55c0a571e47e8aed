"""The semsearch UI: search a collection by meaning, read documents, add more.

Run it with ``semsearch ui -c DIR`` (``DIR`` a collection, or a folder whose
sub-folders are collections). The query, result count, mode, filter and
collection live in the URL, so ``?q=...`` links to a search and a reload shows
its results again. The collection is opened once per process and re-checks
the committed generation on every search, so documents written by a batch job,
the HTTP API or another browser tab show up without a restart.

When ``SEMSEARCH_UI_PASSWORD`` is set, every browser session must first enter
that password (``semsearch ui`` refuses to listen off loopback without it).

This file is the entry script: sign-in, the sidebar, the pages. The pieces are
modules beside it, one concern each: ``ui_markup`` (icons, CSS, escaping),
``ui_state`` (the URL and session state) and ``ui_cache`` (the open
collection and cached reads); ``ui_support`` holds what is not Streamlit.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `streamlit run app/ui.py` puts app/ on the path, not the repository
    _REPO = str(Path(__file__).resolve().parent.parent)
    if _REPO not in sys.path:
        sys.path.insert(0, _REPO)

import streamlit as st

from app import ui_support as sup
from app.ui_cache import LOCK_TIMEOUT_S, collection_info, metadata_examples, open_collection, run_search
from app.ui_markup import BRAND, CSS, FILE_ICON, LOGO, esc, md_escape
from app.ui_state import (
    ENV_COLLECTION, clear_filters, close_document, collection_root, default_mode, open_document, url_index,
)
from retriever import BadInputError, Collection, SemsearchError
from retriever.errors import CollectionLockedError

# the names this script has always offered, the moved ones included
__all__ = [
    "BRAND", "CSS", "DEFAULT_K", "ENV_COLLECTION", "ENV_PASSWORD", "FILE_ICON", "LOCK_TIMEOUT_S", "LOGO", "MAX_K",
    "add_page", "add_pasted", "clear_filters", "close_document", "collection_info", "collection_page",
    "collection_root", "default_mode", "document_page", "empty_root", "esc", "main", "md_escape",
    "metadata_examples", "open_collection", "open_document", "result_card", "run", "run_search", "search_page",
    "show_add_report", "sidebar_collection", "sidebar_settings", "sidebar_stats", "signed_in",
]

log = logging.getLogger("semsearch.ui")

ENV_PASSWORD = "SEMSEARCH_UI_PASSWORD"
MAX_K = 50
DEFAULT_K = 10


# -- sidebar -----------------------------------------------------------------------
def sidebar_collection(root: Path, paths: list[Path]) -> Path:
    st.sidebar.html(f'{BRAND}<div class="ss-sub">Search your documents by meaning</div>')
    if len(paths) == 1:
        return paths[0]
    names = [p.name for p in paths]
    name = st.sidebar.selectbox("Collection", names, index=url_index(names, "c"), key="c", bind="query-params",
                                help=f"Collections found in {md_escape(root)}")
    return paths[names.index(name)]


def sidebar_stats(info: dict[str, Any]) -> None:
    left, right = st.sidebar.columns(2)
    left.metric("Documents", f"{info['documents']:,}")
    right.metric("Chunks", f"{info['chunks']:,}")
    rows = [
        ("Model", sup.model_label(info["model"]), info["model"]),
        ("Index", info["index"], f"dimension {info['dim']}"),
        ("On disk", sup.format_bytes(info["size_bytes"]), f"{info['size_bytes']:,} bytes"),
        ("Updated", sup.format_age(info["updated_at"]), info["updated_at"]),
    ]
    st.sidebar.html(
        '<dl class="ss-stats">'
        + "".join(f'<dt>{esc(k)}</dt><dd title="{esc(tip)}">{esc(v)}</dd>' for k, v, tip in rows)
        + "</dl>"
    )


def sidebar_settings(specs: list[sup.FilterField], scope: str) -> tuple[int, str, dict | None, str | None]:
    """k, mode, the combined filter, and a message when the filter is unusable."""
    st.sidebar.divider()
    st.sidebar.subheader("Search settings")
    k = st.sidebar.slider("Results", 1, MAX_K, DEFAULT_K, key="k", bind="query-params",
                          help="How many documents to show")
    modes = list(Collection.SEARCH_MODES)
    mode = st.sidebar.selectbox("Mode", modes, index=modes.index(default_mode()), key="mode", bind="query-params",
                                help="How documents are matched to the query")
    st.sidebar.subheader("Filters")
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
        clauses.append(sup.field_clause(spec, value))
    if not specs:
        st.sidebar.caption("No metadata fields to filter on yet.")
    raw = st.sidebar.text_area(
        "Filter as JSON", key="where", bind="query-params", height=80,
        placeholder='{"year": {"$gte": 2020}}',
        help="Any filter semsearch understands: equality, $gt $gte $lt $lte $ne, $in $nin, $and $or $not. "
        "Combined with the fields above.",
    )
    extra, problem = None, None
    if raw and raw.strip():
        try:
            extra = json.loads(raw)
            if not isinstance(extra, dict):
                problem = f"the JSON filter must be an object like {{\"lang\": \"en\"}}, not {type(extra).__name__}"
                extra = None
        except json.JSONDecodeError as exc:
            problem = f"the JSON filter is not valid JSON ({exc.msg} at character {exc.pos})"
    st.sidebar.button("Clear filters", on_click=clear_filters, args=(keys,), icon=":material/filter_alt_off:",
                      type="tertiary")
    return k, mode, sup.build_where(clauses, extra), problem


# -- pages -------------------------------------------------------------------------
def search_page(col: Collection, path: Path, uuid: str, generation: int, info: dict[str, Any],
                k: int, mode: str, where: dict | None, problem: str | None) -> None:
    query = st.text_input(
        "Search", key="q", bind="query-params", label_visibility="collapsed", icon=":material/search:",
        placeholder="Search by meaning: ask a question or describe what you are looking for",
    )
    if info["documents"] == 0:
        st.info("This collection is empty. Add documents in the **Add documents** tab, or index files with "
                f"`semsearch index PATH -c {path}`.", icon=":material/inbox:")
        return
    if not query or not query.strip():
        st.caption(f"Type a question and press Enter to search {info['documents']:,} documents. "
                   "The link in the address bar keeps the search.")
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
            st.info("No documents match these filters. Loosen or clear them in the sidebar.", icon=":material/search_off:")
        else:
            st.info("No results.", icon=":material/search_off:")
        return
    st.html(f'<div class="ss-meta">{len(rows)} result{"s" if len(rows) != 1 else ""} · '
            f'{took * 1000:.0f} ms · {esc(mode)}{filtered}</div>')
    for rank, row in enumerate(rows, 1):
        result_card(rank, row)


def result_card(rank: int, row: dict[str, Any]) -> None:
    title = row["title"] or row["id"]
    source = row["source"]
    source_line = FILE_ICON + esc(source) + ("" if source == row["id"] else f" &nbsp;·&nbsp; id {esc(row['id'])}")
    chips = sup.metadata_chips(row["metadata"])
    with st.container(border=True):
        st.html(
            f'<div class="ss-card-head"><span class="ss-rank">#{rank}</span>'
            f'<span class="ss-title">{esc(title)}</span>'
            f'<span class="ss-score" title="score of the best-matching passage">{row["score"]:.3f}</span></div>'
            f'<div class="ss-source">{source_line}</div>'
            f'<div class="ss-passage">{row["passage_html"]}</div>'
            + (f'<div class="ss-chips">{chips}</div>' if chips else "")
        )
        st.button("View document", key=f"view-{rank}", icon=":material/article:", type="tertiary",
                  on_click=open_document, args=(row["id"], row["start"], row["end"]))


def document_page(col: Collection, doc_id: str) -> None:
    st.button("Back to results", icon=":material/arrow_back:", on_click=close_document, type="tertiary")
    doc = col.get(doc_id)
    if doc is None:
        st.warning(f"There is no document with id “{md_escape(doc_id)}” in this collection; it may have been deleted.",
                   icon=":material/search_off:")
        return
    start = end = None
    span = st.query_params.get("span", "")
    if "-" in span:
        lo, _, hi = span.partition("-")
        if lo.isdigit() and hi.isdigit():
            start, end = int(lo), int(hi)
    st.html(f'<div class="ss-brand">{esc(doc.title or doc.id)}</div>')
    source = doc.metadata.get("source")
    facts = [f"id {esc(doc.id)}"] + ([f"source {esc(source)}"] if source and source != doc.id else [])
    facts.append(f"{len(doc.text):,} characters")
    if start is not None and end is not None and end <= len(doc.text):
        facts.append(f'matched passage at characters {start:,}–{end:,} (<a href="#match">jump to it</a>)')
    st.html(f'<div class="ss-meta">{" · ".join(facts)}</div>')
    body, note = sup.document_html(doc.text, start, end)
    if note:
        st.caption(note)
    st.html(f'<div class="ss-doc">{body}</div>')
    shown = {key: value for key, value in doc.metadata.items()}
    if shown:
        with st.expander("Metadata", icon=":material/sell:"):
            st.json(shown)


def add_page(col: Collection, path: Path) -> None:
    from indexer.loaders import SUPPORTED_SUFFIXES

    report = st.session_state.pop("add_report", None)
    if report is not None:
        show_add_report(*report)
    st.subheader("Upload files")
    suffixes = sorted(s.lstrip(".") for s in SUPPORTED_SUFFIXES)
    st.caption(f"Into **{md_escape(path.name)}**: {', '.join(suffixes)}. Each text, Markdown, HTML or PDF file is one "
               "document with its file name as id (uploading it again replaces it); JSONL and CSV files hold one "
               "document per record.")
    upload_key = f"upload-{st.session_state.setdefault('upload_round', 0)}"
    files = st.file_uploader("Files", type=suffixes, accept_multiple_files=True, key=upload_key,
                             label_visibility="collapsed")
    count = len(files or [])
    if st.button(f"Index {count} file{'s' if count != 1 else ''}" if count else "Index files", type="primary",
                 disabled=not files, icon=":material/upload:", key="index-files"):
        bar = st.progress(0.0, text="Starting…")
        try:
            result = sup.index_uploads(
                col, [(f.name, f.getvalue()) for f in files],
                progress=lambda fraction, text: bar.progress(min(1.0, max(0.0, fraction)), text=text),
            )
        except SemsearchError as exc:
            st.error(f"Indexing failed: {md_escape(exc)}")
            return
        st.session_state["add_report"] = ("files", result)
        st.session_state["upload_round"] += 1  # a fresh, empty uploader
        st.rerun()

    st.subheader("Paste text")
    with st.form("paste", clear_on_submit=False, border=True):
        left, right = st.columns(2)
        left.text_input("Title", key="paste-title", placeholder="Optional")
        right.text_input("Id", key="paste-id", placeholder="Optional; the same id replaces the document")
        st.text_area("Text", key="paste-text", height=180, placeholder="The document's text")
        st.text_area("Metadata (JSON object)", key="paste-meta", height=68, placeholder='{"lang": "en", "year": 2024}')
        st.form_submit_button("Add document", type="primary", icon=":material/add:", on_click=add_pasted, args=(col,))


def add_pasted(col: Collection) -> None:
    """Form callback: add the pasted document, then empty the form (kept when it failed)."""
    state = st.session_state
    try:
        doc = sup.pasted_document(state.get("paste-text", ""), state.get("paste-title", ""),
                                  state.get("paste-id", ""), state.get("paste-meta", ""))
        result = sup.AddReport()
        result.merge(col.upsert([doc]))
    except BadInputError as exc:
        state["add_report"] = ("paste", _failed(str(exc)))
        return
    except SemsearchError as exc:
        state["add_report"] = ("paste", _failed(f"could not write: {exc}"))
        return
    for key in ("paste-title", "paste-id", "paste-text", "paste-meta"):
        state[key] = ""
    state["add_report"] = ("paste", result)


def _failed(message: str) -> sup.AddReport:
    report = sup.AddReport()
    report.errors.append(("pasted text", message))
    return report


def show_add_report(kind: str, report: sup.AddReport) -> None:
    if report.written or report.unchanged:
        what = f"{report.files} file{'s' if report.files != 1 else ''}: " if kind == "files" else ""
        st.success(f"{what}{report.summary()}. New searches include them.", icon=":material/check_circle:")
    if report.errors:
        count = f"{len(report.errors)} problem{'s' if len(report.errors) != 1 else ''}"
        if report.written or report.unchanged:
            st.warning(f"{count}, skipped; everything else went in:", icon=":material/warning:")
        else:
            st.error(f"Nothing was added ({count}):", icon=":material/error:")
        st.dataframe(
            {"File or record": [source for source, _ in report.errors], "Problem": [r for _, r in report.errors]},
            hide_index=True, width="stretch",
        )
    if not report.errors and not report.written and not report.unchanged:
        st.info("No documents were found in the upload.")


def collection_page(info: dict[str, Any], specs: list[sup.FilterField], fields_examples: dict[str, list]) -> None:
    chunking = info["chunking"]
    rows = [
        ("Path", info["path"]),
        ("Documents", f"{info['documents']:,}"),
        ("Chunks", f"{info['chunks']:,}"),
        ("Model", f"{info['model']} (dimension {info['dim']}, sha256 {info['model_sha256'][:12]})"),
        ("Chunking", f"{chunking['window_tokens']} tokens, overlap {chunking['overlap_tokens']}"),
        ("Index", info["index"]),
        ("Search modes", ", ".join(Collection.SEARCH_MODES)),
        ("Catalog", info["catalog"]),
        ("Size on disk", f"{sup.format_bytes(info['size_bytes'])} ({info['size_bytes']:,} bytes)"),
        ("Created", info["created_at"]),
        ("Last update", f"{info['updated_at']} ({sup.format_age(info['updated_at'])}), generation {info['generation']}"),
    ]
    st.html('<table class="ss-kv">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
            + "</table>")
    st.subheader("Metadata fields")
    if not fields_examples:
        st.caption("No document has metadata yet.")
        return
    kinds = {spec.name: spec.kind for spec in specs}
    st.dataframe(
        {
            "Field": list(fields_examples),
            "Filter": [{"choice": "pick from values", "number": "range", "bool": "yes / no", "text": "exact value"}
                       .get(kinds.get(name, ""), "JSON filter") for name in fields_examples],
            "Example values": [", ".join(map(str, values[:8])) for values in fields_examples.values()],
        },
        hide_index=True, width="stretch",
    )


def empty_root(root: Path) -> None:
    st.html(BRAND)
    if root.is_dir() and any(root.iterdir()):
        st.info(f"**{md_escape(root)}** holds no collection, and none of its sub-folders does. Create one with "
                f"`semsearch index PATH -c {root}/NAME`, then reload this page.", icon=":material/folder_off:")
        return
    st.info(f"There is no collection at **{md_escape(root)}** yet. Create an empty one here (with the packaged "
            "all-MiniLM-L6-v2 model) and add documents, or index files with "
            f"`semsearch index PATH -c {root}`.", icon=":material/inbox:")
    if st.button("Create the collection", type="primary", icon=":material/add:"):
        try:
            with st.spinner("Creating the collection…"):
                Collection.create(root).close()
        except SemsearchError as exc:
            st.error(f"Could not create it: {md_escape(exc)}")
            return
        st.rerun()


# -- the app -----------------------------------------------------------------------
def signed_in() -> bool:
    """True when no password is set or this session gave it; else shows the sign-in form."""
    expected = os.environ.get(ENV_PASSWORD)
    if not expected or st.session_state.get("signed_in"):
        return True
    st.html(BRAND)
    with st.form("sign-in"):
        given = st.text_input("Password", type="password", key="password")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        if hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8", "replace")):
            st.session_state["signed_in"] = True
            st.session_state.pop("password", None)
            st.rerun()
        st.error("Wrong password.")
    return False


def main() -> None:
    """One run of the page: sign-in, the sidebar, then the open document or the three tabs."""
    st.set_page_config(page_title="semsearch", page_icon="🔎", layout="wide", initial_sidebar_state="expanded",
                       menu_items={"About": "semsearch: semantic search over your own documents."})
    st.html(CSS)
    if not signed_in():
        return
    root = collection_root()
    if root is None:
        st.error(f"No collection given. Start the UI with `semsearch ui -c DIR` (or set {ENV_COLLECTION}).")
        return
    paths = sup.find_collections(root)
    if not paths:
        st.sidebar.html(BRAND)
        empty_root(root)
        return
    path = sidebar_collection(root, paths)
    uuid = sup.manifest_uuid(path)
    try:
        col = open_collection(str(path), uuid)
        generation = col.catalog.state().generation
        info = collection_info(str(path), uuid, generation, col)
        examples = metadata_examples(str(path), uuid, generation, col)
        specs = sup.filter_fields(examples)
    except SemsearchError as exc:
        st.error(f"Cannot open the collection at {md_escape(path)}: {md_escape(exc)}", icon=":material/error:")
        return
    sidebar_stats(info)
    k, mode, where, problem = sidebar_settings(specs, scope=path.name)

    doc_id = st.query_params.get("doc")
    if doc_id:
        document_page(col, doc_id)
        return
    st.html(f'<div class="ss-brand">{esc(path.name)}</div>'
            f'<div class="ss-sub">{info["documents"]:,} documents · {esc(sup.model_label(info["model"]))}</div>')
    search_tab, add_tab, about_tab = st.tabs(["Search", "Add documents", "Collection"])
    with search_tab:
        search_page(col, path, uuid, generation, info, k, mode, where, problem)
    with add_tab:
        add_page(col, path)
    with about_tab:
        collection_page(info, specs, examples)


def run() -> None:
    """``main`` with every failure shown as a message, never a traceback."""
    try:
        main()
    except CollectionLockedError as exc:
        st.warning(f"The collection is busy: {md_escape(exc)}. Try again in a moment.", icon=":material/hourglass_top:")
    except SemsearchError as exc:
        st.error(md_escape(exc), icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the page must not show a traceback
        log.exception("the UI failed")
        st.error(f"Something went wrong ({type(exc).__name__}). The server log has the details.",
                 icon=":material/error:")


run()
