"""The judgment routes of the HTTP API: which documents answer which queries, and the collection measured on them.

::

    POST   /judgments  {judgments: [{query, id, grade}], dry_run}   -> the import report            (write)
    GET    /judgments?query=&id=                                    -> {"judgments": [...]}, newest first (read)
    DELETE /judgments?query=&id=  (or ?all=true)                    -> {"removed": n}               (write)
    POST   /eval       {judgments, mode, fusion, alpha, feedback, per_query} -> the evaluation      (read)

Each is a thin call of ``Collection``'s judgment verbs (``import_judgments``,
``judgments``, ``remove_judgments``, ``evaluate``). A judgment's ``who`` is the
name of the API key that sent it, ``"anonymous"`` on a server without keys; a
judgment naming a document the collection does not hold is listed in the
report's ``unknown`` and not stored. ``/eval`` ranks the top 100 of every
judged query, so it may run for ``EVAL_DEADLINE_S`` (or the service's deadline
when that is longer); it changes nothing, and a read scope may call it
(``app.server.access``).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request

from app.server.deadlines import Deadline
from app.server.limits import MAX_QUERY_CHARS
from app.server.public import model_label
from app.server.schemas import EvalRequest, EvaluationOut, JudgmentList, JudgmentsReport, JudgmentsRequest
from retriever.collection import Collection
from retriever.documents import MAX_ID_CHARS
from retriever.unicode_policy import check_utf8

EVAL_DEADLINE_S = 120.0  # POST /eval: a search of every judged query outlasts the service's deadline
ANONYMOUS = "anonymous"  # who judged, on a server without keys


def add_judgment_routes(app: FastAPI, collection: Collection, limit: Deadline) -> None:
    """``POST``, ``GET`` and ``DELETE /judgments`` and ``POST /eval`` over ``collection``, each bounded by
    ``limit`` (``/eval`` by ``EVAL_DEADLINE_S`` at least)."""

    @app.post("/judgments", response_model=JudgmentsReport, tags=["judgments"])
    async def add_judgments(body: JudgmentsRequest, request: Request) -> dict[str, Any]:
        """Store judgments: for each (query, document id), how well the document answers the query (grade 0
        does not, 1-3 does); a pair judged before gets the new grade. Ids the collection does not hold are
        listed in `unknown` (with their position in the list) and not stored; `who` is the calling key's name."""
        rows = [row.model_dump() for row in body.judgments]
        who = caller(request)
        report = await limit.run(lambda: collection.import_judgments(rows, who=who, dry_run=body.dry_run))
        return report.to_dict()

    @app.get("/judgments", response_model=JudgmentList, tags=["judgments"])
    async def list_judgments(
        query: str | None = Query(None, max_length=MAX_QUERY_CHARS, description="only this query's judgments"),
        doc_id: str | None = Query(None, alias="id", max_length=MAX_ID_CHARS, description="only this document's"),
    ) -> dict[str, Any]:
        """The collection's judgments, newest first: all of them, or those of a query, a document or both."""
        checked(query, doc_id)
        found = await limit.run(lambda: collection.judgments(query, doc_id=doc_id))
        return {"judgments": [judgment.to_dict() for judgment in found]}

    @app.delete("/judgments", tags=["judgments"])
    async def remove_judgments(
        query: str | None = Query(None, max_length=MAX_QUERY_CHARS, description="the judgments of this query"),
        doc_id: str | None = Query(None, alias="id", max_length=MAX_ID_CHARS, description="those of this document"),
        everything: bool = Query(False, alias="all", description="every judgment of the collection"),
    ) -> dict[str, int]:
        """Remove the judgments of a query, of a document, of both together, or (`all=true`) every one."""
        if query is None and doc_id is None and not everything:
            raise HTTPException(
                422, "query, id: give a query, a document id or both (or all=true to remove every judgment)"
            )
        checked(query, doc_id)
        removed = await limit.run(lambda: collection.remove_judgments(query, doc_id=doc_id, everything=everything))
        return {"removed": int(removed)}

    @app.post("/eval", response_model=EvaluationOut, tags=["judgments"])
    async def evaluate(body: EvalRequest) -> dict[str, Any]:
        """The collection measured on its judgments (or on the `judgments` sent, which are not stored):
        nDCG@10, MRR@10, Recall@100 and MAP@100 of the search settings given, the collection's own for the
        others; with `per_query`, each query's figures too."""
        rows = None if body.judgments is None else [row.model_dump() for row in body.judgments]
        measuring = Deadline(max(limit.seconds, EVAL_DEADLINE_S))
        measuring.on_cancel = limit.on_cancel
        evaluation = await measuring.run(
            lambda: collection.evaluate(rows, per_query=body.per_query, **body.search_fields())
        )
        answer = evaluation.to_dict()
        answer["settings"]["model"] = model_label(str(answer["settings"].get("model", "")))  # no absolute path
        return answer


def caller(request: Request) -> str:
    """Who sends ``request``: its API key's name, or ``"anonymous"`` on a server without keys."""
    key = getattr(request.state, "api_key", None)
    return key.name if key is not None else ANONYMOUS


def checked(query: str | None, doc_id: str | None) -> None:
    """A 400 naming ``query`` or ``id`` when the URL gives one that is not UTF-8 text."""
    if query is not None:
        check_utf8(query, "query")
    if doc_id is not None:
        check_utf8(doc_id, "id")
