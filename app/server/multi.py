"""One server for many collections: each collection's routes under ``/collections/{name}``.

``semsearch serve -c docs=DIR -c papers=DIR2`` (or ``-c FOLDER`` holding
collections) answers::

    GET  /health                         -> {"status": "ok"} (never needs a key)
    GET  /collections                    -> the collections the key may read: name, documents, model
    *    /collections/{name}/...         -> every route of ``create_app`` for that collection
                                            (``/search``, ``/documents``, ``/v1/embeddings``, ``/metrics``...)

Keys are scoped per collection (``app.server.access``): reading
``/collections/docs/search`` needs ``docs:read``, adding to it ``docs:write``.
Each collection is opened (and its encoder loaded) at start-up; collections
sharing a model directory share nothing else.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Iterable, Mapping

from fastapi import FastAPI, HTTPException, Request

from app.server.access import KEYS_ENV, KeyRing, check_name, readable
from app.server.errors import add_error_handlers
from app.server.key_reload import KEYS_FILE_ENV, ReloadingKeyRing
from app.server.limits import DEFAULT_DEADLINE_S, MAX_BODY_BYTES
from app.server.metrics import MetricsMiddleware
from app.server.public import model_label
from app.server.responses import AsciiJSONResponse
from app.server.routes import health_answer
from app.server.service import collection_app, create_app, describe, guard, key_ring, package_version
from app.server.snapshot_root import DEFAULT_MAX_KEPT, CollectionSnapshots, check_snapshot_root
from app.server.workers import WorkerGroup, read_worker_settings

PREFIX = "/collections"


def create_multi_app(
    collections: Mapping[str, str | os.PathLike],
    api_key: str | None = None,
    *,
    keys: KeyRing | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    deadline_s: float = DEFAULT_DEADLINE_S,
    warm_up: bool = True,
    workers: WorkerGroup | None = None,
    allowed_hosts: Iterable[str] = (),
    snapshot_root: str | os.PathLike | None = None,
    max_snapshots: int = DEFAULT_MAX_KEPT,
) -> FastAPI:
    """The app serving every collection of ``collections`` (``{name: directory}``), each under its name.

    Args:
        collections: At least one; names as ``app.server.access.check_name`` allows.
        api_key, keys, max_body_bytes, deadline_s, warm_up, allowed_hosts: As ``create_app``; a plain
            ``api_key`` may do anything to every collection.
        workers: The group this app is one worker of: it marks itself ready once every collection is.
        snapshot_root, max_snapshots: As ``create_app``: each collection's snapshots in ``snapshot_root/<name>/``.

    Raises:
        BadInputError: No collection, or a name that cannot be a path segment.
        SemsearchError: A directory that is not a collection (all are opened before any is served).
    """
    from retriever.errors import BadInputError

    if not collections:
        raise BadInputError("serve needs at least one collection")
    names = {check_name(name, "collection name"): path for name, path in collections.items()}
    ring = key_ring(api_key, keys)
    root = None if snapshot_root is None else check_snapshot_root(snapshot_root, map(Path, names.values()))
    apps = {
        name: collection_app(
            path,
            deadline_s=deadline_s,
            warm_up=warm_up,
            description=describe(path, bool(ring)),
            snapshots=None if root is None else CollectionSnapshots(root, name, max_snapshots),
        )
        for name, path in sorted(names.items())
    }
    app = FastAPI(
        title="semsearch",
        version=package_version(),
        summary=f"Semantic search over {len(apps)} collection(s)",
        description="Each collection's routes are under `/collections/{name}`, with their own docs at "
        "`/collections/{name}/docs`. "
        + ("Keys are scoped to read, write or administer each collection." if ring else "No API key is set."),
        lifespan=_lifespan(apps, workers),
        default_response_class=AsciiJSONResponse,
    )
    app.state.apps = apps
    add_error_handlers(app)
    for name, sub in apps.items():  # mounted before the routes, so that the catch-all of unknown names comes last
        sub.add_middleware(MetricsMiddleware, metrics=sub.state.metrics)
        app.mount(f"{PREFIX}/{name}", sub)
    _add_routes(app, apps, ring, workers)
    guard(app, ring, _resolver(apps), max_body_bytes, allowed_hosts)
    return app


def _resolver(apps: Mapping[str, FastAPI]):
    """``/collections/NAME/rest`` -> ``(NAME, "/rest")`` for a served NAME; anything else -> ``(None, path)``."""

    def resolve(path: str) -> tuple[str | None, str]:
        if path.startswith(PREFIX + "/"):
            name, _, rest = path[len(PREFIX) + 1 :].partition("/")
            if name in apps:
                return name, "/" + rest
        return None, path

    return resolve


def _add_routes(app: FastAPI, apps: Mapping[str, FastAPI], ring: KeyRing, workers: WorkerGroup | None) -> None:
    @app.get("/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness: answers without a key; with several workers, how many are ready."""
        return health_answer(workers)

    @app.get(PREFIX, tags=["service"])
    def list_collections(request: Request) -> dict[str, Any]:
        """The collections this key may read: name, documents, model, and the base URL of their routes."""
        key = getattr(request.state, "api_key", None)
        shown = []
        for name in readable(ring, key, apps):
            collection = apps[name].state.collection
            shown.append(
                {
                    "name": name,
                    "url": f"{PREFIX}/{name}",
                    "documents": len(collection),
                    "model": model_label(collection.model["name"]),
                    "access": "write" if key is None else key.access(name),
                }
            )
        return {"collections": shown}

    @app.api_route(
        PREFIX + "/{name}/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False
    )
    def unknown_collection(name: str, request: Request) -> None:
        key = getattr(request.state, "api_key", None)
        served = readable(ring, key, apps)
        raise HTTPException(
            404,
            f"collection: no collection {name[:64]!r} here; "
            f"{'this key may use: ' + ', '.join(served) if served else 'none is open to this key'}",
        )


def _lifespan(apps: Mapping[str, FastAPI], workers: WorkerGroup | None):
    """Start every collection's app (warm-up, batching) before the first request, and close them all at the end."""

    @asynccontextmanager
    async def span(_app: FastAPI):
        async with AsyncExitStack() as stack:
            for sub in apps.values():
                await stack.enter_async_context(sub.router.lifespan_context(sub))
            if workers is not None:
                workers.mark_ready()
            yield

    return span


def app_from_environment() -> FastAPI:
    """The app of one worker process of ``semsearch serve --workers N``.

    Reads ``{"collections": {NAME: DIR}, "mounted", "deadline_s", "ready_dir",
    "workers", "allowed_hosts", "snapshot_root", "max_snapshots"}`` from ``$SEMSEARCH_SERVE``, the keys'
    hashes from ``$SEMSEARCH_KEYS`` and the keys file (read again when it changes) from
    ``$SEMSEARCH_KEYS_FILE``; each worker opens the collections and
    loads its own encoder, and all of them see every commit.
    """
    settings = read_worker_settings()
    keys = KeyRing.parse(os.environ.get(KEYS_ENV, ""), f"${KEYS_ENV}")
    if os.environ.get(KEYS_FILE_ENV):  # read again when it changes
        keys = ReloadingKeyRing(os.environ[KEYS_FILE_ENV], keys)
    group = WorkerGroup(settings["ready_dir"], int(settings["workers"]))
    common = {
        "keys": keys,
        "deadline_s": float(settings["deadline_s"]),
        "workers": group,
        "allowed_hosts": settings.get("allowed_hosts", ()),
        "snapshot_root": settings.get("snapshot_root"),
        "max_snapshots": int(settings.get("max_snapshots", DEFAULT_MAX_KEPT)),
    }
    if settings["mounted"]:
        return create_multi_app(settings["collections"], **common)
    ((name, path),) = settings["collections"].items()
    return create_app(path, name=name, **common)
