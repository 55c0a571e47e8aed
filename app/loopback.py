"""Loopback names and ``Host`` headers: what the API and the UI answer without a key or password.

A web page can make a browser send requests to ``127.0.0.1`` under a name of
its own (``evil.example`` resolving to loopback) and read the answers, since
to the browser they are same-origin (DNS rebinding). A service open without a
key or password therefore answers only a ``Host`` that is a loopback name or
one it was told (``host_allowed``). No FastAPI or Streamlit here: both use it.
"""

from __future__ import annotations

import ipaddress
from typing import Iterable

LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost", "ip6-loopback"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})  # listening addresses that name no host


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (``localhost``, 127.x, ``::1``)."""
    name = host.strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a ``Host`` header (``name``, ``name:port``, ``[v6]:port``) without port or brackets, lower-case."""
    value = header.strip().lower()
    if value.startswith("["):
        inside, _, after = value[1:].partition("]")
        port_only = after == "" or (after.startswith(":") and after[1:].isdigit() and after[1:].isascii())
        return inside if port_only else value  # "[::1].evil.example" is a name, not ::1
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def named_hosts(hosts: Iterable[str]) -> set[str]:
    """``hosts`` as names to accept, without wildcard addresses such as ``0.0.0.0``."""
    return {host_name(h) for h in hosts if host_name(h) not in WILDCARDS}


def host_allowed(header: str | None, allowed: set[str]) -> bool:
    """Whether a request with this ``Host`` header may be answered: none given, a loopback name, or one of ``allowed``."""
    if header is None:
        return True  # HTTP/1.0 and other clients without one; no browser sends none
    name = host_name(header)
    return is_loopback(name) or name in allowed


def shown_host(header: str) -> str:
    """The ``Host`` name safe to repeat in a message."""
    name = host_name(header)
    return name if name.isascii() and name.isprintable() and len(name) <= 100 else "(unprintable)"
