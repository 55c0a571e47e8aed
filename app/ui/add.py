"""The UI's add page: upload files or paste a document into the open collection.

Each write's report is kept in the session (``add_report``) across the rerun
that follows it, and shown once at the top of the page. Pasted metadata may
not name a file as its ``source``: the UI serves the file a document names
(``app.ui.originals``), so a path typed here would be a path from the browser.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app.ui.markup import md_escape, plural
from app.ui.originals import names_a_file
from app.ui.uploads import pasted_document
from indexer.uploads import AddReport, index_uploads
from retriever import BadInputError, Collection, SemsearchError

PASTE_KEYS = ("paste-title", "paste-id", "paste-text", "paste-meta")


def add_page(col: Collection, path: Path) -> None:
    """The last write's report, a file uploader with its "Index" button, and the paste form.

    Args:
        col: the open collection at ``path``.
    """
    from indexer.loaders import SUPPORTED_SUFFIXES

    report = st.session_state.pop("add_report", None)
    if report is not None:
        show_add_report(*report)
    st.subheader("Upload files")
    suffixes = sorted(s.lstrip(".") for s in SUPPORTED_SUFFIXES)
    st.caption(
        f"Into **{md_escape(path.name)}**: {', '.join(suffixes)}, and text files of any name; what a file is "
        "comes from its content. A document, presentation, spreadsheet, e-book, e-mail, PDF or scan is one "
        "document with its file name as id (uploading it again replaces it); JSONL and CSV files hold one "
        "document per record, a mailbox one per message, an archive one per member."
    )
    upload_key = f"upload-{st.session_state.setdefault('upload_round', 0)}"
    files = st.file_uploader("Files", accept_multiple_files=True, key=upload_key, label_visibility="collapsed")
    count = len(files or [])
    if st.button(
        f"Index {plural(count, 'file')}" if count else "Index files",
        type="primary",
        disabled=not files,
        icon=":material/upload:",
        key="index-files",
    ):
        bar = st.progress(0.0, text="Starting…")
        try:
            result = index_uploads(
                col,
                [(f.name, f.getvalue()) for f in files],
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
        doc = pasted_document(
            state.get("paste-text", ""),
            state.get("paste-title", ""),
            state.get("paste-id", ""),
            state.get("paste-meta", ""),
        )
        if names_a_file(doc.get("metadata")):
            raise BadInputError(
                "metadata: source may not be a file path here (the UI would serve that file); "
                "index files with semsearch index, or name the source otherwise"
            )
        result = AddReport()
        result.merge(col.upsert([doc]))
    except BadInputError as exc:
        state["add_report"] = ("paste", _failed(str(exc)))
        return
    except SemsearchError as exc:
        state["add_report"] = ("paste", _failed(f"could not write: {exc}"))
        return
    for key in PASTE_KEYS:
        state[key] = ""
    state["add_report"] = ("paste", result)


def _failed(message: str) -> AddReport:
    """A report of the pasted text failing with ``message``."""
    report = AddReport()
    report.errors.append(("pasted text", message))
    return report


def show_add_report(kind: str, report: AddReport) -> None:
    """What a write did: a success line, the problems as a table, or that nothing was found.

    Args:
        kind: ``"files"`` (an upload: the line counts the files) or ``"paste"``.
        report: the write's report.
    """
    if report.written or report.unchanged:
        what = f"{plural(report.files, 'file')}: " if kind == "files" else ""
        st.success(f"{what}{report.summary()}. New searches include them.", icon=":material/check_circle:")
    if report.errors:
        count = plural(len(report.errors), "problem")
        if report.written or report.unchanged:
            st.warning(f"{count}, skipped; everything else went in:", icon=":material/warning:")
        else:
            st.error(f"Nothing was added ({count}):", icon=":material/error:")
        st.dataframe(
            {"File or record": [source for source, _ in report.errors], "Problem": [r for _, r in report.errors]},
            hide_index=True,
            width="stretch",
        )
    if not report.errors and not report.written and not report.unchanged:
        st.info("No documents were found in the upload.")
