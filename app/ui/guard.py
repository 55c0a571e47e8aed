"""Who the UI answers without a password: loopback addresses and ``Host`` names only.

``semsearch ui`` refuses to listen off loopback without ``SEMSEARCH_UI_PASSWORD``
and tells Streamlit which ``Host`` names to accept; this guard makes the page
itself refuse too, so ``streamlit run app/ui/page.py`` (which listens on every
interface by default) is no open door, and a web page reaching the UI under a
name of its own (DNS rebinding) gets a refusal instead of the collection.
"""

from __future__ import annotations

import os

import streamlit as st

from app.loopback import host_allowed, is_loopback, named_hosts, shown_host

ENV_PASSWORD = "SEMSEARCH_UI_PASSWORD"


def listening_address() -> str | None:
    """Streamlit's ``server.address``; ``None`` means every interface."""
    from streamlit import config

    return config.get_option("server.address") or None


def request_host() -> str | None:
    """The ``Host`` header of this session's request; ``None`` where there is none (no browser, e.g. AppTest)."""
    try:
        headers = st.context.headers
    except Exception:  # noqa: BLE001 - no request context in this Streamlit run
        return None
    return headers.get("Host") if headers else None


def problem(address: str | None, host: str | None, password_set: bool) -> str | None:
    """Why this session must not be served, or ``None``.

    Args:
        address: The address Streamlit listens on (``None``: every interface).
        host: The request's ``Host`` header, ``None`` when there is no request.
        password_set: Whether ``SEMSEARCH_UI_PASSWORD`` guards every session.
    """
    if password_set or host is None:
        return None
    if address is None or not is_loopback(address):
        return (
            f"This UI listens on {address or 'every interface'} without a password, so it does not serve "
            f"the collection: set {ENV_PASSWORD} (every session must then enter it), or start it with "
            "`semsearch ui -c DIR` (loopback only), or `--server.address 127.0.0.1`."
        )
    if not host_allowed(host, named_hosts([address])):
        return (
            f"This UI answers only a loopback name without a password, not {shown_host(host)!r} "
            f"(another name may be a web page's). Open it at http://localhost, or set {ENV_PASSWORD}."
        )
    return None


def refused() -> bool:
    """Show the refusal and return ``True`` when this session must not be served."""
    why = problem(listening_address(), request_host(), bool(os.environ.get(ENV_PASSWORD)))
    if why is not None:
        st.error(why, icon=":material/block:")
    return why is not None
