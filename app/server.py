"""The HTTP API: search, embed and edit one collection over JSON.

``semsearch serve -c DIR`` runs ``create_app(DIR)`` on uvicorn; the OpenAPI
docs are at ``/docs`` (Swagger UI) and ``/redoc``. Routes::

    POST   /search            {query, k, mode, where}  -> {"hits": [Hit.to_dict(), ...]}
    POST   /embed             {texts, truncate}         -> {"embeddings": [[...]], "dim": N, ...}
    POST   /documents         {documents, upsert}       -> what was added / updated / unchanged
    GET    /documents/{id}                              -> the document, or 404
    DELETE /documents/{id}                              -> {"deleted": id}, or 404
    GET    /stats                                       -> Collection.info() and the search modes
    GET    /health                                      -> {"status": "ok"} (never needs the key)

Every error answer is JSON with a one-line ``detail`` that names the problem
(and, for 422, the field): 400 bad input the retriever refused (a malformed
filter, an unknown mode), 401 missing or wrong API key, 404 unknown document,
409 ``upsert: false`` and the id exists, 413 body over the size limit, 422 a
request that does not fit the schema, 503 the collection is locked by a
writer for too long. The service reads the collection as last committed: a
write by a batch job, the UI or this API shows in the next search.
"""

from __future__ import annotations

import hmac
import logging
import os
import warnings
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from retriever.collection import Collection
from retriever.errors import BadInputError, CollectionLockedError, FilterError, SemsearchError

log = logging.getLogger("semsearch.server")

API_KEY_ENV = "SEMSEARCH_API_KEY"
MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_QUERY_CHARS = 2_000
MAX_K = 1_000
MAX_EMBED_TEXTS = 256
MAX_TEXT_CHARS = 100_000
MAX_DOCUMENTS = 1_000
MAX_ID_CHARS = 1_000
LOCK_TIMEOUT_S = 30.0

SearchMode = Literal[Collection.SEARCH_MODES]  # type: ignore[valid-type]  # the modes the retriever has


# -- request and response models -------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchRequest(_Strict):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="free text")
    k: int = Field(10, ge=1, le=MAX_K, description="number of documents to return")
    mode: SearchMode | None = Field(None, description="search mode; default: the collection's default")
    where: dict[str, Any] | None = Field(
        None, description='metadata filter, e.g. {"lang": "en", "year": {"$gte": 2020}}'
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is blank")
        return value


class HitOut(BaseModel):
    id: str
    score: float
    title: str
    text: str = Field(description="the best-matching chunk")
    start: int = Field(description="character offset of the chunk in the document's text")
    end: int
    metadata: dict[str, Any]


class SearchResponse(BaseModel):
    hits: list[HitOut]


class EmbedRequest(_Strict):
    texts: list[str] = Field(min_length=1, max_length=MAX_EMBED_TEXTS)
    truncate: bool = Field(
        False,
        description="embed only the first window of texts longer than the model's window "
        "(listed in 'truncated'); by default such a text is a 400 error",
    )

    @field_validator("texts")
    @classmethod
    def _text_lengths(cls, texts: list[str]) -> list[str]:
        for i, text in enumerate(texts):
            if len(text) > MAX_TEXT_CHARS:
                raise ValueError(f"texts[{i}] has {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}")
        return texts


class EmbedResponse(BaseModel):
    embeddings: list[list[float]]
    dim: int
    model: str
    truncated: list[int] = Field(description="indices of texts longer than the window (only with truncate)")


class DocumentIn(_Strict):
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    text: str = Field(min_length=1)
    title: str = Field("", max_length=10_000)
    metadata: dict[str, Any] = Field(default_factory=dict)


class DocumentsRequest(_Strict):
    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_DOCUMENTS)
    upsert: bool = Field(True, description="replace documents whose id exists; false: such ids are a 409")


class WriteResponse(BaseModel):
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    chunks: int


class DocumentOut(BaseModel):
    id: str
    title: str
    text: str
    metadata: dict[str, Any]


# -- request size limit ------------------------------------------------------------
class BodyLimitMiddleware:
    """Answer 413 to bodies over ``max_bytes``.

    A declared ``Content-Length`` over the limit is refused before the body is
    read. A body without one (chunked) is read up to the limit first and then
    handed on, so the app never sees a cut body.
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
                return await self._reject(send)
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
                return await self._reject(send)
            if not message.get("more_body"):
                break

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send) -> None:
        response = JSONResponse(
            {"detail": f"request body is larger than the limit of {self.max_bytes:,} bytes"}, status_code=413
        )
        await response({"type": "http"}, _no_receive, send)


async def _no_receive():  # pragma: no cover - a JSONResponse never reads
    return {"type": "http.disconnect"}


# -- the app ---------------------------------------------------------------------------
def create_app(
    collection_path: str | os.PathLike,
    api_key: str | None = None,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    warm_up: bool = True,
) -> FastAPI:
    """The FastAPI app serving the collection at ``collection_path``.

    Args:
        collection_path: The collection directory (opened now, so a wrong path
            fails here, not on the first request).
        api_key: When set, every route but ``/health`` (and the docs) needs
            ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``.
        max_body_bytes: Larger request bodies get a 413 (default 10 MB).
        warm_up: Load the model at start-up so the first search is fast.
    """
    collection = Collection.open(collection_path, lock_timeout=LOCK_TIMEOUT_S)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        if warm_up:
            collection.embed(["warm up"])
        collection.embedder.batch_queries()  # concurrent searches are encoded together
        yield
        collection.close()

    app = FastAPI(
        title="semsearch",
        version=_version(),
        summary="Semantic search over one collection",
        description=(
            f"Serving `{Path(collection_path).resolve()}`. Search by meaning, embed text with the "
            "collection's model, and add, read or delete documents. "
            + ("Every route but `/health` needs `Authorization: Bearer <key>` or `X-API-Key: <key>`."
               if api_key else "No API key is set.")
        ),
        lifespan=lifespan,
    )
    app.state.collection = collection
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    _add_error_handlers(app)
    auth = [Depends(_key_checker(api_key))] if api_key else []

    @app.get("/health", tags=["service"])
    def health() -> dict[str, str]:
        """Liveness: answers without touching the collection or the key."""
        return {"status": "ok"}

    @app.get("/stats", tags=["service"], dependencies=auth)
    def stats() -> dict[str, Any]:
        """Documents, chunks, model, index type, size on disk, last update, search modes."""
        return collection.info() | {"search_modes": list(Collection.SEARCH_MODES)}

    @app.post("/search", response_model=SearchResponse, tags=["search"], dependencies=auth)
    def search(request: SearchRequest) -> dict[str, Any]:
        """The `k` documents most similar to `query`, each through its best chunk (as `semsearch search --json`)."""
        kwargs: dict[str, Any] = {"k": request.k, "where": request.where}
        if request.mode is not None:  # else the retriever's own default
            kwargs["mode"] = request.mode
        try:
            hits = collection.search(request.query, **kwargs)
        except FilterError as exc:
            raise HTTPException(400, f"where: {_one_line(str(exc))}") from None
        return {"hits": [hit.to_dict() for hit in hits]}

    @app.post("/embed", response_model=EmbedResponse, tags=["search"], dependencies=auth)
    def embed(request: EmbedRequest) -> dict[str, Any]:
        """Unit-norm embeddings from the collection's model (the one that embeds queries and chunks)."""
        embedder = collection.embedder
        counts = embedder.count_tokens(request.texts)
        truncated = [i for i, n in enumerate(counts) if n > embedder.max_tokens]
        if truncated and not request.truncate:
            first = truncated[0]
            more = f" (and {len(truncated) - 1} more)" if len(truncated) > 1 else ""
            raise HTTPException(
                400,
                f"texts[{first}] has {counts[first]} tokens, more than the model's window of "
                f"{embedder.max_tokens}{more}; split it, or send \"truncate\": true to embed its first window only",
            )
        with warnings.catch_warnings():  # over-long texts are reported in "truncated", not as a warning
            warnings.simplefilter("ignore")
            vectors = embedder.embed(request.texts)
        return {
            "embeddings": vectors.tolist(),
            "dim": int(vectors.shape[1]),
            "model": collection.manifest.model["name"],
            "truncated": truncated,
        }

    @app.post("/documents", response_model=WriteResponse, tags=["documents"], dependencies=auth)
    def add_documents(request: DocumentsRequest) -> dict[str, Any]:
        """Add documents (one atomic commit); existing ids are replaced unless `upsert` is false."""
        ids = [doc.id for doc in request.documents]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise HTTPException(422, f"documents: id {duplicates[0]!r} appears more than once")
        docs = [doc.model_dump() for doc in request.documents]
        if not request.upsert:
            existing = [doc_id for doc_id in ids if doc_id in collection]
            if existing:
                raise HTTPException(
                    409, f"{len(existing)} document id(s) already exist ({', '.join(existing[:3])}); "
                    "send upsert: true to replace them"
                )
        report = collection.upsert(docs)
        return {"added": report.added, "updated": report.updated, "unchanged": report.unchanged,
                "chunks": report.chunks}

    @app.get("/documents/{doc_id:path}", response_model=DocumentOut, tags=["documents"], dependencies=auth)
    def get_document(doc_id: str) -> dict[str, Any]:
        """One document by id (ids may contain slashes, e.g. file paths: URL-encode them)."""
        doc = collection.get(doc_id)
        if doc is None:
            raise HTTPException(404, f"document {doc_id!r} not found")
        return {"id": doc.id, "title": doc.title, "text": doc.text, "metadata": doc.metadata}

    @app.delete("/documents/{doc_id:path}", tags=["documents"], dependencies=auth)
    def delete_document(doc_id: str) -> dict[str, str]:
        """Remove a document; it disappears from results at once."""
        report = collection.delete([doc_id])
        if not report.deleted:
            raise HTTPException(404, f"document {doc_id!r} not found")
        return {"deleted": doc_id}

    return app


def _key_checker(api_key: str):
    expected = api_key.encode("utf-8")

    def check(request: Request) -> None:
        given = request.headers.get("x-api-key")
        if given is None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            given = token.strip() if scheme.lower() == "bearer" else None
        if given is None:
            raise HTTPException(
                401, "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not hmac.compare_digest(given.encode("utf-8"), expected):
            raise HTTPException(401, "wrong API key", headers={"WWW-Authenticate": "Bearer"})

    return check


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = []
        for err in exc.errors():  # the offending input is not echoed back: it may be megabytes
            loc, message, kind = err.get("loc", ()), err.get("msg", ""), err.get("type", "")
            if kind == "json_invalid":
                where = loc[1] if len(loc) > 1 else "?"
                problem = (err.get("ctx") or {}).get("error", "")
                errors.append({"field": "body", "message": f"invalid JSON at character {where}: {problem}",
                               "type": kind})
            else:
                errors.append({"field": _field_name(loc), "message": message, "type": kind})
        detail = "; ".join(f"{e['field']}: {_plain(e['message'])}" if e["field"] else _plain(e["message"])
                           for e in errors[:5])
        if len(errors) > 5:
            detail += f"; and {len(errors) - 5} more"
        return JSONResponse({"detail": detail, "errors": errors}, status_code=422)

    @app.exception_handler(BadInputError)
    async def bad_input(_request: Request, exc: BadInputError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(str(exc))}, status_code=400)

    @app.exception_handler(CollectionLockedError)
    async def locked(_request: Request, exc: CollectionLockedError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(str(exc))}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(SemsearchError)
    async def failed(_request: Request, exc: SemsearchError) -> JSONResponse:
        log.error("request failed: %s", exc)
        return JSONResponse({"detail": _one_line(str(exc))}, status_code=500)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return JSONResponse({"detail": f"internal error ({type(exc).__name__}); see the server log"}, status_code=500)


def _field_name(loc) -> str:
    """``("body", "documents", 0, "text")`` -> ``"documents[0].text"``; ``("body",)`` -> ``"body"``."""
    parts = list(loc)
    if len(parts) > 1 and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name


def _plain(message: str) -> str:
    return message.removeprefix("Value error, ")


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("semsearch")
    except Exception:  # noqa: BLE001 - not installed: run from a checkout
        return "0"


__all__ = ["create_app", "API_KEY_ENV", "MAX_BODY_BYTES"]
