"""``RemoteCollection``: a client of a running ``semsearch serve``, with ``Collection``'s verbs.

::

    remote = RemoteCollection("http://127.0.0.1:8000", api_key="...")
    remote.upsert([{"id": "a", "text": "...", "metadata": {"lang": "en"}}])
    hits = remote.search("what was said about X", k=5, where={"lang": "en"})

The standard library alone (``urllib``), so it needs no extra. Each verb sends
JSON requests to the HTTP API and returns what ``Collection``'s returns:
``Hit``\\ s, a ``Document`` or ``None``, a ``WriteReport``, ``(n, dim)``
float32 vectors; the judgment verbs (``judge``, ``import_judgments`` of a list,
``judgments``, ``remove_judgments``, ``evaluate``) return ``Judgment``\\ s, a
``JudgmentImport`` and an ``Evaluation``, with ``who`` the API key's name.
Arguments are checked here as ``Collection`` checks them
(``retriever.validation``), so bad input fails before a request is sent.

The server's error answers become semsearch errors carrying its one-line
``detail``: 400, 409, 413 and 422 ``BadInputError`` (``FilterError`` when the
field at fault is ``where``), 401 and 403 ``AuthenticationError``, 503
``CollectionLockedError`` or ``DeadlineExceededError``, anything else
``SemsearchError``; a server that cannot be reached or does not answer within
``timeout`` is a ``ServerUnreachableError`` naming the URL.

Redirects are followed only within the server's origin (its scheme, host
name and port): a redirect to another port, host name or scheme (https to
http, or back), to a URL with credentials in it, or to something that is no
http(s) URL is a ``SemsearchError`` naming where it pointed, raised before
anything is sent there, so the API key reaches no other origin
(``SameOriginRedirects``).

Where a server differs from a local collection: writes go in requests of at
most ``batch_size`` documents, each one atomic commit on the server (bounded
by its request deadline, 4 s by default); ``delete`` sends one request per id;
``search`` fuses with the server's defaults (no ``fusion`` or ``alpha``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import fields
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from retriever import validation
from retriever.collection import DEFAULT_MODE, Collection, Vectors
from retriever.documents import Document, Evidence, Hit, TermMatch
from retriever.encoding.embedder import InputTooLongWarning
from retriever.errors import (
    AuthenticationError,
    BadInputError,
    CollectionLockedError,
    DeadlineExceededError,
    FilterError,
    SemsearchError,
    ServerUnreachableError,
)
from retriever.judgments.records import (
    DEFAULT_GRADE,
    Judgment,
    JudgmentImport,
    check_doc_id,
    check_query_text,
    judgment_from,
    query_key,
)
from retriever.judgments.scoring import Evaluation
from retriever.redirects import SAME_ORIGIN_OPENER
from retriever.search.evidence import DEFAULT_EVIDENCE
from retriever.search.options import SearchOptions
from retriever.storage.changes import WriteReport
from retriever.unicode_policy import printable

__all__ = ["RemoteCollection", "DEFAULT_BATCH", "DEFAULT_TIMEOUT_S"]

DEFAULT_BATCH = 64  # documents or texts per request: well inside the server's deadline and limits
DEFAULT_TIMEOUT_S = 30.0
MAX_REQUEST_CHARS = 1_000_000  # text characters per /embed request (the server's MAX_EMBED_CHARS)
MAX_JUDGMENTS = 10_000  # judgments per POST /judgments (the server's limit)
MAX_JUDGMENT_CHARS = 500_000  # query and id characters per POST /judgments: well inside the body limit
EVAL_TIMEOUT_S = 150.0  # the least wait for POST /eval, which the server lets run 120 s


class RemoteCollection:
    """A collection served by ``semsearch serve`` at ``url``, used like a local ``Collection``.

    Args:
        url: The server's base URL, e.g. ``"http://127.0.0.1:8000"``.
        api_key: The server's API key (sent as ``Authorization: Bearer``), if it has one.
        timeout: Seconds to wait for each answer (default 30).

    Raises:
        BadInputError: ``url`` is not an http(s) URL, or ``timeout`` is not a positive number.
    """

    SEARCH_MODES: tuple[str, ...] = Collection.SEARCH_MODES

    def __init__(self, url: str, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise BadInputError(f"url must be an http(s) URL such as 'http://127.0.0.1:8000', got {url!r}")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise BadInputError("api_key must be a non-empty string or None")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise BadInputError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self._api_key = api_key
        self._dim: int | None = None

    def __repr__(self) -> str:
        return f"RemoteCollection({self.url!r})"

    # -- reads ------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """The server's ``GET /stats``: documents, chunks, model, dim, index, search modes, encoder."""
        return self._call("GET", "/stats")

    def __len__(self) -> int:
        answer = self.info()
        with self._reading("/stats"):
            return int(answer["documents"])

    def __contains__(self, doc_id: str) -> bool:
        return self.get(doc_id) is not None

    @property
    def dim(self) -> int:
        """The dimension of the server's model (asked once)."""
        if self._dim is None:
            answer = self.info()
            with self._reading("/stats"):
                self._dim = int(answer["dim"])
        return self._dim

    def get(self, doc_id: str) -> Document | None:
        """The stored document, or ``None`` when ``doc_id`` is unknown.

        Raises:
            BadInputError: ``doc_id`` is not a UTF-8 string.
        """
        validation.check_id_arg(doc_id)
        if not doc_id:
            return None
        found = self._call("GET", _document_path(doc_id), missing_ok=True)
        if found is None:
            return None
        with self._reading("/documents"):
            return Document(id=found["id"], text=found["text"], title=found["title"], metadata=found["metadata"])

    def search(
        self,
        query: str | None = None,
        k: int = 10,
        where: dict[str, Any] | None = None,
        mode: str = DEFAULT_MODE,
        *,
        vector: np.ndarray | Sequence[float] | None = None,
        exact: bool = False,
        evidence: str = DEFAULT_EVIDENCE,
        lang: str | None = None,
    ) -> list[Hit]:
        """The ``k`` documents that best match ``query`` (or ``vector``), as ``Collection.search``.

        Args:
            query: Free text.
            k: Number of documents (default 10; the server allows at most 1,000).
            where: Metadata filter (``retriever.filters``).
            mode: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (default).
            vector: A query embedding ``(dim,)`` from the server's model, instead of or beside ``query``.
            exact: Search every vector exactly (default False).
            evidence: ``"terms"`` (default), ``"auto"``, ``"semantic"`` or ``"none"``.
            lang: The query's language (ISO 639-1), as for ``Collection.search`` (default: each the collection holds).

        Returns:
            Hits by descending score, each through its best chunk.

        Raises:
            BadInputError: An argument is wrong. FilterError: ``where`` is malformed.
        """
        validation.check_query(query, vector is not None)
        options = SearchOptions(k=k, where=where, mode=mode, exact=exact, evidence=evidence, lang=lang)
        validation.check_query_mode(query, options)
        body: dict[str, Any] = {"query": query} | search_body(options)
        if vector is not None:
            body["vector"] = _vector_rows(vector, "query vector", single=True)[0]
        answer = self._call("POST", "/search", body)
        with self._reading("/search"):
            return [_hit(found) for found in answer["hits"]]

    def embed(self, texts: Sequence[str] | str, *, on_overflow: str = "warn") -> np.ndarray:
        """Embed texts with the server's model.

        Args:
            texts: One string or a sequence of strings.
            on_overflow: Text longer than the model's window: ``"warn"`` (default;
                its first window is embedded, an ``InputTooLongWarning`` says so) or ``"error"``.

        Returns:
            ``(len(texts), dim)`` float32, rows of unit norm.
        """
        texts = validation.check_texts(texts)
        validation.check_embed_options(None, on_overflow)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[float]] = []
        cut: list[int] = []
        for start, batch in _batches(texts):
            answer = self._call("POST", "/embed", {"texts": batch, "truncate": on_overflow == "warn"})
            with self._reading("/embed"):
                rows += answer["embeddings"]
                cut += [start + i for i in answer["truncated"]]
        if cut:
            warnings.warn(
                f"{len(cut)} of {len(texts)} text(s) exceed the model's window (first: text {cut[0]}); "
                "only the first window is embedded",
                InputTooLongWarning,
                stacklevel=2,
            )
        return np.asarray(rows, dtype=np.float32)

    # -- writes -----------------------------------------------------------
    def add(
        self,
        documents: Iterable[Document | dict[str, Any]],
        vectors: Vectors | None = None,
        *,
        batch_size: int = DEFAULT_BATCH,
    ) -> WriteReport:
        """Insert new documents; an id that exists already is a ``BadInputError`` (use ``upsert``).

        Documents go in requests of ``batch_size`` (default 64), each an atomic
        commit: when a later request finds an existing id, earlier ones stay written.
        """
        return self._write(documents, vectors, batch_size, upsert=False)

    def upsert(
        self,
        documents: Iterable[Document | dict[str, Any]],
        vectors: Vectors | None = None,
        *,
        batch_size: int = DEFAULT_BATCH,
    ) -> WriteReport:
        """Insert or replace documents, as ``Collection.upsert``.

        Args:
            documents: Documents or mappings with ``id``, ``text``, ``title``, ``metadata``.
            vectors: Optional ``(len(documents), dim)`` embeddings computed elsewhere
                (each document is then one chunk with its vector).
            batch_size: Documents per request (default 64), each an atomic commit on the server.

        Returns:
            What was written (``added``, ``updated``, ``unchanged``; ``chunks``), over all requests.
        """
        return self._write(documents, vectors, batch_size, upsert=True)

    def delete(self, ids: Iterable[str]) -> WriteReport:
        """Remove documents by id, one request each; unknown ids are ignored.

        Returns:
            The report, with ``deleted`` the ids that were stored.
        """
        wanted = [doc_id for doc_id in dict.fromkeys(validation.check_ids(ids)) if doc_id]
        return WriteReport(
            deleted=[
                doc_id for doc_id in wanted if self._call("DELETE", _document_path(doc_id), missing_ok=True) is not None
            ]
        )

    def _write(self, documents: Any, vectors: Vectors | None, batch_size: Any, upsert: bool) -> WriteReport:
        docs = validation.check_documents(documents)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise BadInputError(f"batch_size must be a positive integer, got {printable(repr(batch_size), 40)}")
        rows = None if vectors is None else _vector_rows(vectors, "vectors", n=len(docs))
        report = WriteReport()
        for start in range(0, len(docs), batch_size):
            body = [
                {"id": doc.id, "text": doc.text, "title": doc.title, "metadata": doc.metadata}
                | ({"vector": rows[start + i]} if rows is not None else {})
                for i, doc in enumerate(docs[start : start + batch_size])
            ]
            answer = self._call("POST", "/documents", {"documents": body, "upsert": upsert})
            with self._reading("/documents"):
                report.merge(WriteReport(answer["added"], answer["updated"], answer["unchanged"], [], answer["chunks"]))
        return report

    # -- judgments --------------------------------------------------------
    def judge(self, query: str, doc_id: str, grade: int = DEFAULT_GRADE) -> Judgment:
        """Store one judgment, as ``Collection.judge``; the server records the API key's name as ``who``.

        Returns:
            The stored ``Judgment``, with the ``who`` and ``at`` the server gave it.

        Raises:
            BadInputError: A bad query or grade; the collection holds no document ``doc_id``.
        """
        judgment = judgment_from({"query": query, "id": doc_id, "grade": grade})
        if self.import_judgments([judgment]).unknown:
            raise BadInputError(f"the collection holds no document {judgment.doc_id!r}")
        stored = self.judgments(judgment.query, doc_id=judgment.doc_id)
        return stored[0] if stored else judgment

    def import_judgments(
        self, judgments: Iterable[Judgment | dict[str, Any]], *, dry_run: bool = False
    ) -> JudgmentImport:
        """Store many judgments, as ``Collection.import_judgments`` stores a list of them (a file is read here
        first: ``retriever.judgments.files.read_judgments``).

        Every judgment is checked before any is sent; they go in requests of at most 10,000. The server
        records the API key's name as each one's ``who`` (a ``who`` given here is not sent).

        Args:
            judgments: ``Judgment``\\ s or dicts ``{"query", "id", "grade"}`` (grade optional: 1).
            dry_run: Check and count only; store nothing.

        Returns:
            The ``JudgmentImport``; ``unknown`` names judgments by their 0-based position in ``judgments``.

        Raises:
            BadInputError: A path instead of judgments, or a bad judgment (``judgments[i]: reason``): nothing is sent.
        """
        rows = _judgment_rows(judgments)
        report = JudgmentImport(dry_run=bool(dry_run))
        for start, batch in _judgment_batches(rows):
            answer = self._call("POST", "/judgments", {"judgments": batch, "dry_run": bool(dry_run)})
            with self._reading("/judgments"):
                report.stored += int(answer["stored"])
                report.replaced += int(answer["replaced"])
                report.unknown += [(start + int(u["line"]), str(u["id"])) for u in answer["unknown"]]
        unknown = {position for position, _ in report.unknown}
        report.queries = len({query_key(j.query) for i, j in enumerate(rows) if i not in unknown})
        return report

    def judgments(self, query: str | None = None, *, doc_id: str | None = None) -> list[Judgment]:
        """The stored judgments, newest first; only those of ``query`` and/or ``doc_id`` when given."""
        answer = self._call("GET", "/judgments" + _selection_query(query, doc_id))
        with self._reading("/judgments"):
            return [
                Judgment(str(j["query"]), str(j["id"]), int(j["grade"]), str(j["who"]), float(j["at"]))
                for j in answer["judgments"]
            ]

    def remove_judgments(self, query: str | None = None, *, doc_id: str | None = None, everything: bool = False) -> int:
        """Delete the judgments of ``query``, of ``doc_id``, of both (that one pair), or all (``everything``).

        Returns:
            How many were deleted.

        Raises:
            BadInputError: Neither ``query`` nor ``doc_id`` given without ``everything``, or either given with it.
        """
        if everything and (query is not None or doc_id is not None):
            raise BadInputError("remove either everything or the judgments of a query and/or an id, not both")
        if not everything and query is None and doc_id is None:
            raise BadInputError("name a query and/or an id whose judgments to remove, or remove everything")
        path = "/judgments?all=true" if everything else "/judgments" + _selection_query(query, doc_id)
        answer = self._call("DELETE", path)
        with self._reading("/judgments"):
            return int(answer["removed"])

    def evaluate(
        self,
        judgments: Iterable[Judgment | dict[str, Any]] | None = None,
        *,
        per_query: bool = False,
        mode: str | None = None,
        fusion: str | None = None,
        alpha: float | None = None,
        feedback: bool | None = None,
    ) -> Evaluation:
        """The collection measured on the server, as ``Collection.evaluate``: on its own judgments, or on
        ``judgments`` (not stored; at most 10,000).

        Args:
            judgments: ``Judgment``\\ s or dicts ``{"query", "id", "grade"}``; default: the collection's own.
            per_query: Also each query's figures.
            mode, fusion, alpha, feedback: The search settings to measure; each left ``None`` is the
                collection's own.

        Raises:
            BadInputError: A bad judgment or setting; no judgments to measure on.
        """
        given = {"mode": mode, "fusion": fusion, "alpha": alpha, "feedback": feedback}
        settings = {name: value for name, value in given.items() if value is not None}
        SearchOptions(**settings)  # checked here, as the server checks them
        body: dict[str, Any] = {"per_query": bool(per_query), **settings}
        if judgments is not None:
            rows = _judgment_rows(judgments)
            if len(rows) > MAX_JUDGMENTS:
                raise BadInputError(
                    f"judgments: at most {MAX_JUDGMENTS:,} can be sent to measure on, got {len(rows):,}"
                )
            body["judgments"] = [_judgment_row(j) for j in rows]
        answer = self._call("POST", "/eval", body, timeout=max(self.timeout, EVAL_TIMEOUT_S))
        with self._reading("/eval"):
            return Evaluation(**{f.name: answer[f.name] for f in fields(Evaluation) if f.name in answer})

    # -- HTTP -------------------------------------------------------------
    def _call(
        self, method: str, path: str, body: Any = None, *, missing_ok: bool = False, timeout: float | None = None
    ) -> Any:
        """One JSON request; ``None`` for a 404 of a document when ``missing_ok``. Errors as the module says.

        ``timeout``: seconds to wait for this answer (default: the collection's ``timeout``).
        """
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        headers = {"Accept": "application/json"} | ({"Content-Type": "application/json"} if data else {})
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with SAME_ORIGIN_OPENER.open(request, timeout=timeout or self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = _detail(exc)
            if exc.code == 404 and missing_ok and detail.startswith("doc_id:"):
                return None
            raise self._error(exc.code, detail, _fields(exc)) from None
        except urllib.error.URLError as exc:
            raise ServerUnreachableError(f"cannot reach the semsearch server at {self.url}: {exc.reason}") from None
        except TimeoutError:
            raise ServerUnreachableError(
                f"the semsearch server at {self.url} did not answer within {timeout or self.timeout:g} s"
            ) from None
        except (http.client.HTTPException, ConnectionError) as exc:
            raise ServerUnreachableError(f"the semsearch server at {self.url} broke off the answer: {exc}") from None
        try:
            return json.loads(raw or b"null")
        except ValueError:
            raise SemsearchError(f"{self.url}{path} did not answer JSON: is it a semsearch server?") from None

    @contextlib.contextmanager
    def _reading(self, path: str) -> Iterator[None]:
        """Turn an answer of ``path`` that lacks the fields read in the block into a ``SemsearchError``."""
        try:
            yield
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise SemsearchError(
                f"{self.url}{path} answered without the fields a semsearch server sends "
                f"({type(exc).__name__}: {printable(str(exc), 80)}): is it a semsearch server?"
            ) from None

    def _error(self, status: int, detail: str, fields_at_fault: list[str]) -> SemsearchError:
        """The semsearch error for an error answer of the server."""
        if status in (401, 403):
            hint = "" if self._api_key or status == 403 else " (pass api_key=...)"
            return AuthenticationError(f"the semsearch server at {self.url} refused the request: {detail}{hint}")
        if status in (400, 409, 413, 422):
            about_where = detail.startswith("where") or any(f.startswith("where") for f in fields_at_fault)
            return (FilterError if about_where else BadInputError)(detail)
        if status == 503:
            return (CollectionLockedError if "lock" in detail.lower() else DeadlineExceededError)(detail)
        if status in (404, 405):
            return SemsearchError(f"{self.url} answered {status} ({detail}): is it a semsearch server?")
        return SemsearchError(f"the semsearch server at {self.url} failed ({status}): {detail}")


def search_body(options: SearchOptions) -> dict[str, Any]:
    """The fields of ``POST /search`` that ``options`` fill: ``k``, ``where``, ``mode``, ``exact``, ``evidence``,
    and ``lang`` when given (the server fuses with its defaults: ``fusion``, ``alpha`` and ``feedback`` have no
    field)."""
    body = {
        "k": options.k,
        "where": options.where,
        "mode": options.mode,
        "exact": options.exact,
        "evidence": options.evidence,
    }
    return body if options.lang is None else body | {"lang": options.lang}


def _document_path(doc_id: str) -> str:
    return "/documents/" + urllib.parse.quote(doc_id, safe="")


def _judgment_rows(judgments: Any) -> list[Judgment]:
    """Every judgment of ``judgments`` checked (``judgments[i]: reason``); a path is refused, naming the way."""
    if isinstance(judgments, (str, bytes, bytearray, os.PathLike, dict, Judgment)) or not hasattr(
        judgments, "__iter__"
    ):
        raise BadInputError(
            f"judgments must be a list of judgments, got {type(judgments).__name__} (a file: read it first with "
            "retriever.judgments.files.read_judgments)"
        )
    rows = []
    for position, record in enumerate(judgments):
        try:
            rows.append(judgment_from(record))
        except BadInputError as exc:
            raise BadInputError(f"judgments[{position}]: {exc}") from None
    return rows


def _judgment_row(judgment: Judgment) -> dict[str, Any]:
    """A judgment as ``POST /judgments`` and ``/eval`` take it (the server sets ``who`` and ``at``)."""
    return {"query": judgment.query, "id": judgment.doc_id, "grade": judgment.grade}


def _judgment_batches(rows: list[Judgment]) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """``(start, rows)`` of at most ``MAX_JUDGMENTS`` judgments and ``MAX_JUDGMENT_CHARS`` characters (one more)."""
    start = 0
    while start < len(rows):
        end, chars = start + 1, len(rows[start].query) + len(rows[start].doc_id)
        while end < len(rows) and end - start < MAX_JUDGMENTS:
            chars += len(rows[end].query) + len(rows[end].doc_id)
            if chars > MAX_JUDGMENT_CHARS:
                break
            end += 1
        yield start, [_judgment_row(j) for j in rows[start:end]]
        start = end


def _selection_query(query: str | None, doc_id: str | None) -> str:
    """``?query=...&id=...`` of those given (nothing when neither is), checked as ``Collection.judgments`` checks.

    Raises:
        BadInputError: ``query`` or ``doc_id`` is given and not a non-empty string.
    """
    selected = {}
    if query is not None:
        selected["query"] = check_query_text(query)
    if doc_id is not None:
        selected["id"] = check_doc_id(doc_id)
    return "?" + urllib.parse.urlencode(selected) if selected else ""


def _detail(exc: urllib.error.HTTPError) -> str:
    """The ``detail`` of an error answer (kept on ``exc`` for ``_fields``), else its HTTP reason."""
    try:
        exc.answer = json.loads(exc.read() or b"null")
    except (ValueError, OSError, http.client.HTTPException):
        exc.answer = None
    detail = exc.answer.get("detail") if isinstance(exc.answer, dict) else None
    return " ".join(str(detail if detail else f"HTTP {exc.code} {exc.reason}").split())


def _fields(exc: urllib.error.HTTPError) -> list[str]:
    """The fields a 422 answer names (``{"errors": [{"field": ...}]}``)."""
    errors = exc.answer.get("errors") if isinstance(getattr(exc, "answer", None), dict) else None
    return [str(e.get("field", "")) for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []


def _vector_rows(vectors: Any, what: str, n: int | None = None, single: bool = False) -> list[list[float]]:
    """Caller-given vectors as unit-norm rows of floats (``single``: one ``(dim,)`` vector); the server checks dim."""
    try:
        array = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"{what} must be numbers: {exc}") from None
    if array.ndim != (1 if single else 2) or array.shape[-1] == 0 or (n is not None and array.shape[0] != n):
        shape = "(dim,)" if single else f"({n}, dim)"
        raise BadInputError(f"{what} must have shape {shape}, got {tuple(array.shape)}")
    rows = array[None, :] if single else array
    return validation.check_vectors(rows, rows.shape[0], rows.shape[1], what).tolist()


def _batches(texts: list[str]) -> Iterator[tuple[int, list[str]]]:
    """``(start, texts)`` of at most ``DEFAULT_BATCH`` texts and ``MAX_REQUEST_CHARS`` characters (one text more)."""
    start = 0
    while start < len(texts):
        end, chars = start + 1, len(texts[start])
        while end < len(texts) and end - start < DEFAULT_BATCH and chars + len(texts[end]) <= MAX_REQUEST_CHARS:
            chars += len(texts[end])
            end += 1
        yield start, texts[start:end]
        start = end


def _hit(found: dict[str, Any]) -> Hit:
    """A ``Hit`` from its JSON shape (``Hit.to_dict``)."""
    evidence = tuple(
        Evidence(
            **{f.name: sentence[f.name] for f in fields(Evidence) if f.name in sentence and f.name != "terms"},
            terms=tuple(TermMatch(**term) for term in sentence.get("terms", ())),
        )
        for sentence in found.get("evidence", ())
    )
    return Hit(
        **{f.name: found[f.name] for f in fields(Hit) if f.name in found and f.name != "evidence"}, evidence=evidence
    )
