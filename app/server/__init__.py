"""The HTTP API: search, embed and edit one collection over JSON.

``semsearch serve -c DIR`` runs ``create_app(DIR)`` on uvicorn; the OpenAPI
docs are at ``/docs`` (Swagger UI) and ``/redoc``. Routes::

    POST   /search            {query or vector, k, mode, where, exact}  -> {"hits": [Hit.to_dict(), ...]}
    POST   /embed             {texts, truncate}         -> {"embeddings": [[...]], "dim": N, ...}
    POST   /documents         {documents (each with an optional vector), upsert} -> added / updated / unchanged
    GET    /documents/{id}                              -> the document, or 404
    DELETE /documents/{id}                              -> {"deleted": id}, or 404
    GET    /stats                                       -> Collection.info(), the search modes and the encoder
    POST   /judgments         {judgments: [{query, id, grade}]} -> the import report (who: the key's name)
    GET    /judgments?query=&id=                        -> {"judgments": [...]}; DELETE with the same -> {"removed": n}
    POST   /eval              {judgments, mode, fusion, alpha, feedback, per_query} -> Collection.evaluate's figures
    GET    /metrics                                     -> Prometheus text format (app.server.metrics)
    POST   /admin/snapshot    {name}                    -> a consistent copy of the last commit, kept under the
                                                           server's --snapshot-root (app.server.snapshot_root)
    GET    /admin/snapshots                             -> the snapshots kept; DELETE /admin/snapshots/{name}
    GET    /health                                      -> {"status": "ok"} (never needs the key; with
                                                           --workers N also {"workers": {"ready", "of"}})

Every error answer is JSON with a one-line ``detail`` that names the problem
and the field: 400 bad input the retriever refused (a malformed filter, a
bad id), 401 missing or wrong API key, 403 a key without the scope (``/admin`` needs an admin scope), 404
unknown document, 409 ``upsert: false`` and the id exists, 429 a snapshot of the collection is being taken,
507 the snapshot root is full, 413 body over the size limit (also when the whole
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

Several collections (``serve -c a=DIR -c b=DIR2``) are served by
``app.server.multi``, each collection's routes under ``/collections/NAME``,
with keys scoped to read or write each one (``app.server.access``).

The package, one concern a module: ``limits`` (sizes, the deadline, the
environment variables), ``schemas`` (request and response bodies),
``middleware`` (body size limit), ``access`` (keys stored as hashes, scoped
per collection: 401 and 403), ``multi`` (many collections), ``deadlines`` (work stopped at the
deadline), ``routes``, ``errors`` (every failure as a JSON answer),
``workers`` (``serve --workers N``) and ``service`` (``create_app``, which
puts them together).
"""

from app.server.limits import API_KEY_ENV, DEFAULT_DEADLINE_S, MAX_BODY_BYTES, SERVE_ENV
from app.server.multi import app_from_environment, create_multi_app
from app.server.service import create_app
from app.server.workers import WorkerGroup

__all__ = [
    "create_app",
    "create_multi_app",
    "app_from_environment",
    "WorkerGroup",
    "API_KEY_ENV",
    "SERVE_ENV",
    "MAX_BODY_BYTES",
    "DEFAULT_DEADLINE_S",
]
