"""The records that flow through semsearch: documents in, hits out.

Rules every write path enforces (``coerce_document``):

- ids: 1 to ``MAX_ID_CHARS`` (1,024) characters, not blank, no control
  characters (newline, tab, NUL, DEL, C1), encodable as UTF-8;
- title, text, metadata keys and string values: encodable as UTF-8; text or
  title not blank (a document of a title alone is indexed by its title);
- metadata: a JSON object with string keys, nested at most ``MAX_METADATA_DEPTH``
  (32) levels, whose numbers are finite and integers fit in 64 bits;
- ``metadata["locations"]``, where it is a mapping with a ``"start"`` key, must
  be location columns (``retriever.locations``); any other value under that key
  is the caller's own field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from retriever.errors import BadInputError
from retriever.locations import check_document_locations
from retriever.unicode_policy import check_utf8, has_control, printable

MAX_ID_CHARS = 1_024  # the catalog's id column holds this many characters
MAX_METADATA_DEPTH = 32
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class Document:
    """One document as the caller gives it.

    Attributes:
        id: The caller's stable id (loaders derive it from the file path).
        text: The full text; never truncated, long text is chunked.
        title: Optional title, embedded with each chunk and shown in hits.
        metadata: JSON-serialisable fields that filters can match.
    """

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def content_hash(self) -> str:
        """SHA-256 over id, title, text and metadata; equal hashes mean no work."""
        payload = json.dumps(
            [self.id, self.title, self.text, self.metadata], sort_keys=True, ensure_ascii=False, default=str
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def text_hash(self) -> str:
        """SHA-256 over title and text: what the vectors and index terms depend on."""
        payload = json.dumps([self.title, self.text], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TermMatch:
    """A word of the document that matches a query term (same stem, as BM25 sees it).

    Attributes:
        term: The word as written in the document.
        start: Character offset of the word in the document text.
        end: Offset one past its end.
    """

    term: str
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return {"term": self.term, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Evidence:
    """A sentence of a hit's passage that supports it, best first in ``Hit.evidence``.

    Attributes:
        text: The sentence.
        start: Character offset of the sentence in the document text.
        end: Offset one past its end.
        score: How well it matches: BM25 of the query's terms within the
            sentence (``method == "terms"``) or its cosine to the query
            (``method == "semantic"``).
        method: ``"terms"`` or ``"semantic"``.
        terms: The query's terms found in the sentence, in order.
    """

    text: str
    start: int
    end: int
    score: float
    method: str
    terms: tuple[TermMatch, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "score": self.score,
            "method": self.method,
            "terms": [term.to_dict() for term in self.terms],
        }


@dataclass(frozen=True)
class Hit:
    """One search result: a document, shown through its best-matching chunk.

    Attributes:
        id: Document id.
        score: Similarity of the best chunk (cosine, in [-1, 1] for dense search).
        title: Document title.
        text: Text of the best-matching chunk.
        start: Character offset of that chunk in the document text.
        end: Character offset one past the chunk's end.
        metadata: The document's metadata, less its ``"locations"`` columns
            (``retriever.locations.without_locations``: they are the
            document's structure, not a field to show; ``Collection.get(id)``
            still returns the whole metadata, columns included).
        evidence: The chunk's sentences that match the query best, best
            first, with the query's terms in them (empty when none match, or
            when the search asked for none).
        location: Where in its source the chunk starts: the labels of that
            part of the document (``retriever.locations.location_at``), e.g.
            ``{"page": 12}``, ``{"slide": 3}``, ``{"sheet": "Q1", "row": 5}``,
            ``{"section": ["Intro", "Scope"]}`` or ``{"message": 17}``;
            ``None`` when the document records no structure.
    """

    id: str
    score: float
    title: str
    text: str
    start: int
    end: int
    metadata: dict[str, Any]
    evidence: tuple[Evidence, ...] = ()
    location: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by ``semsearch search --json`` and the HTTP API."""
        return {
            "id": self.id,
            "score": self.score,
            "title": self.title,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "metadata": self.metadata,
            "evidence": [sentence.to_dict() for sentence in self.evidence],
            "location": self.location,
        }


def coerce_document(item: Document | dict[str, Any]) -> Document:
    """Accept a ``Document`` or a mapping with ``id``, ``text``, ``title``, ``metadata``.

    Raises:
        BadInputError: when a field breaks the rules in the module docstring
            (id, text and title types, UTF-8, id characters, metadata shape).
    """
    if isinstance(item, Document):
        doc = item
    elif isinstance(item, dict):
        unknown = set(item) - {"id", "text", "title", "metadata"}
        if unknown:
            raise BadInputError(
                f"document {printable(repr(item.get('id')))}: unknown field(s) {sorted(map(repr, unknown))}; "
                "put extra fields under 'metadata'"
            )
        doc = Document(
            id=item.get("id"),  # type: ignore[arg-type]
            text=item.get("text", ""),  # type: ignore[arg-type]  (absent: a document of a title alone)
            title=item.get("title") or "",
            metadata=_copy_metadata(item.get("metadata")),
        )
    else:
        raise BadInputError(f"expected a Document or a dict, got {type(item).__name__}")
    check_id(doc.id)
    name = f"document {printable(doc.id)}"
    if not isinstance(doc.text, str):
        raise BadInputError(f"{name}: text must be a string, got {type(doc.text).__name__}")
    check_utf8(doc.text, f"{name}: text")
    if not isinstance(doc.title, str):
        raise BadInputError(f"{name}: title must be a string")
    check_utf8(doc.title, f"{name}: title")
    if not doc.text.strip() and not doc.title.strip():  # a title alone is enough: the document is found by it
        raise BadInputError(f"{name}: text is empty")
    check_metadata(doc.metadata, f"{name}: metadata")
    check_document_locations(doc.metadata, f"{name}: metadata.locations")
    return doc


def check_metadata(metadata: Any, where: str = "metadata") -> None:
    """Raise ``BadInputError`` naming ``where`` unless ``metadata`` is a plain JSON object."""
    if not isinstance(metadata, dict):
        raise BadInputError(f"{where} must be a mapping")
    _check_json(metadata, where, 0)


def check_id(doc_id: Any, what: str = "document id") -> None:
    """Raise ``BadInputError`` unless ``doc_id`` follows the id rules (see the module docstring)."""
    if not isinstance(doc_id, str):
        raise BadInputError(f"{what} must be a string, got {type(doc_id).__name__}")
    check_utf8(doc_id, what)
    if not doc_id.strip():
        raise BadInputError(f"{what} must be a non-empty string, got {doc_id!r}")
    if len(doc_id) > MAX_ID_CHARS:
        raise BadInputError(f"{what} has {len(doc_id):,} characters; the limit is {MAX_ID_CHARS:,}")
    if has_control(doc_id):
        raise BadInputError(f"{what} {printable(doc_id)} holds a control character (newline, tab, NUL...)")


def _check_json(value: Any, where: str, depth: int) -> None:
    """Metadata must be plain JSON: string keys, UTF-8 text, finite numbers, 64-bit integers."""
    if depth > MAX_METADATA_DEPTH:
        raise BadInputError(f"{where}: nested more than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, str):
        check_utf8(value, where)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise BadInputError(f"{where}: integer out of the 64-bit range")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise BadInputError(f"{where}: number must be finite, got {value!r}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise BadInputError(f"{where}: keys must be strings, got {type(key).__name__} {printable(repr(key))}")
            check_utf8(key, f"{where}: key")
            shown = key if key.isprintable() and len(key) <= 40 else printable(key, 40)
            _check_json(item, f"{where}.{shown}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]", depth + 1)
    else:
        raise BadInputError(f"{where}: {type(value).__name__} is not JSON-serialisable")


def _copy_metadata(meta: Any) -> Any:
    """A copy of a mapping; anything else is passed through for the type check."""
    if meta is None:
        return {}
    return dict(meta) if isinstance(meta, dict) else meta
