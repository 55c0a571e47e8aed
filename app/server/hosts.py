"""The ``Host`` check of the API without a key (DNS rebinding; the rules are in ``app.loopback``)."""

from __future__ import annotations

from typing import Iterable

from app.loopback import host_allowed, named_hosts, shown_host
from app.server.responses import AsciiJSONResponse


class HostCheckMiddleware:
    """Answer 403 to a request whose ``Host`` is neither a loopback name nor one of ``allowed``.

    Args:
        app: The ASGI app behind it.
        allowed: Names (or ``name:port``) answered besides loopback ones.
    """

    def __init__(self, app, allowed: Iterable[str] = ()) -> None:
        self.app, self.allowed = app, named_hosts(allowed)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        raw = dict(scope.get("headers") or []).get(b"host")
        header = None if raw is None else raw.decode("latin-1")
        if host_allowed(header, self.allowed):
            return await self.app(scope, receive, send)
        response = AsciiJSONResponse(
            {
                "detail": f"host: without an API key this service answers only a loopback name or the address it "
                f"listens on, not {shown_host(header)!r} (another name may be a web page's; "
                "set an API key to serve other names)"
            },
            status_code=403,
        )
        await response(scope, receive, send)
