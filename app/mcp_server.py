"""``semsearch mcp``: a collection served to MCP clients (assistants, agents) over stdio or streamable HTTP.

Six tools, each a thin call of ``Collection``:

- ``search(query, k=10, where=None, mode="hybrid", lang=None)``: ranked hits with their
  ids, titles, scores, the best passage and its character offsets, where in
  its source it is (``location``: page, slide, sheet and row, section or
  message, when the document records them), and metadata;
- ``fetch(id, start=None, end=None)``: a whole document, or the passage
  between two character offsets of it (as a hit gives them), with the
  location of its start;
- ``fields()``: the collection's metadata fields with example values, its
  size and model, and the search modes (what ``where`` and ``mode`` accept);
- ``judge(query, id, grade=1)``: record how well a document answers a query
  (0 does not, 1-3 does), kept in the collection as ``Collection.judge`` keeps
  it, ``who`` being the API key's name over HTTP and ``"mcp"`` otherwise;
- ``list_judgments(query=None, id=None)``: the judgments kept, newest first;
- ``evaluate(mode=None, fusion=None, alpha=None, feedback=None, per_query=False)``:
  the collection measured on its judgments (nDCG@10, MRR@10, Recall@100, MAP@100).

A bad argument is the tool's error, naming it; the server goes on. Over
HTTP the endpoint is ``/mcp``, guarded as ``semsearch serve``'s routes are
(``app.server.service.guard``): with an API key every request needs it
(``Authorization: Bearer <key>`` or ``X-API-Key: <key>``); without one, only
a loopback ``Host`` name or the address listened on is answered, whatever
that address, so a web page cannot read the collection by DNS rebinding.
Every tool reads but ``judge``, which writes: a key whose scope only reads the
collection gets the tool's error naming the scope it lacks.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from retriever.collection import DEFAULT_MODE, Collection
from retriever.errors import BadInputError, FilterError, SemsearchError
from retriever.locations import location_at, without_locations
from retriever.search.options import SearchOptions

try:  # the SDK is optional: without it build_server says how to install it
    from mcp.server.mcpserver import Context
except ImportError:  # pragma: no cover - the SDK is installed wherever the tests run
    Context = None

MAX_FETCH_CHARS = 200_000  # a fetched text longer than this comes cut, and says so
MCP_WHO = "mcp"  # who judged, when no API key names the caller


def build_server(collection: Collection) -> Any:
    """An ``mcp.server.mcpserver.MCPServer`` with the tools over ``collection``.

    Raises:
        ImportError: The MCP SDK is missing (``pip install 'semsearch[mcp]'``).
    """
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise ImportError("semsearch mcp needs the MCP SDK: pip install 'semsearch[mcp]'") from None

    server = MCPServer(
        "semsearch",
        instructions=f"Search the document collection {collection.root.name!r} by meaning and keywords. "
        "Call fields first to learn the metadata you can filter on.",
    )

    @server.tool(structured_output=True)
    @reported
    def search(
        query: str, k: int = 10, where: dict[str, Any] | None = None, mode: str = DEFAULT_MODE, lang: str | None = None
    ) -> dict[str, Any]:
        """Find the k documents that best match the query; each hit shows its best passage with offsets,
        where in its source the passage is (location, e.g. {"page": 12}, {"sheet": "Q1", "row": 5},
        {"section": ["Intro", "Scope"]}; null when unknown), and the passage's sentences that match best
        (evidence) with the query's terms in them.

        Args:
            query: Free text.
            k: Number of documents (1 to 100).
            where: Metadata filter, e.g. {"lang": "en", "year": {"$gte": 2020}}; operators $eq $ne $gt $gte
                $lt $lte $in $nin $and $or $not.
            mode: "hybrid" (meaning and keywords, default), "dense" (meaning) or "bm25" (keywords).
            lang: The query's language as an ISO 639-1 code (e.g. "de"): keywords are matched in that
                language; default: in every language the collection holds.
        """
        options = SearchOptions(k=min(k, 100), where=where, mode=mode, lang=lang)
        hits = collection.search(query, options=options)
        return {"hits": [hit_answer(hit) for hit in hits]}

    @server.tool(structured_output=True)
    @reported
    def fetch(id: str, start: int | None = None, end: int | None = None) -> dict[str, Any]:  # noqa: A002 - MCP's name
        """A document by id: its whole text, or the passage [start, end) in character offsets (from a hit),
        with where in its source that passage starts (location, as a hit gives it).

        Args:
            id: The document id, as a hit gives it.
            start: First character of the passage (default: the start).
            end: One past its last character (default: the end).
        """
        return fetch_answer(collection, id, start, end)

    @server.tool(structured_output=True)
    @reported
    def fields() -> dict[str, Any]:
        """The metadata fields to filter on (with example values), the search modes, documents and model."""
        info = collection.info()
        return {
            "fields": collection.metadata_fields(),
            "modes": list(Collection.SEARCH_MODES),
            "documents": info["documents"],
            "model": info["model"],
        }

    add_judgment_tools(server, collection)
    return server


def add_judgment_tools(server: Any, collection: Collection) -> None:
    """The tools ``judge`` (writes), ``list_judgments`` and ``evaluate`` on ``server``, over ``collection``."""

    @server.tool(structured_output=True)
    @reported
    def judge(query: str, id: str, grade: int = 1, ctx: Context = None) -> dict[str, Any]:  # noqa: A002
        """Record how well a document answers a query, so that the collection can be measured on it and learn
        from it; a document judged before for the same query gets the new grade.

        Args:
            query: The query, as a user would type it.
            id: The document id, as a hit gives it.
            grade: 0: does not answer the query; 1, 2 or 3: answers it (higher: better). Default 1.
        """
        who = judging_key(ctx, collection.root.name)
        return collection.judge(query, id, grade, who=who).to_dict()

    @server.tool(structured_output=True)
    @reported
    def list_judgments(query: str | None = None, id: str | None = None) -> dict[str, Any]:  # noqa: A002
        """The judgments kept, newest first: all of them, or those of a query, of a document, or both.

        Args:
            query: Only this query's judgments.
            id: Only this document's.
        """
        return {"judgments": [j.to_dict() for j in collection.judgments(query, doc_id=id)]}

    @server.tool(structured_output=True)
    @reported
    def evaluate(
        mode: str | None = None,
        fusion: str | None = None,
        alpha: float | None = None,
        feedback: bool | None = None,
        per_query: bool = False,
    ) -> dict[str, Any]:
        """How well search finds the judged documents of every judged query: nDCG@10, MRR@10, Recall@100 and
        MAP@100, with the number of queries and judgments and the settings measured.

        Args:
            mode: "hybrid", "dense" or "bm25"; default: the collection's default.
            fusion: For hybrid: "convex" or "rrf"; default: the collection's own setting.
            alpha: For convex fusion, the weight of meaning against keywords (0 to 1); default: the collection's.
            feedback: For hybrid, pseudo-relevance feedback on or off; default: the collection's.
            per_query: Also each query's figures.
        """
        given = {"mode": mode, "fusion": fusion, "alpha": alpha, "feedback": feedback}
        settings = {name: value for name, value in given.items() if value is not None}
        return collection.evaluate(per_query=per_query, **settings).to_dict()


def judging_key(ctx: Any, collection_name: str) -> str:
    """Who judges: the name of the request's API key, or ``"mcp"`` without one (stdio, a server without keys).

    Raises:
        ToolError: The key may read ``collection_name`` but not write to it.
    """
    key = request_key(ctx)
    if key is None:
        return MCP_WHO
    from app.server.access import WRITE, includes, refusal

    granted = key.access(collection_name)
    if not includes(granted, WRITE):
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(f"forbidden: {refusal(key, collection_name, granted, WRITE)}")
    return key.name


def request_key(ctx: Any) -> Any:
    """The ``app.server.access.ApiKey`` that the HTTP request behind ``ctx`` carries, or None (stdio, no keys)."""
    try:
        request = ctx.request_context.request
    except (AttributeError, ValueError):  # no context, or outside a request
        return None
    state = getattr(request, "state", None)
    return getattr(state, "api_key", None)


def reported(tool):
    """``tool`` with semsearch's errors (a bad filter, an unknown id) passed to the client as the tool's error."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(tool)
    def call(*args, **kwargs):
        try:
            return tool(*args, **kwargs)
        except FilterError as exc:
            raise ToolError(f"where: {exc}") from None
        except SemsearchError as exc:
            raise ToolError(str(exc)) from None

    return call


def hit_answer(hit: Any) -> dict[str, Any]:
    """A hit as the tool returns it: ``id, title, score, passage, start, end, evidence, location, metadata``."""
    return {
        "id": hit.id,
        "title": hit.title,
        "score": round(float(hit.score), 6),
        "passage": hit.text,
        "start": hit.start,
        "end": hit.end,
        "evidence": [sentence.to_dict() for sentence in hit.evidence],
        "location": hit.location,
        "metadata": hit.metadata,
    }


def fetch_answer(collection: Collection, doc_id: str, start: int | None, end: int | None) -> dict[str, Any]:
    """The ``fetch`` answer; an unknown id or offsets outside the text are errors naming them.

    ``location`` is where in its source the passage starts (``None`` without
    one); ``metadata`` leaves out the ``locations`` columns it comes from.
    """
    doc = collection.get(doc_id)
    if doc is None:
        raise BadInputError(f"id: no document {doc_id!r} in the collection")
    lo = 0 if start is None else start
    hi = len(doc.text) if end is None else end
    if not 0 <= lo <= hi <= len(doc.text):
        raise BadInputError(f"start/end: {lo}..{hi} is outside the document's 0..{len(doc.text)} characters")
    text = doc.text[lo:hi]
    cut = len(text) > MAX_FETCH_CHARS
    return {
        "id": doc.id,
        "title": doc.title,
        "start": lo,
        "end": lo + min(len(text), MAX_FETCH_CHARS),
        "length": len(doc.text),
        "text": text[:MAX_FETCH_CHARS],
        "cut": cut,
        "location": location_at(doc.metadata, lo),
        "metadata": without_locations(doc.metadata),
    }


def serve_stdio(path: str | Path) -> None:
    """Open the collection at ``path`` and answer MCP over stdin/stdout until the client closes it."""
    with Collection.open(path) as collection:
        build_server(collection).run(transport="stdio")


def http_app(collection: Collection, host: str, api_key: str | None, keys: Any = None) -> Any:
    """The streamable-HTTP ASGI app (endpoint ``/mcp``), guarded as ``semsearch serve``'s app is.

    With ``api_key`` (a key of every scope) or ``keys`` (an ``app.server.access.KeyRing``, scoped by the
    collection's directory name), every request needs a key; without, a request whose
    ``Host`` is neither a loopback name nor ``host`` gets 403
    (``app.server.hosts``). Bodies over the service's limit get 413.
    Sessions are stateless: each request stands alone, so a client survives a
    restart of the server and several may share it.
    """
    from app.server.access import KeyRing, single_collection
    from app.server.limits import MAX_BODY_BYTES
    from app.server.service import guard, key_ring

    app = build_server(collection).streamable_http_app(host=host, stateless_http=True, json_response=True)
    keys = key_ring(api_key, keys or KeyRing())
    guard(app, keys, single_collection(collection.root.name), MAX_BODY_BYTES, allowed_hosts=(host,))
    return app


def serve_http(path: str | Path, host: str, port: int, api_key: str | None) -> None:
    """Open the collection at ``path`` and answer MCP over streamable HTTP at ``http://host:port/mcp``."""
    import uvicorn

    with Collection.open(path) as collection:
        app = http_app(collection, host, api_key)
        uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
