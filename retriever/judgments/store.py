"""Judgments kept in a collection's catalog: the ``semsearch_judgments`` table (``retriever.storage.catalog``).

One row per (query, document id): ``query_key`` (``records.query_key``), the
query text, the id, the grade, who and when. Writes are plain transactions
outside the generations (no write lock; the last write of a (query, id) wins)
and create the table first when the catalog predates it; reads of such a
catalog find no judgments. Rows stay when their documents are deleted (a
re-added document finds them again); ``dangling_count`` counts those.
"""

from __future__ import annotations

import time
from typing import Iterator, Sequence

from sqlalchemy import bindparam, delete, exists, func, insert, inspect, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from retriever.errors import CorruptCollectionError
from retriever.judgments.records import JudgedSet, Judgment, query_key
from retriever.storage.catalog import Catalog, documents, judgments

_BATCH = 500  # values per IN (...) clause
_WRITE_TRIES = 3  # a concurrent writer inserting the same (query, id) first makes a try fail; the next replaces it
_DROP_ONE = delete(judgments).where(judgments.c.query_key == bindparam("key"), judgments.c.doc_id == bindparam("doc"))


def has_table(catalog: Catalog) -> bool:
    """Whether the catalog has the judgments table (catalogs made before judgments do not)."""
    return inspect(catalog.engine).has_table(judgments.name)


def ensure_table(catalog: Catalog) -> None:
    """Create the judgments table where the catalog lacks it."""
    judgments.create(catalog.engine, checkfirst=True)


def write_judgments(catalog: Catalog, items: Sequence[Judgment]) -> tuple[int, int]:
    """Store ``items`` (checked already) in one transaction; a judgment of a (query, id) replaces the one before.

    A judgment whose ``at`` is 0 gets the current time. Of two items for the same (query, id) the later wins.

    Returns:
        ``(stored, replaced)``: new (query, id) pairs, and pairs that had a judgment already.
    """
    now = time.time()
    rows: dict[tuple[str, str], dict] = {}
    for item in items:
        key = query_key(item.query)
        rows[(key, item.doc_id)] = {
            "query_key": key,
            "query": item.query,
            "doc_id": item.doc_id,
            "grade": item.grade,
            "who": item.who,
            "at": item.at or now,
        }
    if not rows:
        return 0, 0
    ensure_table(catalog)
    for attempt in range(_WRITE_TRIES):
        try:
            with catalog.engine.begin() as conn:
                existing = _existing_pairs(conn, list(rows))
                if existing:
                    conn.execute(_DROP_ONE, [{"key": key, "doc": doc} for key, doc in existing])
                for part in _chunked(list(rows.values())):
                    conn.execute(insert(judgments), list(part))
            return len(rows) - len(existing), len(existing)
        except IntegrityError:
            if attempt == _WRITE_TRIES - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def preview_judgments(catalog: Catalog, items: Sequence[Judgment]) -> tuple[int, int]:
    """What ``write_judgments`` of ``items`` would report, ``(stored, replaced)``, writing nothing."""
    pairs = list(dict.fromkeys((query_key(item.query), item.doc_id) for item in items))
    if not pairs or not has_table(catalog):
        return len(pairs), 0
    with catalog.engine.connect() as conn:
        existing = len(_existing_pairs(conn, pairs))
    return len(pairs) - existing, existing


def list_judgments(catalog: Catalog, query: str | None = None, doc_id: str | None = None) -> list[Judgment]:
    """The stored judgments, newest first (then by query and id); only those of ``query`` and/or ``doc_id`` when
    given (``query`` matched by its ``query_key``, so surrounding whitespace does not matter)."""
    statement = select(judgments).where(*_conditions(query, doc_id))
    statement = statement.order_by(judgments.c.at.desc(), judgments.c.query, judgments.c.doc_id)
    return [
        Judgment(row.query, row.doc_id, int(row.grade), row.who or "", float(row.at))
        for row in _read(catalog, statement)
    ]


def judged_set(catalog: Catalog) -> JudgedSet:
    """Every stored judgment as a ``JudgedSet`` (queries by key, qrels by key then id)."""
    statement = select(judgments.c.query_key, judgments.c.query, judgments.c.doc_id, judgments.c.grade)
    judged = JudgedSet()
    for key, text, doc_id, grade in _read(catalog, statement.order_by(judgments.c.query_key, judgments.c.doc_id)):
        judged.queries.setdefault(key, text)
        judged.qrels.setdefault(key, {})[doc_id] = int(grade)
    return judged


def remove_judgments(
    catalog: Catalog, query: str | None = None, doc_id: str | None = None, everything: bool = False
) -> int:
    """Delete the judgments of ``query`` and/or ``doc_id`` (both: that one pair), or all with ``everything``.

    Returns:
        How many were deleted (0 where the catalog has no judgments table).
    """
    conditions = [] if everything else _conditions(query, doc_id)
    if not everything and not conditions:
        raise ValueError("name a query, an id, or everything")
    if not has_table(catalog):
        return 0
    with catalog.engine.begin() as conn:
        return int(conn.execute(delete(judgments).where(*conditions)).rowcount or 0)


def count_judgments(catalog: Catalog) -> tuple[int, int]:
    """``(judgments, distinct queries)``."""
    statement = select(func.count(), func.count(func.distinct(judgments.c.query_key)))
    found = list(_read(catalog, statement))
    return (int(found[0][0]), int(found[0][1])) if found else (0, 0)


def dangling_count(catalog: Catalog) -> int:
    """How many judgments name a document the catalog no longer holds."""
    held = exists().where(documents.c.id == judgments.c.doc_id)
    found = list(_read(catalog, select(func.count()).select_from(judgments).where(~held)))
    return int(found[0][0]) if found else 0


def _conditions(query: str | None, doc_id: str | None) -> list:
    conditions = []
    if query is not None:
        conditions.append(judgments.c.query_key == query_key(query))
    if doc_id is not None:
        conditions.append(judgments.c.doc_id == doc_id)
    return conditions


def _read(catalog: Catalog, statement) -> list:
    """The rows of ``statement``; none where the catalog has no judgments table.

    Raises:
        CorruptCollectionError: The catalog cannot be read.
    """
    try:
        with catalog.engine.connect() as conn:
            return list(conn.execute(statement))
    except SQLAlchemyError as exc:
        if not has_table(catalog):
            return []
        raise CorruptCollectionError(
            f"cannot read the judgments of catalog {catalog.safe_url()}: {getattr(exc, 'orig', None) or exc}"
        ) from None


def _existing_pairs(conn: Connection, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Those of ``pairs`` (query key, doc id) that have a row."""
    wanted = set(pairs)
    found = []
    for part in _chunked(sorted({key for key, _ in pairs})):
        statement = select(judgments.c.query_key, judgments.c.doc_id).where(judgments.c.query_key.in_(part))
        found += [(key, doc) for key, doc in conn.execute(statement) if (key, doc) in wanted]
    return found


def _chunked(items: Sequence, size: int = _BATCH) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
