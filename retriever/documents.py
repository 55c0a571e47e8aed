"""The records that flow through semsearch: documents in, hits out."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


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
            [self.id, self.title, self.text, self.metadata],
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def text_hash(self) -> str:
        """SHA-256 over title and text: what the vectors and index terms depend on."""
        payload = json.dumps([self.title, self.text], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


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
        metadata: The document's metadata.
    """

    id: str
    score: float
    title: str
    text: str
    start: int
    end: int
    metadata: dict[str, Any]

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
        }


def coerce_document(item: Document | dict[str, Any]) -> Document:
    """Accept a ``Document`` or a mapping with ``id``, ``text``, ``title``, ``metadata``.

    Raises:
        BadInputError: when the id or text is missing, empty or not a string.
    """
    from retriever.errors import BadInputError

    if isinstance(item, Document):
        doc = item
    elif isinstance(item, dict):
        unknown = set(item) - {"id", "text", "title", "metadata"}
        if unknown:
            raise BadInputError(
                f"document {item.get('id')!r}: unknown field(s) {sorted(unknown)}; "
                "put extra fields under 'metadata'"
            )
        doc = Document(
            id=item.get("id"),  # type: ignore[arg-type]
            text=item.get("text"),  # type: ignore[arg-type]
            title=item.get("title") or "",
            metadata=_copy_metadata(item.get("metadata")),
        )
    else:
        raise BadInputError(f"expected a Document or a dict, got {type(item).__name__}")
    if not isinstance(doc.id, str) or not doc.id.strip():
        raise BadInputError(f"document id must be a non-empty string, got {doc.id!r}")
    if not isinstance(doc.text, str):
        raise BadInputError(f"document {doc.id!r}: text must be a string, got {type(doc.text).__name__}")
    if not doc.text.strip():
        raise BadInputError(f"document {doc.id!r}: text is empty")
    if not isinstance(doc.title, str):
        raise BadInputError(f"document {doc.id!r}: title must be a string")
    if not isinstance(doc.metadata, dict):
        raise BadInputError(f"document {doc.id!r}: metadata must be a mapping")
    try:
        json.dumps(doc.metadata, allow_nan=False)  # NaN/Infinity would be malformed JSON in the catalog
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"document {doc.id!r}: metadata is not JSON-serialisable ({exc})") from None
    return doc


def _copy_metadata(meta: Any) -> Any:
    """A copy of a mapping; anything else is passed through for the type check."""
    if meta is None:
        return {}
    return dict(meta) if isinstance(meta, dict) else meta
