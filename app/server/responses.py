"""The JSON answer class of every route, middleware and error handler of the HTTP API."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse


class AsciiJSONResponse(JSONResponse):
    """JSON answers in ASCII: any text (even a refused lone surrogate) can be sent."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")
