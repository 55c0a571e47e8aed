"""The JSON answer class of every route, middleware and error handler of the HTTP API."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.responses import JSONResponse

_OPENAI_ROUTE = re.compile(r"^(/collections/[^/]+)?/v1/")  # a collection's routes may sit under its name


class AsciiJSONResponse(JSONResponse):
    """JSON answers in ASCII: any text (even a refused lone surrogate) can be sent."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_body(path: str, detail: Any, status: int) -> dict[str, Any]:
    """``{"detail"}``; on the OpenAI-compatible ``/v1`` routes also OpenAI's ``{"error": {"message", "type", ...}}``."""
    body: dict[str, Any] = {"detail": detail}
    if _OPENAI_ROUTE.match(path):
        kind = {401: "authentication_error", 404: "not_found_error"}.get(status, "invalid_request_error")
        body["error"] = {"message": str(detail), "type": kind, "param": None, "code": None}
    return body
