"""The HTTP API: search, embed and edit one collection over JSON.

``semsearch serve -c DIR`` runs ``create_app(DIR)`` on uvicorn; the OpenAPI
docs are at ``/docs`` (Swagger UI) and ``/redoc``. Routes::

    POST   /search            {query or vector, k, mode, where, exact}  -> {"hits": [Hit.to_dict(), ...]}
    POST   /embed             {texts, truncate}         -> {"embeddings": [[...]], "dim": N, ...}
    POST   /documents         {documents (each with an optional vector), upsert} -> added / updated / unchanged
    GET    /documents/{id}                              -> the document, or 404
    DELETE /documents/{id}                              -> {"deleted": id}, or 404
    GET    /stats                                       -> Collection.info(), the search modes and the encoder
    GET    /health                                      -> {"status": "ok"} (never needs the key; with
                                                           --workers N also {"workers": {"ready", "of"}})

Every error answer is JSON with a one-line ``detail`` that names the problem
and the field: 400 bad input the retriever refused (a malformed filter, a
bad id), 401 missing or wrong API key, 404 unknown document, 409 ``upsert:
false`` and the id exists, 413 body over the size limit (also when the whole
body was sent), 422 a request that does not fit the schema, 503 the request
ran past its deadline or the collection is locked by a writer. The service
reads the collection as last committed: a write by a batch job, the UI or
this API shows in the next search.

With an API key set, every route but ``/health`` needs it, the OpenAPI docs
(``/docs``, ``/redoc``, ``/openapi.json``) included.

Every request has a deadline (``deadline_s``, default 4 s): past it, the
answer is 503 and the work behind it is stopped (catalog queries are
interrupted, embedding stops between batches, a write rolls back), so the
worker is free again. A write answered 503 may still have committed if it
finished in the last instant; repeating it (``upsert``) is safe.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import threading
import warnings
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from retriever.collection import Collection
from retriever.deadline import deadline, expired
from retriever.documents import MAX_ID_CHARS, check_id, check_metadata
from retriever.errors import (
    BadInputError,
    CollectionLockedError,
    DeadlineExceededError,
    FilterError,
    SemsearchError,
)
from retriever.search.filters import validate_where
from retriever.unicode_policy import check_utf8, printable

log = logging.getLogger("semsearch.server")

API_KEY_ENV = "SEMSEARCH_API_KEY"
#: Settings of ``semsearch serve --workers N`` for each worker process, as JSON (see ``app_from_environment``).
SERVE_ENV = "SEMSEARCH_SERVE"
MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_QUERY_CHARS = 2_000
MAX_K = 1_000
MAX_EMBED_TEXTS = 256
MAX_TEXT_CHARS = 100_000
MAX_EMBED_CHARS = 1_000_000  # all texts of one /embed request together
MAX_DOCUMENTS = 1_000
MAX_VECTOR_DIM = 4_096
DEFAULT_DEADLINE_S = 4.0
MAX_DRAIN_BYTES = 64 * 1024 * 1024  # an oversized body up to this size is read (and dropped) before the 413

SearchMode = Literal[Collection.SEARCH_MODES]  # type: ignore[valid-type]  # the modes the retriever has


# -- request and response models -------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchRequest(_Strict):
    query: str | None = Field(None, min_length=1, max_length=MAX_QUERY_CHARS, description="free text")
    vector: list[float] | None = Field(
        None, max_length=MAX_VECTOR_DIM,
        description="a query embedding used instead of embedding `query` (dense, or hybrid with `query`)",
    )
    k: int = Field(10, ge=1, le=MAX_K, description="number of documents to return")
    mode: SearchMode | None = Field(None, description="search mode; default: the collection's default")
    where: dict[str, Any] | None = Field(
        None, description='metadata filter, e.g. {"lang": "en", "year": {"$gte": 2020}}'
    )
    exact: bool = Field(False, description="exact vector search also in approximately indexed segments")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is None:
            return value
        check_utf8(value, "query")
        if not value.strip():
            raise ValueError("query is blank")
        return value

    @model_validator(mode="after")
    def _query_or_vector(self) -> "SearchRequest":
        if self.query is None and self.vector is None:
            raise ValueError("give a query text, a query vector, or both")
        return self


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
            check_utf8(text, f"texts[{i}]")
        total = sum(map(len, texts))
        if total > MAX_EMBED_CHARS:
            raise ValueError(f"the texts hold {total:,} characters together; the limit is {MAX_EMBED_CHARS:,}")
        return texts


class EmbedResponse(BaseModel):
    embeddings: list[list[float]]
    dim: int
    model: str
    truncated: list[int] = Field(description="indices of texts longer than the window (only with truncate)")


class DocumentIn(_Strict):
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="no control characters")
    text: str = Field(min_length=1)
    title: str = Field("", max_length=10_000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    vector: list[float] | None = Field(
        None, max_length=MAX_VECTOR_DIM,
        description="the document's embedding, computed elsewhere; the document is then one chunk",
    )

    @field_validator("id")
    @classmethod
    def _id_rules(cls, value: str) -> str:
        check_id(value, "id")
        return value

    @field_validator("text", "title")
    @classmethod
    def _utf8(cls, value: str, info: ValidationInfo) -> str:
        check_utf8(value, info.field_name or "text")
        return value

    @field_validator("metadata")
    @classmethod
    def _plain_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_metadata(value, "metadata")
        return value


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


# -- request size limit and API key ------------------------------------------------------
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
        response = _JSON(
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
        response = _JSON({"detail": problem}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
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


class _JSON(JSONResponse):
    """JSON answers in ASCII: any text (even a refused lone surrogate) can be sent."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


class WorkerGroup:
    """The worker processes of one ``semsearch serve --workers N``, as any of them sees them.

    Each worker marks itself ready, with a file named by its process id in
    ``folder``, once its model is loaded and its searches are batched; a
    worker still loading takes no connections yet.

    Args:
        folder: A folder the serving command made for this group (and removes).
        size: Worker processes started.
    """

    def __init__(self, folder: str | os.PathLike, size: int) -> None:
        self.folder = Path(folder)
        self.size = size

    def mark_ready(self) -> None:
        """Mark this process ready."""
        (self.folder / str(os.getpid())).touch()

    def ready(self) -> int:
        """Workers marked ready and still running (one that died and was replaced counts once its successor is)."""
        count = 0
        for mark in self.folder.glob("[0-9]*"):
            try:
                os.kill(int(mark.name), 0)
            except (ProcessLookupError, ValueError):  # ended, or not a mark
                continue
            except PermissionError:  # running, under another user
                pass
            count += 1
        return count


# -- the app ---------------------------------------------------------------------------
def create_app(
    collection_path: str | os.PathLike,
    api_key: str | None = None,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    warm_up: bool = True,
    workers: WorkerGroup | None = None,
) -> FastAPI:
    """The FastAPI app serving the collection at ``collection_path``.

    Args:
        collection_path: The collection directory (opened now, so a wrong path
            fails here, not on the first request).
        api_key: When set, every route but ``/health`` (the docs included)
            needs ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``.
        max_body_bytes: Larger request bodies get a 413 (default 10 MB).
        deadline_s: Seconds a request may take before it is stopped and
            answered 503 (default 4); also the longest wait for the write lock.
        warm_up: Load the model at start-up so the first search is fast.
        workers: The group this app is one worker of (``serve --workers N``):
            it marks itself ready there, and ``/health`` counts the ready ones.
    """
    collection = Collection.open(collection_path, lock_timeout=deadline_s)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        if warm_up:
            collection.embed(["warm up"])
            # a passage backend other than the query one (torch, say) may cost seconds to load: open it
            # now, beside the first searches, so that the first write is not stopped by its deadline
            warm_writes = threading.Thread(target=lambda: collection.embedder.passage_backend, name="warm-up-writes")
            warm_writes.daemon = True
            warm_writes.start()
        collection.embedder.batch_queries()  # concurrent searches and /embed calls: encoded together where faster
        collection.batch_searches()  # and concurrent searches scan each segment's vectors once for all
        if workers is not None:
            workers.mark_ready()
        yield
        collection.close()

    late = f"the request ran past its deadline of {deadline_s:g} s and was stopped; try again, or narrow it"

    async def bounded(work, *args):
        """``work(*args)`` in a worker thread, stopped and answered 503 at the deadline."""

        def run():
            with deadline(deadline_s):
                try:
                    return work(*args)
                except Exception:
                    if expired():  # whatever the stopped work raised, the cause is the deadline
                        raise DeadlineExceededError(late) from None
                    raise

        with anyio.move_on_after(deadline_s):
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        raise DeadlineExceededError(late)

    app = FastAPI(
        title="semsearch",
        version=_version(),
        summary="Semantic search over one collection",
        description=(
            f"Serving the collection `{_display_name(collection_path)}`. Search by meaning, "
            "embed text with the collection's model, and add, read or delete documents. "
            + ("Every route but `/health` needs `Authorization: Bearer <key>` or `X-API-Key: <key>`."
               if api_key else "No API key is set.")
        ),
        lifespan=lifespan,
        default_response_class=_JSON,
    )
    app.state.collection = collection
    if api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)  # outermost: added last
    _add_error_handlers(app)

    @app.get("/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness: answers without touching the collection or the key; with several workers, how many are ready."""
        if workers is None:
            return {"status": "ok"}
        return {"status": "ok", "workers": {"ready": workers.ready(), "of": workers.size}}

    @app.get("/stats", tags=["service"])
    async def stats() -> dict[str, Any]:
        """Documents, chunks, model, index type, size on disk, last update, search modes, the run-time encoder."""
        return await bounded(
            lambda: collection.info()
            | {"search_modes": list(Collection.SEARCH_MODES), "encoder": collection.embedder.info()}
        )

    @app.post("/search", response_model=SearchResponse, tags=["search"])
    async def search(request: SearchRequest) -> dict[str, Any]:
        """The `k` documents most similar to `query`, each through its best chunk (as `semsearch search --json`)."""
        kwargs: dict[str, Any] = {"k": request.k, "where": request.where, "exact": request.exact}
        if request.vector is not None:
            kwargs["vector"] = request.vector
        if request.mode is not None:  # else the retriever's own default
            kwargs["mode"] = request.mode
        try:
            if request.where is not None:
                validate_where(request.where)
            hits = await bounded(lambda: collection.search(request.query, **kwargs))
        except FilterError as exc:
            raise HTTPException(400, f"where: {_one_line(str(exc))}") from None
        return {"hits": [hit.to_dict() for hit in hits]}

    @app.post("/embed", response_model=EmbedResponse, tags=["search"])
    async def embed(request: EmbedRequest) -> dict[str, Any]:
        """Unit-norm embeddings from the collection's model (the one that embeds queries and chunks)."""
        return await bounded(_embed, collection, request)

    @app.post("/documents", response_model=WriteResponse, tags=["documents"])
    async def add_documents(request: DocumentsRequest) -> dict[str, Any]:
        """Add documents (one atomic commit); existing ids are replaced unless `upsert` is false."""
        ids = [doc.id for doc in request.documents]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise HTTPException(422, f"documents: id {printable(duplicates[0])} appears more than once")
        return await bounded(_write, collection, request)

    @app.get("/documents/{doc_id:path}", response_model=DocumentOut, tags=["documents"])
    async def get_document(doc_id: str) -> dict[str, Any]:
        """One document by id (ids may contain slashes, e.g. file paths: URL-encode them)."""
        doc = await bounded(collection.get, _path_id(doc_id))
        if doc is None:
            raise HTTPException(404, f"doc_id: document {printable(doc_id)} not found")
        return {"id": doc.id, "title": doc.title, "text": doc.text, "metadata": doc.metadata}

    @app.delete("/documents/{doc_id:path}", tags=["documents"])
    async def delete_document(doc_id: str) -> dict[str, str]:
        """Remove a document; it disappears from results at once."""
        report = await bounded(collection.delete, [_path_id(doc_id)])
        if not report.deleted:
            raise HTTPException(404, f"doc_id: document {printable(doc_id)} not found")
        return {"deleted": doc_id}

    return app


def app_from_environment() -> FastAPI:
    """The app of one worker process of ``semsearch serve --workers N``.

    Reads ``{"collection": DIR, "deadline_s": SECONDS, "ready_dir": DIR,
    "workers": N}`` from ``$SEMSEARCH_SERVE`` and the key from
    ``$SEMSEARCH_API_KEY``; each worker opens the collection and loads its own
    encoder, and all of them see every commit.
    """
    settings = json.loads(os.environ[SERVE_ENV])
    return create_app(settings["collection"], api_key=os.environ.get(API_KEY_ENV) or None,
                      deadline_s=float(settings["deadline_s"]),
                      workers=WorkerGroup(settings["ready_dir"], int(settings["workers"])))


def _embed(collection: Collection, request: EmbedRequest) -> dict[str, Any]:
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


def _write(collection: Collection, request: DocumentsRequest) -> dict[str, Any]:
    ids = [doc.id for doc in request.documents]
    with_vectors = [doc.vector is not None for doc in request.documents]
    if any(with_vectors) and not all(with_vectors):
        first = with_vectors.index(not with_vectors[0])
        raise HTTPException(422, f"documents[{first}].vector: give a vector for every document of a request or for none")
    vectors = [doc.vector for doc in request.documents] if all(with_vectors) else None
    if not request.upsert:
        existing = [doc_id for doc_id in ids if doc_id in collection]
        if existing:
            shown = ", ".join(printable(doc_id, 60) for doc_id in existing[:3])
            raise HTTPException(
                409, f"documents: {len(existing)} document id(s) already exist ({shown}); "
                "send upsert: true to replace them"
            )
    report = collection.upsert([doc.model_dump(exclude={"vector"}) for doc in request.documents], vectors=vectors)
    return {"added": report.added, "updated": report.updated, "unchanged": report.unchanged,
            "chunks": report.chunks}


def _display_name(collection_path: str | os.PathLike) -> str:
    """The collection directory's own name, never its absolute path (the docs are public text)."""
    name = Path(collection_path).resolve().name
    return name if name.isprintable() and len(name) <= 60 and name.isascii() else "(unnamed)"


def _path_id(doc_id: str) -> str:
    """The id from the URL path; one that is not UTF-8 text is a 400 naming ``doc_id``."""
    check_utf8(doc_id, "doc_id")
    return doc_id


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
        return _JSON({"detail": detail, "errors": errors}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = _HTTP_DETAILS.get(str(exc.detail), exc.detail)
        return _JSON({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(BadInputError)
    async def bad_input(_request: Request, exc: BadInputError) -> JSONResponse:
        return _JSON({"detail": _one_line(str(exc))}, status_code=400)

    @app.exception_handler(RecursionError)
    async def too_deep(_request: Request, _exc: RecursionError) -> JSONResponse:
        return _JSON({"detail": "body: the JSON is nested too deeply"}, status_code=400)

    @app.exception_handler(CollectionLockedError)
    @app.exception_handler(DeadlineExceededError)
    async def unavailable(_request: Request, exc: SemsearchError) -> JSONResponse:
        return _JSON({"detail": _one_line(str(exc))}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(SemsearchError)
    async def failed(_request: Request, exc: SemsearchError) -> JSONResponse:
        log.error("request failed: %s", exc)
        return _JSON({"detail": _one_line(str(exc))}, status_code=500)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return _JSON({"detail": f"internal error ({type(exc).__name__}); see the server log"}, status_code=500)


_HTTP_DETAILS = {  # the framework's own answers, each naming the part of the request at fault
    "There was an error parsing the body": "body: the JSON cannot be parsed (nested too deeply, or a number too long?)",
    "Not Found": "path: no such route",
    "Method Not Allowed": "method: not allowed on this route",
}


def _field_name(loc) -> str:
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
