"""The routes of the HTTP API: service (``/health``, ``/stats``, ``/metrics``), search (``/search``, ``/embed``),
documents, ``/admin/snapshot(s)``, and the OpenAI-compatible ``/v1`` routes (``app.server.openai_compat``).

Each route checks what the schema cannot, then runs the collection's work
through the request's ``Deadline``; errors it raises become JSON answers in
``app.server.errors``.
"""

from __future__ import annotations

import warnings
from typing import Any

import anyio
from fastapi import FastAPI, File, HTTPException, Response, UploadFile

from app.server.deadlines import Deadline
from app.server.errors import one_line
from app.server.judgment_routes import add_judgment_routes
from app.server.merging import BackgroundMerges
from app.server.metrics import ServiceMetrics
from app.server.openai_compat import add_openai_routes
from app.server.public import public_info
from app.server.schemas import (
    DocumentOut,
    DocumentsRequest,
    EmbedRequest,
    EmbedResponse,
    FilesResponse,
    SearchRequest,
    SearchResponse,
    SnapshotList,
    SnapshotRequest,
    SnapshotResponse,
    WriteResponse,
)
from app.server.snapshot_root import CollectionSnapshots, SnapshotBusyError, SnapshotNotFoundError, SnapshotRoomError
from app.server.workers import WorkerGroup
from retriever.collection import Collection
from retriever.errors import BadInputError, FilterError
from retriever.unicode_policy import check_utf8, printable

FILES_DEADLINE_S = 300.0  # POST /files: reading files, scans above all, outlasts the service's deadline


def add_routes(
    app: FastAPI,
    collection: Collection,
    limit: Deadline,
    workers: WorkerGroup | None,
    snapshots: CollectionSnapshots | None = None,
) -> None:
    """Add every route, serving ``collection`` with each request's work bounded by ``limit``; snapshots over
    HTTP go to ``snapshots`` (none without it)."""
    add_service_routes(app, collection, limit, workers)
    add_search_routes(app, collection, limit)
    add_document_routes(app, collection, limit)
    add_judgment_routes(app, collection, limit)
    add_openai_routes(app, collection, limit)
    add_admin_routes(app, collection, snapshots)


def add_metrics_route(app: FastAPI, metrics: ServiceMetrics) -> None:
    """``GET /metrics``: Prometheus' text format (see ``app.server.metrics``)."""

    @app.get("/metrics", tags=["service"], response_class=Response)
    def prometheus_metrics() -> Response:
        """Requests, latencies, search stages, commits and merges, deadline stops, and the collection's size."""
        return Response(metrics.exposition(), media_type=metrics.content_type)


def add_service_routes(app: FastAPI, collection: Collection, limit: Deadline, workers: WorkerGroup | None) -> None:
    """``GET /health`` (never needs the key) and ``GET /stats``."""

    @app.get("/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness: answers without touching the collection or the key; with several workers, how many are ready."""
        return health_answer(workers)

    @app.get("/stats", tags=["service"])
    async def stats() -> dict[str, Any]:
        """Documents, chunks, model, index type, size on disk, last update, search modes, the run-time encoder."""
        return await limit.run(
            lambda: (
                public_info(collection.info())
                | {"search_modes": list(Collection.SEARCH_MODES), "encoder": collection.embedder.info()}
            )
        )


def health_answer(workers: WorkerGroup | None) -> dict[str, Any]:
    """``{"status": "ok"}``, and with several workers ``{"workers": {"ready", "of"}}``."""
    if workers is None:
        return {"status": "ok"}
    return {"status": "ok", "workers": {"ready": workers.ready(), "of": workers.size}}


def add_search_routes(app: FastAPI, collection: Collection, limit: Deadline) -> None:
    """``POST /search`` and ``POST /embed``."""

    @app.post("/search", response_model=SearchResponse, tags=["search"])
    async def search(request: SearchRequest) -> dict[str, Any]:
        """The `k` documents most similar to `query`, each through its best chunk (as `semsearch search --json`)."""
        try:
            options = request.search_options()  # checks where
            hits = await limit.run(lambda: collection.search(request.query, vector=request.vector, options=options))
        except FilterError as exc:
            raise HTTPException(400, f"where: {one_line(str(exc))}") from None
        return {"hits": [hit.to_dict() for hit in hits]}

    @app.post("/embed", response_model=EmbedResponse, tags=["search"])
    async def embed(request: EmbedRequest) -> dict[str, Any]:
        """Unit-norm embeddings from the collection's model (the one that embeds queries and chunks)."""
        return await limit.run(embed_texts, collection, request)


def add_document_routes(app: FastAPI, collection: Collection, limit: Deadline) -> None:
    """``POST /documents``, ``GET /documents/{id}`` and ``DELETE /documents/{id}``.

    A write commits within its deadline; the merge it may call for runs after, in the background.
    """
    merges = BackgroundMerges(collection)
    app.state.merges = merges

    @app.post("/documents", response_model=WriteResponse, tags=["documents"])
    async def add_documents(request: DocumentsRequest) -> dict[str, Any]:
        """Add documents (one atomic commit); existing ids are replaced unless `upsert` is false."""
        ids = [doc.id for doc in request.documents]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise HTTPException(422, f"documents: id {printable(duplicates[0])} appears more than once")
        answer = await limit.run(write_documents, collection, request)
        merges.kick()
        return answer

    @app.post("/files", response_model=FilesResponse, tags=["documents"])
    async def add_files(files: list[UploadFile] = File(description="files of any format semsearch index reads")):
        """Index uploaded files as `semsearch index` reads them: what a file is comes from its content; a file is one
        document with its file name as id (an archive member `NAME::MEMBER`, a mailbox message `NAME#N`, JSONL and
        CSV records keep their ids); uploading a file again replaces its documents. A file that cannot be read is
        listed in `errors`, and the others go in."""
        uploads = [(upload.filename or "upload", await upload.read()) for upload in files]
        reading = Deadline(max(limit.seconds, FILES_DEADLINE_S))  # reading files (OCR above all) takes longer
        reading.on_cancel = limit.on_cancel
        report = await reading.run(index_files, collection, uploads)
        merges.kick()
        return report

    @app.get("/documents/{doc_id:path}", response_model=DocumentOut, tags=["documents"])
    async def get_document(doc_id: str) -> dict[str, Any]:
        """One document by id (ids may contain slashes, e.g. file paths: URL-encode them)."""
        doc = await limit.run(collection.get, path_id(doc_id))
        if doc is None:
            raise HTTPException(404, f"doc_id: document {printable(doc_id)} not found")
        return {"id": doc.id, "title": doc.title, "text": doc.text, "metadata": doc.metadata}

    @app.delete("/documents/{doc_id:path}", tags=["documents"])
    async def delete_document(doc_id: str) -> dict[str, str]:
        """Remove a document; it disappears from results at once."""
        report = await limit.run(collection.delete, [path_id(doc_id)])
        merges.kick()
        if not report.deleted:
            raise HTTPException(404, f"doc_id: document {printable(doc_id)} not found")
        return {"deleted": doc_id}


def embed_texts(collection: Collection, request: EmbedRequest) -> dict[str, Any]:
    """The ``/embed`` answer; a text over the model's window is a 400 unless ``truncate`` is set."""
    embedder = collection.embedder
    counts = embedder.count_tokens(request.texts)
    truncated = [i for i, n in enumerate(counts) if n > embedder.max_tokens]
    if truncated and not request.truncate:
        first = truncated[0]
        more = f" (and {len(truncated) - 1} more)" if len(truncated) > 1 else ""
        raise HTTPException(
            400,
            f"texts[{first}] has {counts[first]} tokens, more than the model's window of "
            f'{embedder.max_tokens}{more}; split it, or send "truncate": true to embed its first window only',
        )
    with warnings.catch_warnings():  # over-long texts are reported in "truncated", not as a warning
        warnings.simplefilter("ignore")
        vectors = embedder.embed(request.texts)
    return {
        "embeddings": vectors.tolist(),
        "dim": int(vectors.shape[1]),
        "model": collection.model["name"],
        "truncated": truncated,
    }


def write_documents(collection: Collection, request: DocumentsRequest) -> dict[str, Any]:
    """Upsert the request's documents in one commit; the ``/documents`` answer.

    Raises:
        HTTPException: 422 when only some documents carry a vector; 409 when
            ``upsert`` is false and an id exists.
    """
    ids = [doc.id for doc in request.documents]
    with_vectors = [doc.vector is not None for doc in request.documents]
    if any(with_vectors) and not all(with_vectors):
        first = with_vectors.index(not with_vectors[0])
        raise HTTPException(
            422, f"documents[{first}].vector: give a vector for every document of a request or for none"
        )
    vectors = [doc.vector for doc in request.documents] if all(with_vectors) else None
    if not request.upsert:
        existing = [doc_id for doc_id in ids if doc_id in collection]
        if existing:
            shown = ", ".join(printable(doc_id, 60) for doc_id in existing[:3])
            raise HTTPException(
                409,
                f"documents: {len(existing)} document id(s) already exist ({shown}); send upsert: true to replace them",
            )
    report = collection.upsert([doc.model_dump(exclude={"vector"}) for doc in request.documents], vectors=vectors)
    return {"added": report.added, "updated": report.updated, "unchanged": report.unchanged, "chunks": report.chunks}


def index_files(collection: Collection, uploads: list[tuple[str, bytes]]) -> dict[str, Any]:
    """Read and upsert uploaded ``(name, bytes)`` files (``indexer.uploads.index_uploads``); the ``/files`` answer."""
    from indexer.uploads import index_uploads

    report = index_uploads(collection, uploads)
    return {
        "files": report.files,
        "added": report.added,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "chunks": report.chunks,
        "errors": [{"file": name, "reason": reason} for name, reason in report.errors],
    }


def path_id(doc_id: str) -> str:
    """The id from the URL path; one that is not UTF-8 text is a 400 naming ``doc_id``."""
    check_utf8(doc_id, "doc_id")
    return doc_id


def add_admin_routes(app: FastAPI, collection: Collection, snapshots: CollectionSnapshots | None) -> None:
    """``POST /admin/snapshot``, ``GET /admin/snapshots`` and ``DELETE /admin/snapshots/{name}``: snapshots
    under the server's snapshot root (``app.server.snapshot_root``); 403 on each when it has none."""

    def kept() -> CollectionSnapshots:
        if snapshots is None:
            raise HTTPException(
                403,
                "snapshots over HTTP are off on this server: its operator starts it with "
                "--snapshot-root DIR to take them",
            )
        return snapshots

    @app.post("/admin/snapshot", response_model=SnapshotResponse, tags=["admin"])
    async def snapshot(request: SnapshotRequest) -> dict[str, Any]:
        """A consistent copy of the last committed generation, taken while writes go on (as `semsearch
        snapshot`), kept on the server under its snapshot root as `name` (by default the time and a random
        suffix); one at a time per collection; not bounded by the request deadline."""
        place = kept()
        if request.dest is not None:
            raise HTTPException(
                422,
                "dest: the server chooses where snapshots go (under its snapshot root); "
                "send a name instead, or nothing",
            )
        try:
            dest = place.destination(request.name)
            with place.taking(collection.root):
                report = await anyio.to_thread.run_sync(collection.snapshot, dest)
        except SnapshotBusyError as exc:
            raise HTTPException(429, str(exc), headers={"Retry-After": "5"}) from None
        except SnapshotRoomError as exc:
            raise HTTPException(507, str(exc)) from None
        except BadInputError as exc:
            raise HTTPException(409 if "exists" in str(exc) else 422, one_line(str(exc))) from None
        return {**report.to_dict(), "name": dest.name, "path": f"{place.collection}/{dest.name}"}

    @app.get("/admin/snapshots", response_model=SnapshotList, tags=["admin"])
    def list_snapshots() -> dict[str, Any]:
        """The snapshots of this collection kept under the server's snapshot root, oldest first."""
        place = kept()
        return {"snapshots": place.listed(), "max_kept": place.max_kept}

    @app.delete("/admin/snapshots/{name}", tags=["admin"])
    def remove_snapshot(name: str) -> dict[str, Any]:
        """Delete a snapshot kept under the server's snapshot root."""
        place = kept()
        check_utf8(name, "name")
        try:
            place.remove(name)
        except SnapshotNotFoundError as exc:
            raise HTTPException(404, str(exc)) from None
        except BadInputError as exc:
            raise HTTPException(422, one_line(str(exc))) from None
        return {"removed": name}
