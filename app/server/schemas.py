"""Request and response bodies of the HTTP API (pydantic models, shown in the OpenAPI docs).

Requests forbid unknown fields; every limit comes from ``app.server.limits``
and a refused value is a 422 naming its field. The models carry no class
docstrings on purpose: pydantic would publish them as the schemas'
descriptions; fields say what they are with ``description``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from app.server.limits import (
    MAX_DOCUMENTS,
    MAX_EMBED_CHARS,
    MAX_EMBED_TEXTS,
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
    MAX_VECTOR_DIM,
)
from retriever.collection import Collection
from retriever.documents import MAX_ID_CHARS, check_id, check_metadata
from retriever.search.evidence import DEFAULT_EVIDENCE, EVIDENCE_MODES
from retriever.search.fusion import FUSIONS
from retriever.search.languages import check_language
from retriever.search.options import SearchOptions
from retriever.unicode_policy import check_utf8

SearchMode = Literal[Collection.SEARCH_MODES]  # type: ignore[valid-type]  # the modes the retriever has


class Strict(BaseModel):
    """A request body: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")


class SearchRequest(Strict):
    query: str | None = Field(None, min_length=1, max_length=MAX_QUERY_CHARS, description="free text")
    vector: list[float] | None = Field(
        None,
        max_length=MAX_VECTOR_DIM,
        description="a query embedding used instead of embedding `query` (dense, or hybrid with `query`)",
    )
    k: int = Field(10, ge=1, le=MAX_K, description="number of documents to return")
    mode: SearchMode | None = Field(None, description="search mode; default: the collection's default")
    where: dict[str, Any] | None = Field(
        None, description='metadata filter, e.g. {"lang": "en", "year": {"$gte": 2020}}'
    )
    exact: bool = Field(False, description="exact vector search also in approximately indexed segments")
    evidence: Literal[EVIDENCE_MODES] = Field(  # type: ignore[valid-type]
        DEFAULT_EVIDENCE,
        description="which sentences of each hit's chunk come back as its evidence: scored by the query's terms "
        "(`terms`, default), by the model (`semantic`, slower), terms then the model where no term matches "
        "(`auto`), or `none`",
    )
    lang: str | None = Field(
        None,
        max_length=8,
        description="the query's language (ISO 639-1, e.g. `de`): keywords are matched in it, "
        "against documents in it; default: in each language the collection holds",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is None:
            return value
        check_utf8(value, "query")
        if not value.strip():
            raise ValueError("query is blank")
        return value

    @field_validator("lang")
    @classmethod
    def _known_language(cls, value: str | None) -> str | None:
        return value if value is None else check_language(value, "lang")

    @model_validator(mode="after")
    def _query_or_vector(self) -> "SearchRequest":
        if self.query is None and self.vector is None:
            raise ValueError("give a query text, a query vector, or both")
        return self

    def search_options(self) -> SearchOptions:
        """The request's ``SearchOptions`` (``mode`` left out: the retriever's default; the server fuses with
        the retriever's defaults).

        Raises:
            FilterError: ``where`` is not a valid filter. BadInputError: ``lang`` is no language code BM25 analyses.
        """
        fields: dict[str, Any] = {
            "k": self.k,
            "where": self.where,
            "exact": self.exact,
            "evidence": self.evidence,
            "lang": self.lang,
        }
        if self.mode is not None:
            fields["mode"] = self.mode
        return SearchOptions(**fields)


class TermOut(BaseModel):
    term: str = Field(description="a word of the document matching a query term")
    start: int = Field(description="character offset of the word in the document's text")
    end: int


class EvidenceOut(BaseModel):
    text: str = Field(description="a sentence of the chunk that supports the hit")
    start: int = Field(description="character offset of the sentence in the document's text")
    end: int
    score: float = Field(description="BM25 of the query's terms in it (`terms`) or cosine to the query (`semantic`)")
    method: Literal["terms", "semantic"]
    terms: list[TermOut] = Field(description="the query's terms found in the sentence")


class HitOut(BaseModel):
    id: str
    score: float
    title: str
    text: str = Field(description="the best-matching chunk")
    start: int = Field(description="character offset of the chunk in the document's text")
    end: int
    metadata: dict[str, Any] = Field(
        description="the document's metadata, less its `locations` columns (GET /documents/{id} returns them)"
    )
    evidence: list[EvidenceOut] = Field(description="the chunk's best-matching sentences, best first")
    location: dict[str, Any] | None = Field(
        None,
        description="where in its source the chunk starts, the labels of that part: page, slide (ints from 1), "
        "sheet and row, section (the headings above it, outermost first) or message (its place in a mailbox); "
        "null when the document records no structure",
        examples=[{"page": 12}, {"sheet": "Q1", "row": 5}, {"section": ["Intro", "Scope"]}],
    )


class SearchResponse(BaseModel):
    hits: list[HitOut]


class EmbedRequest(Strict):
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


class DocumentIn(Strict):
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="no control characters")
    title: str = Field("", max_length=10_000)
    text: str = Field("", validate_default=True, description="the body; may be empty when the title is not")
    metadata: dict[str, Any] = Field(default_factory=dict)
    vector: list[float] | None = Field(
        None,
        max_length=MAX_VECTOR_DIM,
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
        if info.field_name == "text" and not value.strip() and not str(info.data.get("title", "")).strip():
            raise ValueError("text is empty, and so is the title: give a text, a title or both")
        return value

    @field_validator("metadata")
    @classmethod
    def _plain_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_metadata(value, "metadata")
        return value


class DocumentsRequest(Strict):
    documents: list[DocumentIn] = Field(min_length=1, max_length=MAX_DOCUMENTS)
    upsert: bool = Field(True, description="replace documents whose id exists; false: such ids are a 409")


class WriteResponse(BaseModel):
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    chunks: int


class FileError(BaseModel):
    file: str = Field(description="the uploaded file's name, or NAME (id) for one of its documents")
    reason: str


class FilesResponse(WriteResponse):
    files: int = Field(description="files received")
    errors: list[FileError] = Field(description="files and documents not indexed, each with its reason")


class DocumentOut(BaseModel):
    id: str
    title: str
    text: str
    metadata: dict[str, Any]


class SnapshotRequest(Strict):
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="the snapshot's name under the server's snapshot root (default: the time and a random suffix)",
    )
    dest: str | None = Field(
        default=None, max_length=4096, description="not accepted: the server chooses where snapshots go"
    )


class SnapshotKept(BaseModel):
    name: str
    created: str = Field(description="when it was taken, ISO 8601 UTC")


class SnapshotList(BaseModel):
    snapshots: list[SnapshotKept] = Field(description="oldest first")
    max_kept: int = Field(description="snapshots of the collection this server keeps at most")


class SnapshotResponse(BaseModel):
    name: str = Field(description="the snapshot's name under the server's snapshot root")
    path: str = Field(description="COLLECTION/NAME, relative to the server's snapshot root")
    generation: int = Field(description="the committed generation the snapshot holds")
    documents: int
    segments: int
    linked: int = Field(description="files hard-linked from the collection")
    copied: int = Field(description="files copied (the catalog always)")
    bytes: int
    tries: int = Field(description="attempts: more than one when writers removed files meanwhile")
    seconds: float


MAX_JUDGMENTS = 10_000  # judgments in one POST /judgments or /eval request


class JudgmentIn(Strict):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the query text as a user would type it")
    id: str = Field(min_length=1, max_length=MAX_ID_CHARS, description="a document id of the collection")
    grade: int = Field(
        1, ge=0, le=3, strict=True, description="0: does not answer the query; 1, 2, 3: answers it (higher: better)"
    )

    @field_validator("query", "id")
    @classmethod
    def _utf8_text(cls, value: str, info: ValidationInfo) -> str:
        check_utf8(value, info.field_name or "query")
        if not value.strip():
            raise ValueError(f"{info.field_name} is blank")
        return value


def at_most_judgments(value: Any) -> Any:
    """``value`` unless it is a list of more than ``MAX_JUDGMENTS`` (checked before any item is)."""
    if isinstance(value, list) and len(value) > MAX_JUDGMENTS:
        raise ValueError(
            f"at most {MAX_JUDGMENTS:,} judgments a request, got {len(value):,}: send them in several requests"
        )
    return value


class JudgmentsRequest(Strict):
    judgments: list[JudgmentIn] = Field(
        min_length=1, description=f"at most {MAX_JUDGMENTS:,} a request; a (query, id) judged before is replaced"
    )
    dry_run: bool = Field(False, description="check and report only; store nothing")

    _at_most = field_validator("judgments", mode="before")(at_most_judgments)


class JudgmentOut(BaseModel):
    query: str
    id: str
    grade: int
    who: str = Field(description="who judged: the name of the API key that sent it, `anonymous` without keys")
    at: float = Field(description="when, Unix seconds")


class JudgmentList(BaseModel):
    judgments: list[JudgmentOut] = Field(description="newest first")


class EvalRequest(Strict):
    judgments: list[JudgmentIn] | None = Field(
        None,
        min_length=1,
        description=f"measure on these instead of the collection's own judgments (not stored; at most "
        f"{MAX_JUDGMENTS:,})",
    )
    mode: SearchMode | None = Field(None, description="search mode; default: the collection's default")
    fusion: Literal[FUSIONS] | None = Field(  # type: ignore[valid-type]
        None, description="hybrid fusion; default: the collection's own setting"
    )
    alpha: float | None = Field(
        None, ge=0.0, le=1.0, description="dense weight of convex fusion; default: the collection's own"
    )
    feedback: bool | None = Field(
        None, description="pseudo-relevance feedback in hybrid mode; default: the collection's own"
    )
    per_query: bool = Field(False, description="also each query's figures, under `per_query`")

    _at_most = field_validator("judgments", mode="before")(at_most_judgments)

    def search_fields(self) -> dict[str, Any]:
        """The search settings given (``mode``, ``fusion``, ``alpha``, ``feedback``); the others stay the
        collection's own."""
        given = {"mode": self.mode, "fusion": self.fusion, "alpha": self.alpha, "feedback": self.feedback}
        return {name: value for name, value in given.items() if value is not None}


class UnknownJudgment(BaseModel):
    line: int = Field(description="the judgment's position in the request's list, from 0")
    id: str = Field(description="a document id the collection does not hold")


class JudgmentsReport(BaseModel):
    stored: int = Field(description="new judgments")
    replaced: int = Field(description="(query, id) pairs judged before: grade, who and time replaced")
    unknown: list[UnknownJudgment] = Field(description="judgments naming no document of the collection: not stored")
    queries: int = Field(description="distinct queries among the stored and replaced")
    dry_run: bool


class EvaluationOut(BaseModel):
    metrics: dict[str, float] = Field(description='"ndcg@10", "mrr@10", "recall@100", "map@100", means over queries')
    queries: int = Field(description="the queries measured: those with a document judged to answer them")
    judgments: int = Field(description="the judgments of those queries (grade 0 included)")
    settings: dict[str, Any] = Field(
        description="how the collection was searched: mode, fusion, alpha, feedback, model"
    )
    per_query: dict[str, dict[str, Any]] | None = Field(
        None, description="with per_query: {query key: {query, metric: value, ...}}"
    )
    unanswered: int = Field(0, description="judged queries left out: no judgment of theirs has a grade above 0")
