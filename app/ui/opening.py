"""The controls that open a hit's original file where the hit is: a PDF at its page, anything else as a download.

A result card offers "Open NAME at page N" as a button that, pressed,
shows the link to the PDF opened in the browser's viewer (the bytes go to
the browser only for the card chosen); the document view shows that link at
once. Other files, and PDFs over ``originals.MAX_OPEN_BYTES``, are a
download, read only when the browser asks. A file that cannot be served
says why (``originals.find_original``).
"""

from __future__ import annotations

import functools
from typing import Any

import streamlit as st

from app.ui.markup import md_escape
from app.ui.originals import Original, find_original, open_label, pdf_opener_html, read_original

CHOSEN = "ss-original"  # session state: the card whose PDF opener is shown
OPENER_HEIGHT = 44


def offer_original(
    metadata: dict[str, Any], location: dict[str, Any] | None, key: str, choice: str | None = None
) -> Original | None:
    """Draw the control for the original of a document with ``metadata``, at ``location``.

    Args:
        metadata: The stored document's or the hit's metadata (``source`` names the file).
        location: Where the hit is (``Hit.location``); its ``page`` is where a PDF opens.
        key: Unique among the page's controls.
        choice: A card's identity: its PDF opener shows once its button is pressed. ``None``: the
            opener shows at once (the document view).

    Returns:
        The PDF to open now with ``show_opener``, or ``None``.
    """
    original, reason = find_original(metadata)
    if original is None:
        if reason:
            st.caption(md_escape(reason.capitalize()))
        return None
    if not original.opens:
        st.download_button(
            f"Download {original.name}",
            data=functools.partial(read_original, original),
            file_name=original.name,
            mime=original.mime,
            on_click="ignore",
            key=f"download-{key}",
            icon=":material/download:",
            type="tertiary",
        )
        return None
    if choice is None or st.session_state.get(CHOSEN) == choice:
        return original
    st.button(
        open_label(original, page_of(location)),
        key=f"open-{key}",
        icon=":material/open_in_new:",
        type="tertiary",
        on_click=_choose,
        args=(choice,),
    )
    return None


def show_opener(original: Original, location: dict[str, Any] | None) -> None:
    """The link that opens PDF ``original`` in the browser's viewer at ``location``'s page."""
    try:
        data = read_original(original)
    except OSError:
        st.caption("The original file is no longer there.")
        return
    page = page_of(location)
    st.iframe(pdf_opener_html(data, open_label(original, page), page), height=OPENER_HEIGHT)


def page_of(location: dict[str, Any] | None) -> int | None:
    """The page a location names, or ``None``."""
    page = (location or {}).get("page")
    return page if isinstance(page, int) and not isinstance(page, bool) and page >= 1 else None


def _choose(choice: str) -> None:
    """Button callback: show the PDF opener of card ``choice``."""
    st.session_state[CHOSEN] = choice
