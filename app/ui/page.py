"""The semsearch UI's page script: what ``semsearch ui`` runs with Streamlit.

Run it with ``semsearch ui -c DIR`` (``DIR`` a collection, or a folder whose
sub-folders are collections), or ``streamlit run app/ui/page.py -- -c DIR``.
The query, result count, mode, filter and collection live in the URL, so
``?q=...`` links to a search and a reload shows its results again. The
collection is opened once per process and re-checks the committed generation
on every search, so documents written by a batch job, the HTTP API or another
browser tab show up without a restart.

When ``SEMSEARCH_UI_PASSWORD`` is set, every browser session must first enter
that password (``app.ui.signin``); after five wrong ones in a row, sign-in
pauses for every session, for longer after each further wrong one, up to 15
minutes (``app.ui.lockout``). Without a password the page serves only a
loopback address and loopback ``Host`` names (``app.ui.guard``): ``semsearch ui``
refuses other addresses, and so does this script when run with ``streamlit run``.

This script lays out the page; the modules beside it hold the pieces (see
``app/ui/__init__.py``). Streamlit puts this script's folder first on
``sys.path``; no module here is named like a standard or installed one, and
the script swaps that folder for the repository.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

if __package__ in (None, ""):  # `streamlit run app/ui/page.py` puts app/ui/ on the path, not the repository
    _HERE, _REPO = Path(__file__).resolve().parent, str(Path(__file__).resolve().parents[2])
    sys.path[:] = [entry for entry in sys.path if not entry or Path(entry).resolve() != _HERE]
    if _REPO not in sys.path:
        sys.path.insert(0, _REPO)

import streamlit as st

from app.ui.add import add_page
from app.ui.cache import collection_info, metadata_examples, open_collection
from app.ui.filters import filter_fields
from app.ui.folders import find_collections, manifest_uuid
from app.ui.formatting import model_label
from app.ui.guard import refused
from app.ui.markup import BRAND, CSS, esc, md_escape
from app.ui.pages import collection_page, document_page, empty_root, search_page
from app.ui.quality import quality_panel
from app.ui.sidebar import sidebar_collection, sidebar_settings, sidebar_stats
from app.ui.signin import signed_in
from app.ui.state import ENV_COLLECTION, collection_root
from retriever import SemsearchError
from retriever.errors import CollectionLockedError

log = logging.getLogger("semsearch.ui")


def main() -> None:
    """One run of the page: sign-in, the sidebar, then the open document or the three tabs."""
    st.set_page_config(
        page_title="semsearch",
        page_icon="🔎",
        layout="wide",
        initial_sidebar_state="expanded",
        menu_items={"About": "semsearch: semantic search over your own documents."},
    )
    st.html(CSS)
    if refused() or not signed_in():
        return
    root = collection_root()
    if root is None:
        st.error(f"No collection given. Start the UI with `semsearch ui -c DIR` (or set {ENV_COLLECTION}).")
        return
    paths = find_collections(root)
    if not paths:
        st.sidebar.html(BRAND)
        empty_root(root)
        return
    path = sidebar_collection(root, paths)
    uuid = manifest_uuid(path)
    try:
        col = open_collection(str(path), uuid)
        generation = col.catalog.state().generation
        info = collection_info(str(path), uuid, generation, col)
        examples = metadata_examples(str(path), uuid, generation, col)
        specs = filter_fields(examples)
    except SemsearchError as exc:
        st.error(f"Cannot open the collection at {md_escape(path)}: {md_escape(exc)}", icon=":material/error:")
        return
    sidebar_stats(info)
    k, mode, where, problem = sidebar_settings(specs, scope=path.name)
    quality_panel(col, path, uuid, generation)

    doc_id = st.query_params.get("doc")
    if doc_id:
        document_page(col, doc_id)
        return
    st.html(
        f'<div class="ss-brand">{esc(path.name)}</div>'
        f'<div class="ss-sub">{info["documents"]:,} documents · {esc(model_label(info["model"]))}</div>'
    )
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
        st.error(
            f"Something went wrong ({type(exc).__name__}). The server log has the details.", icon=":material/error:"
        )


run()
