"""The FastAPI app of one collection: the pieces of ``app.server`` put together (many: ``app.server.multi``)."""

from __future__ import annotations

import os
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Callable, Iterable

from fastapi import FastAPI
from starlette.applications import Starlette

from app.server.access import AccessMiddleware, KeyRing, Resolver, single_collection
from app.server.deadlines import Deadline
from app.server.errors import add_error_handlers
from app.server.hosts import HostCheckMiddleware
from app.server.limits import DEFAULT_DEADLINE_S, MAX_BODY_BYTES
from app.server.metrics import MetricsMiddleware, ServiceMetrics
from app.server.middleware import BodyLimitMiddleware
from app.server.responses import AsciiJSONResponse
from app.server.routes import add_metrics_route, add_routes
from app.server.snapshot_root import DEFAULT_MAX_KEPT, CollectionSnapshots, check_snapshot_root
from app.server.workers import WorkerGroup
from retriever.collection import Collection


def create_app(
    collection_path: str | os.PathLike,
    api_key: str | None = None,
    *,
    keys: KeyRing | None = None,
    name: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    warm_up: bool = True,
    workers: WorkerGroup | None = None,
    allowed_hosts: Iterable[str] = (),
    snapshot_root: str | os.PathLike | None = None,
    max_snapshots: int = DEFAULT_MAX_KEPT,
) -> FastAPI:
    """The FastAPI app serving the collection at ``collection_path``.

    Args:
        collection_path: The collection directory (opened now, so a wrong path
            fails here, not on the first request).
        api_key: When set, every route but ``/health`` (the docs included)
            needs ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``.
        keys: Keys scoped per collection (``app.server.access``), besides ``api_key``.
        name: The collection's name in the keys' scopes (default: its directory's name).
        max_body_bytes: Larger request bodies get a 413 (default 10 MB).
        deadline_s: Seconds a request may take before it is stopped and
            answered 503 (default 4); also the longest wait for the write lock.
        warm_up: Load the model at start-up so the first search is fast.
        workers: The group this app is one worker of (``serve --workers N``):
            it marks itself ready there, and ``/health`` counts the ready ones.
        allowed_hosts: Without keys, the ``Host`` names answered besides
            loopback ones (default none; ``serve`` adds its ``--host``); any
            other gets 403, so a web page cannot reach the API by DNS rebinding.
        snapshot_root: Where ``POST /admin/snapshot`` keeps snapshots (``snapshot_root/<name>/``), a folder
            outside the collection (see ``app.server.snapshot_root``); None (the default): no snapshots over HTTP.
        max_snapshots: Snapshots of the collection kept under ``snapshot_root`` at most (default 20).
    """
    ring = key_ring(api_key, keys)
    name = name or Path(collection_path).resolve().name
    snapshots = None
    if snapshot_root is not None:
        root = check_snapshot_root(snapshot_root, [Path(collection_path)])
        snapshots = CollectionSnapshots(root, name, max_snapshots)
    app = collection_app(
        collection_path,
        deadline_s=deadline_s,
        warm_up=warm_up,
        workers=workers,
        description=describe(collection_path, bool(ring)),
        snapshots=snapshots,
    )
    guard(app, ring, single_collection(name), max_body_bytes, allowed_hosts, metrics=app.state.metrics)
    return app


def collection_app(
    collection_path: str | os.PathLike,
    *,
    deadline_s: float = DEFAULT_DEADLINE_S,
    warm_up: bool = True,
    workers: WorkerGroup | None = None,
    description: str = "",
    snapshots: CollectionSnapshots | None = None,
) -> FastAPI:
    """The routes of one collection, without a key check or body limit (``guard`` adds those); its snapshots
    over HTTP go to ``snapshots`` (none without)."""
    collection = Collection.open(collection_path, lock_timeout=deadline_s)
    app = FastAPI(
        title="semsearch",
        version=package_version(),
        summary="Semantic search over one collection",
        description=description,
        lifespan=lifespan(collection, warm_up, workers),
        default_response_class=AsciiJSONResponse,
    )
    app.state.collection = collection
    metrics = ServiceMetrics(collection)
    app.state.metrics = metrics
    add_error_handlers(app)
    limit = Deadline(deadline_s)
    limit.on_cancel = metrics.cancellations.inc
    add_routes(app, collection, limit, workers, snapshots)
    add_metrics_route(app, metrics)
    return app


def guard(
    app: Starlette,
    keys: KeyRing,
    resolve: Resolver,
    max_body_bytes: int,
    allowed_hosts: Iterable[str],
    metrics: ServiceMetrics | None = None,
) -> None:
    """Put the key check (or, with no keys, the ``Host`` check), the metrics and the body limit around ``app``.

    ``app`` is any Starlette app not yet started: the API's, or the MCP server's (``app.mcp_server``).
    """
    if keys:
        app.add_middleware(AccessMiddleware, keys=keys, resolve=resolve)
    else:
        app.add_middleware(HostCheckMiddleware, allowed=tuple(allowed_hosts))
    if metrics is not None:
        app.add_middleware(MetricsMiddleware, metrics=metrics)  # counts every answer, 401 and 403 included
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)  # outermost: added last


def key_ring(api_key: str | None, keys: KeyRing | None) -> KeyRing:
    """``keys`` and the plain ``api_key`` (scope ``*:admin``) as one ring; empty when neither is given."""
    ring = keys or KeyRing()
    return ring.merged(KeyRing.plain(api_key)) if api_key else ring


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


def describe(collection_path: str | os.PathLike, keyed: bool) -> str:
    """The OpenAPI description: which collection is served and whether a key is needed."""
    return (
        f"Serving the collection `{display_name(collection_path)}`. Search by meaning, "
        "embed text with the collection's model, and add, read or delete documents. "
        + (
            "Every route but `/health` needs `Authorization: Bearer <key>` or `X-API-Key: <key>`."
            if keyed
            else "No API key is set."
        )
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
