"""ASGI middleware of the HTTP API: the request size limit (413) and the API key (401).

Both answer before the app sees the request; ``create_app`` adds the key
check inside the size limit, so an oversized body is refused unread whatever
its key.
"""

from __future__ import annotations

import hmac

import anyio

from app.server.limits import MAX_DRAIN_BYTES
from app.server.responses import AsciiJSONResponse, error_body


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


class ApiKeyMiddleware:
    """Every route but ``/health`` needs the key: ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``."""

    OPEN = frozenset({"/health"})

    def __init__(self, app, api_key: str) -> None:
        self.app, self.expected = app, api_key.encode("utf-8")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") in self.OPEN:
            return await self.app(scope, receive, send)
        problem = self._problem(dict(scope.get("headers") or []))
        if problem is None:
            return await self.app(scope, receive, send)
        body = error_body(scope.get("path") or "", problem, 401)
        response = AsciiJSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)

    def _problem(self, headers: dict[bytes, bytes]) -> str | None:
        given = headers.get(b"x-api-key")
        if given is None:
            scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
            given = token.strip() if scheme.lower() == b"bearer" else None
        if given is None:
            return "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
        if not hmac.compare_digest(given, self.expected):
            return "wrong API key"
        return None
