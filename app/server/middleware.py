"""ASGI middleware of the HTTP API: the request size limit (413).

It answers before the app sees the request; ``create_app`` adds the key
check (``app.server.access``) inside it, so an oversized body is refused
unread whatever its key.
"""

from __future__ import annotations

import anyio

from app.server.limits import MAX_DRAIN_BYTES
from app.server.responses import AsciiJSONResponse


class BodyLimitMiddleware:
    """Answer 413 to bodies over ``max_bytes``.

    A declared ``Content-Length`` over the limit is refused without waiting
    for the body (a client sending ``Expect: 100-continue`` sends none); a
    body that does arrive is read and dropped first (up to
    ``MAX_DRAIN_BYTES``), so the client can read the 413 instead of a reset
    connection. A body without a length (chunked) is counted as it arrives.
    The app never sees a cut body.
    """

    def __init__(self, app, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.max_bytes:
                return await self._reject(receive, send, int(declared) if declared.isdigit() else None)
            return await self.app(scope, receive, send)
        if b"transfer-encoding" not in headers:
            return await self.app(scope, receive, send)
        messages, seen = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                return await self._reject(receive, send, None, seen, bool(message.get("more_body")))
            if not message.get("more_body"):
                break

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _reject(self, receive, send, declared: int | None, seen: int = 0, more: bool = True) -> None:
        if (declared is None or declared <= MAX_DRAIN_BYTES) and more:
            with anyio.move_on_after(10):  # read what is on its way, so the client can read the answer
                while seen <= MAX_DRAIN_BYTES:
                    message = await receive()
                    if message["type"] != "http.request":
                        break
                    seen += len(message.get("body", b""))
                    if not message.get("more_body"):
                        break
        response = AsciiJSONResponse(
            {"detail": f"body: the request body is larger than the limit of {self.max_bytes:,} bytes"},
            status_code=413,
            headers={"Connection": "close"},
        )
        await response({"type": "http"}, _no_receive, send)


async def _no_receive():  # pragma: no cover - a JSONResponse never reads
    return {"type": "http.disconnect"}
