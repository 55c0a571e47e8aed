"""The semsearch UI: search a collection by meaning, read documents, add more.

Run it with ``semsearch ui -c DIR`` (``DIR`` a collection, or a folder whose
sub-folders are collections). The query, result count, mode, filter and
collection live in the URL, so ``?q=...`` links to a search and a reload shows
its results again. The collection is opened once per process and re-checks
the committed generation on every search, so documents written by a batch job,
the HTTP API or another browser tab show up without a restart.

When ``SEMSEARCH_UI_PASSWORD`` is set, every browser session must first enter
that password; after five wrong ones in a row, sign-in pauses for every
session, for longer after each further wrong one, up to 15 minutes
(``ui_lockout``). Without a password the page serves only a loopback address and
loopback ``Host`` names (``ui_guard``): ``semsearch ui`` refuses other
addresses, and so does this script when run with ``streamlit run``.

This file is the entry script: sign-in and the page's layout. The pieces are
modules beside it, one concern each: ``ui_markup`` (icons, CSS, escaping),
``ui_state`` (the URL and session state), ``ui_cache`` (the open collection
and cached reads), ``ui_sidebar``, ``ui_pages`` (search, document, collection)
and ``ui_add`` (upload and paste); ``ui_support`` and ``ui_lockout`` (the
pause after wrong passwords) hold what is not Streamlit.
"""

from __future__ import annotations

import hmac
import logging
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # `streamlit run app/ui.py` puts app/ on the path, not the repository
    _REPO = str(Path(__file__).resolve().parent.parent)
    if _REPO not in sys.path:
        sys.path.insert(0, _REPO)

import streamlit as st

from app import ui_lockout
from app import ui_support as sup
from app.ui_add import add_page, add_pasted, show_add_report
from app.ui_cache import LOCK_TIMEOUT_S, collection_info, metadata_examples, open_collection, run_search
from app.ui_guard import ENV_PASSWORD, refused
from app.ui_markup import BRAND, CSS, FILE_ICON, LOGO, esc, md_escape
from app.ui_pages import collection_page, document_page, empty_root, result_card, search_page
from app.ui_sidebar import DEFAULT_K, MAX_K, sidebar_collection, sidebar_settings, sidebar_stats
from app.ui_state import (
    ENV_COLLECTION, clear_filters, close_document, collection_root, default_mode, open_document,
)
from retriever import SemsearchError
from retriever.errors import CollectionLockedError

# the names this script has always offered, now kept in the modules that own them
__all__ = [
    "BRAND", "CSS", "DEFAULT_K", "ENV_COLLECTION", "ENV_PASSWORD", "FILE_ICON", "LOCK_TIMEOUT_S", "LOGO", "MAX_K",
    "add_page", "add_pasted", "clear_filters", "close_document", "collection_info", "collection_page",
    "collection_root", "default_mode", "document_page", "empty_root", "esc", "main", "md_escape",
    "metadata_examples", "open_collection", "open_document", "result_card", "run", "run_search", "search_page",
    "show_add_report", "sidebar_collection", "sidebar_settings", "sidebar_stats", "signed_in",
]

log = logging.getLogger("semsearch.ui")



# -- the app -----------------------------------------------------------------------
def signed_in() -> bool:
    """True when no password is set or this session gave it; else shows the sign-in form.

    Wrong passwords pause sign-in for every session for a while (``ui_lockout``);
    a password given during a pause is refused unchecked, with when to try again.
    """
    expected = os.environ.get(ENV_PASSWORD)
    if not expected or st.session_state.get("signed_in"):
        return True
    throttle = ui_lockout.THROTTLE
    st.html(BRAND)
    with st.form("sign-in"):
        given = st.text_input("Password", type="password", key="password")
        submitted = st.form_submit_button("Sign in")
    wait = throttle.wait_s()
    if not submitted:
        if wait:
            st.warning(ui_lockout.pause_message(wait, throttle.longest_pause_s), icon=":material/hourglass_top:")
        return False
    if wait:
        st.error(ui_lockout.pause_message(wait, throttle.longest_pause_s))
        return False
    if hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8", "replace")):
        throttle.succeeded()
        st.session_state["signed_in"] = True
        st.session_state.pop("password", None)
        st.rerun()
    pause = throttle.failed()
    st.error("Wrong password." + (" " + ui_lockout.pause_message(pause, throttle.longest_pause_s) if pause else ""))
    return False


def main() -> None:
    """One run of the page: sign-in, the sidebar, then the open document or the three tabs."""
    st.set_page_config(page_title="semsearch", page_icon="🔎", layout="wide", initial_sidebar_state="expanded",
                       menu_items={"About": "semsearch: semantic search over your own documents."})
    st.html(CSS)
    if refused() or not signed_in():
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
