"""Error answers of the HTTP API: every failure becomes JSON with a one-line ``detail``.

400 bad input the retriever refused, 404/405 unknown route or method, 422 a
request that does not fit the schema (each field named, the input never
echoed back), 503 past the deadline or locked by a writer, 500 anything else
(logged, the detail naming only the error's type).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.server.public import public_message
from app.server.responses import AsciiJSONResponse, error_body
from retriever.errors import BadInputError, CollectionLockedError, DeadlineExceededError, SemsearchError
from retriever.unicode_policy import printable

log = logging.getLogger("semsearch.server")

#: The framework's own answers, each naming the part of the request at fault.
HTTP_DETAILS = {
    "There was an error parsing the body": "body: the JSON cannot be parsed (nested too deeply, or a number too long?)",
    "Not Found": "path: no such route",
    "Method Not Allowed": "method: not allowed on this route",
}
SHOWN_ERRORS = 5  # validation errors spelled out in a 422's detail; the rest are counted


def add_error_handlers(app: FastAPI) -> None:
    """Map validation errors, HTTP errors, the retriever's errors and any other exception to JSON answers."""

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = validation_errors(exc.errors())
        body = error_body(request.url.path, validation_detail(errors), 422) | {"errors": errors}
        return AsciiJSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = HTTP_DETAILS.get(str(exc.detail), exc.detail)
        return AsciiJSONResponse(
            error_body(request.url.path, detail, exc.status_code), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(BadInputError)
    async def bad_input(request: Request, exc: BadInputError) -> JSONResponse:
        return AsciiJSONResponse({"detail": shown(request, exc)}, status_code=400)

    @app.exception_handler(RecursionError)
    async def too_deep(_request: Request, _exc: RecursionError) -> JSONResponse:
        return AsciiJSONResponse({"detail": "body: the JSON is nested too deeply"}, status_code=400)

    @app.exception_handler(CollectionLockedError)
    @app.exception_handler(DeadlineExceededError)
    async def unavailable(request: Request, exc: SemsearchError) -> JSONResponse:
        return AsciiJSONResponse({"detail": shown(request, exc)}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(SemsearchError)
    async def failed(request: Request, exc: SemsearchError) -> JSONResponse:
        log.error("request failed: %s", exc)  # the log keeps the paths; the answer does not
        return AsciiJSONResponse({"detail": shown(request, exc)}, status_code=500)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return AsciiJSONResponse(
            {"detail": f"internal error ({type(exc).__name__}); see the server log"}, status_code=500
        )


def shown(request: Request, exc: Exception) -> str:
    """The error's message for the answer: one line, without absolute paths or the catalog URL."""
    return one_line(public_message(str(exc), getattr(request.app.state, "collection", None)))


def validation_errors(raw: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """pydantic's errors as ``[{"field", "message", "type"}]``; the offending input is not echoed (it may be megabytes)."""
    errors = []
    for err in raw:
        loc, message, kind = err.get("loc", ()), err.get("msg", ""), err.get("type", "")
        if kind == "json_invalid":
            where = loc[1] if len(loc) > 1 else "?"
            problem = (err.get("ctx") or {}).get("error", "")
            errors.append({"field": "body", "message": f"invalid JSON at character {where}: {problem}", "type": kind})
        else:
            errors.append({"field": field_name(loc), "message": message, "type": kind})
    return errors


def validation_detail(errors: list[dict[str, str]]) -> str:
    """The first few errors as ``"field: message; ..."``, then how many more there are."""
    detail = "; ".join(
        f"{e['field']}: {plain(e['message'])}" if e["field"] else plain(e["message"]) for e in errors[:SHOWN_ERRORS]
    )
    if len(errors) > SHOWN_ERRORS:
        detail += f"; and {len(errors) - SHOWN_ERRORS} more"
    return detail


def field_name(loc) -> str:
    """``("body", "documents", 0, "text")`` -> ``"documents[0].text"``; ``("body",)`` -> ``"body"``."""
    parts = list(loc)
    if len(parts) > 1 and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    name = ""
    for part in parts:
        if isinstance(part, int):
            name += f"[{part}]"
        elif re.fullmatch(r"[\w$-]{1,64}", str(part)):
            name += f".{part}" if name else str(part)
        else:  # an empty, long or odd key (an unknown field, say): quoted, under the body
            name = (name or "body") + f"[{printable(str(part), 40)}]"
    return name


def plain(message: str) -> str:
    """pydantic's message without its ``"Value error, "`` prefix."""
    return message.removeprefix("Value error, ")


def one_line(message: str) -> str:
    """``message`` with every run of whitespace (newlines included) one space."""
    return " ".join(message.split())
