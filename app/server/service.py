"""The FastAPI app of one collection: the pieces of ``app.server`` put together."""

from __future__ import annotations

import os
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Callable, Iterable

from fastapi import FastAPI

from app.server.deadlines import Deadline
from app.server.errors import add_error_handlers
from app.server.hosts import HostCheckMiddleware
from app.server.limits import API_KEY_ENV, DEFAULT_DEADLINE_S, MAX_BODY_BYTES
from app.server.metrics import MetricsMiddleware, ServiceMetrics
from app.server.middleware import ApiKeyMiddleware, BodyLimitMiddleware
from app.server.responses import AsciiJSONResponse
from app.server.routes import add_metrics_route, add_routes
from app.server.workers import WorkerGroup, read_worker_settings
from retriever.collection import Collection


def create_app(
    collection_path: str | os.PathLike,
    api_key: str | None = None,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    warm_up: bool = True,
    workers: WorkerGroup | None = None,
    allowed_hosts: Iterable[str] = (),
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
        allowed_hosts: Without ``api_key``, the ``Host`` names answered besides
            loopback ones (default none; ``serve`` adds its ``--host``); any
            other gets 403, so a web page cannot reach the API by DNS rebinding.
    """
    collection = Collection.open(collection_path, lock_timeout=deadline_s)
    app = FastAPI(
        title="semsearch",
        version=package_version(),
        summary="Semantic search over one collection",
        description=describe(collection_path, api_key),
        lifespan=lifespan(collection, warm_up, workers),
        default_response_class=AsciiJSONResponse,
    )
    app.state.collection = collection
    if api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key)
    else:
        app.add_middleware(HostCheckMiddleware, allowed=tuple(allowed_hosts))
    metrics = ServiceMetrics(collection)
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # counts every answer, 401 and 413 included
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)  # outermost: added last
    add_error_handlers(app)
    limit = Deadline(deadline_s)
    limit.on_cancel = metrics.cancellations.inc
    add_routes(app, collection, limit, workers)
    add_metrics_route(app, metrics)
    return app


def app_from_environment() -> FastAPI:
    """The app of one worker process of ``semsearch serve --workers N``.

    Reads ``{"collection": DIR, "deadline_s": SECONDS, "ready_dir": DIR,
    "workers": N}`` from ``$SEMSEARCH_SERVE`` and the key from
    ``$SEMSEARCH_API_KEY``; each worker opens the collection and loads its own
    encoder, and all of them see every commit.
    """
    settings = read_worker_settings()
    return create_app(settings["collection"], api_key=os.environ.get(API_KEY_ENV) or None,
                      deadline_s=float(settings["deadline_s"]), allowed_hosts=settings.get("allowed_hosts", ()),
                      workers=WorkerGroup(settings["ready_dir"], int(settings["workers"])))


def lifespan(collection: Collection, warm_up: bool, workers: WorkerGroup | None) -> Callable:
    """Start-up and shut-down of the app: warm the encoder, batch concurrent work, mark ready; close at the end."""

    @asynccontextmanager
    async def span(_app: FastAPI):
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

    return span


def describe(collection_path: str | os.PathLike, api_key: str | None) -> str:
    """The OpenAPI description: which collection is served and whether a key is needed."""
    return (
        f"Serving the collection `{display_name(collection_path)}`. Search by meaning, "
        "embed text with the collection's model, and add, read or delete documents. "
        + ("Every route but `/health` needs `Authorization: Bearer <key>` or `X-API-Key: <key>`."
           if api_key else "No API key is set.")
    )


def display_name(collection_path: str | os.PathLike) -> str:
    """The collection directory's own name, never its absolute path (the docs are public text)."""
    name = Path(collection_path).resolve().name
    return name if name.isprintable() and len(name) <= 60 and name.isascii() else "(unnamed)"


def package_version() -> str:
    """The installed semsearch version; ``"0"`` when run from a checkout that is not installed."""
    try:
        from importlib.metadata import version

        return version("semsearch")
    except Exception:  # noqa: BLE001 - not installed: run from a checkout
        return "0"
