"""What a write does to each document, decided against the catalog.

``classify`` compares documents with their stored rows (content hash: text,
title and metadata; text hash: text and title) before anything is embedded;
``WriteReport`` says afterwards what happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

from retriever.documents import Document
from retriever.storage.catalog import StoredDocument

Change = Literal["unchanged", "metadata", "text"]


@dataclass
class WriteReport:
    """What one write did.

    Attributes:
        added: Ids that were new.
        updated: Ids whose content changed and were replaced.
        unchanged: Ids whose content hash matched; no work was done.
        deleted: Ids removed.
        chunks: Chunks embedded and written.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    chunks: int = 0

    def merge(self, other: "WriteReport") -> None:
        """Add ``other``'s ids and chunks to this report."""
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.chunks += other.chunks

    @classmethod
    def of(cls, ids: Sequence[str], kinds: dict[str, str], chunks: int) -> "WriteReport":
        """A report in the order of ``ids``; ``kinds`` maps an id to ``"added"``, ``"updated"`` or ``"unchanged"``."""
        report = cls(chunks=chunks)
        for doc_id in ids:
            getattr(report, kinds.get(doc_id, "unchanged")).append(doc_id)
        return report


def classify(docs: Sequence[Document], stored: dict[str, StoredDocument]) -> list[tuple[Document, Change]]:
    """Each document with what a write must do.

    Returns:
        ``(document, change)`` in order: ``"unchanged"`` (content stored
        already), ``"metadata"`` (same text and title: a catalog update only)
        or ``"text"`` (new, or its text changed: chunk and embed it).
    """
    plan: list[tuple[Document, Change]] = []
    for doc in docs:
        row = stored.get(doc.id)
        if row is not None and row.content_hash == doc.content_hash():
            plan.append((doc, "unchanged"))
        elif row is not None and row.text_hash == doc.text_hash():
            plan.append((doc, "metadata"))
        else:
            plan.append((doc, "text"))
    return plan
