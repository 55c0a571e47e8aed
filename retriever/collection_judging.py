"""``Collection``'s judgment verbs: store, list and remove which documents answer which queries.

``JudgingVerbs`` is mixed into ``retriever.collection.Collection``; it uses the
collection's ``root`` and ``catalog``, and ``retriever.judgments.store`` does the work.
Judgments live in the catalog beside the documents, outside the generations:
storing one takes no write lock and changes no generation.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Union

from retriever.errors import BadInputError
from retriever.judgments import store
from retriever.judgments.files import read_numbered_judgments
from retriever.judgments.records import (
    DEFAULT_GRADE,
    JudgedSet,
    Judgment,
    JudgmentImport,
    check_doc_id,
    check_query_text,
    check_who,
    judgment_from,
    make_judgment,
    query_key,
)
from retriever.storage.faults import file_system_faults

JudgmentSource = Union[str, os.PathLike, Iterable[Union[Judgment, dict[str, Any]]]]  # a file, or records


class JudgingVerbs:
    """``judge``, ``import_judgments``, ``judgments``, ``remove_judgments``, ``judged`` and ``judgment_count``."""

    def judge(self, query: str, doc_id: str, grade: int = DEFAULT_GRADE, *, who: str = "") -> Judgment:
        """Store one judgment: document ``doc_id`` answers ``query`` (grade 1..3) or does not (grade 0).

        A judgment of the same query (surrounding whitespace aside) and document replaces the one before.

        Args:
            query: The query text (non-empty, at most 2,000 characters; stored stripped).
            doc_id: A document of the collection.
            grade: 0 (does not answer), 1 (answers; default), 2 or 3 (answers better).
            who: Who judged (default empty).

        Returns:
            The stored ``Judgment``, its ``at`` the time it was stored.

        Raises:
            BadInputError: A bad query, grade or who; the collection holds no document ``doc_id``.
            StorageFaultError: The disk is full or read-only.
        """
        judgment = make_judgment(query, doc_id, grade, who)
        if not self.catalog.lookup([judgment.doc_id]):
            raise BadInputError(f"the collection holds no document {judgment.doc_id!r}")
        with file_system_faults(self.root, "storing a judgment"):
            store.write_judgments(self.catalog, [judgment])
        stored = store.list_judgments(self.catalog, judgment.query, judgment.doc_id)
        return stored[0] if stored else judgment

    def import_judgments(
        self, source: JudgmentSource, *, queries: Any = None, who: str = "", dry_run: bool = False
    ) -> JudgmentImport:
        """Store many judgments, from a file or from records; all are checked before any is stored.

        Args:
            source: A JSON Lines file (``{"query", "id", "grade"}`` a line, grade optional: 1), a BEIR qrels
                TSV (``query-id<TAB>corpus-id<TAB>score``, with ``queries``), or an iterable of ``Judgment``
                or dicts ``{"query", "id", "grade"}`` (see ``retriever.judgments.files``).
            queries: For a qrels TSV: its BEIR ``queries.jsonl`` (or ``{query id: text}``).
            who: Who judged, for judgments that do not say (default empty).
            dry_run: Check and count only; store nothing.

        Returns:
            The ``JudgmentImport``: stored, replaced, the judgments naming no document here (by file line, or by
            0-based position in a list: not stored), distinct queries.

        Raises:
            BadInputError: A bad row (``FILE:LINE: reason`` or ``judgments[i]: reason``), an unreadable file, a
                TSV without ``queries``: nothing is stored.
            StorageFaultError: The disk is full or read-only.
        """
        rows = _numbered(source, queries, check_who(who))
        held = set(self.catalog.lookup(sorted({j.doc_id for _, j in rows})))
        kept = [j for _, j in rows if j.doc_id in held]
        report = JudgmentImport(
            unknown=[(number, j.doc_id) for number, j in rows if j.doc_id not in held],
            queries=len({query_key(j.query) for j in kept}),
            dry_run=dry_run,
        )
        if dry_run:
            report.stored, report.replaced = store.preview_judgments(self.catalog, kept)
        elif kept:
            with file_system_faults(self.root, "storing judgments"):
                report.stored, report.replaced = store.write_judgments(self.catalog, kept)
        return report

    def judgments(self, query: str | None = None, *, doc_id: str | None = None) -> list[Judgment]:
        """The stored judgments, newest first; only those of ``query`` and/or ``doc_id`` when given.

        Raises:
            BadInputError: ``query`` or ``doc_id`` is not a non-empty string.
        """
        query, doc_id = _selection(query, doc_id)
        return store.list_judgments(self.catalog, query, doc_id)

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
        query, doc_id = _selection(query, doc_id)
        with file_system_faults(self.root, "removing judgments"):
            return store.remove_judgments(self.catalog, query, doc_id, everything)

    def judged(self) -> JudgedSet:
        """Every stored judgment as a ``JudgedSet`` (``queries`` and trec_eval ``qrels`` by query key)."""
        return store.judged_set(self.catalog)

    def judgment_count(self) -> tuple[int, int]:
        """``(judgments, distinct queries)`` stored."""
        return store.count_judgments(self.catalog)


def _selection(query: Any, doc_id: Any) -> tuple[str | None, str | None]:
    return (None if query is None else check_query_text(query), None if doc_id is None else check_doc_id(doc_id))


def _numbered(source: Any, queries: Any, who: str) -> list[tuple[int, Judgment]]:
    """``(line or 0-based position, checked judgment)`` of each judgment of ``source``."""
    if isinstance(source, (str, os.PathLike)):
        return read_numbered_judgments(source, queries, who)
    if isinstance(source, (bytes, bytearray, dict, Judgment)) or not hasattr(source, "__iter__"):
        raise BadInputError(f"judgments must be a file path or a list of judgments, got {type(source).__name__}")
    if queries is not None:
        raise BadInputError("queries names the query texts of a qrels file; a list of judgments holds its own")
    rows = []
    for position, record in enumerate(source):
        try:
            rows.append((position, judgment_from(record, who)))
        except BadInputError as exc:
            raise BadInputError(f"judgments[{position}]: {exc}") from None
    return rows
