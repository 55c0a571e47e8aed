"""Give documents written before list values were indexed their filter rows, in place (``semsearch upgrade``).

A catalog written before lists were indexed (``metadata_index.FIELDS_FORMAT``
1: no format row) has rows for its documents' scalar metadata only. Until the
upgrade, a filter on a list field does not match those documents (their
negations do), and a ``locations`` object of the caller's own still matches
as it did; documents written since, by a newer semsearch, have all their rows.

``index_list_fields`` rebuilds the rows of every document whose rows differ
from what ``metadata_index.field_rows`` gives now (looked for only among
documents whose metadata's JSON holds ``[`` or ``"locations"``), a batch of
documents per transaction, then writes the format row: the step runs once. A
run killed part way leaves the documents it rebuilt whole, and the next run
rebuilds the rest. It runs under the writer's lock, so no commit changes a
document while its rows are rebuilt. ``stale_documents`` counts what a run
would rebuild, for ``semsearch check``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from sqlalchemy import Text, cast, delete, insert, or_, select
from tqdm import tqdm

from retriever.storage.catalog import Catalog, documents, fields
from retriever.storage.cleanup import writer_lock_held
from retriever.storage.metadata_index import FIELDS_FORMAT, field_rows, format_query, format_row

_BATCH = 500  # documents per transaction (and per IN (...) clause)


def fields_format(catalog: Catalog) -> int:
    """The version of the indexing rules ``catalog``'s rows were written by (1 where no row records one)."""
    with catalog.engine.connect() as conn:
        found = conn.execute(format_query(fields)).scalar()
    return 1 if found is None else int(found)


def stale_documents(catalog: Catalog) -> int:
    """How many documents' rows ``index_list_fields`` would rebuild (0 once the format row is written)."""
    if fields_format(catalog) >= FIELDS_FORMAT:
        return 0
    with catalog.engine.connect() as conn:
        keys = _candidates(conn)
        return sum(len(_stale(conn, part)) for part in _batches(keys))


def index_list_fields(root: Path, catalog: Catalog, progress: bool = True, lock_timeout: float = 10.0) -> int:
    """Rebuild the rows of documents written before lists were indexed, and record the format.

    Args:
        root: The collection's directory (its writer's lock is taken).
        catalog: Its open catalog.

    Returns:
        How many documents' rows were rebuilt (0 when the format row was there already).

    Raises:
        CollectionLockedError: Another process held the writer's lock for ``lock_timeout`` seconds.
    """
    with writer_lock_held(root, lock_timeout):
        if fields_format(catalog) >= FIELDS_FORMAT:
            return 0
        with catalog.engine.connect() as conn:
            keys = _candidates(conn)
        rebuilt = 0
        with tqdm(total=len(keys), unit="doc", desc="list fields", disable=not progress or not keys) as bar:
            for part in _batches(keys):
                with catalog.engine.begin() as conn:
                    rebuilt += _rebuild(conn, part)
                bar.update(len(part))
        with catalog.engine.begin() as conn:
            conn.execute(insert(fields).values(**format_row()))
        return rebuilt


def _candidates(conn: Any) -> list[int]:
    """Keys of documents whose metadata may have rows of another format: its JSON holds a list or ``locations``."""
    meta = cast(documents.c.meta, Text)
    query = select(documents.c.key).where(
        or_(meta.contains("[", autoescape=True), meta.contains('"locations"', autoescape=True))
    )
    return sorted(conn.execute(query).scalars())


def _batches(keys: Sequence[int]) -> list[Sequence[int]]:
    return [keys[i : i + _BATCH] for i in range(0, len(keys), _BATCH)]


def _stale(conn: Any, keys: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    """``{key: the rows it should have}`` for the documents of ``keys`` whose rows are other than those."""
    held: dict[int, set] = {}
    columns = (fields.c.key, fields.c.field, fields.c.kind, fields.c.num, fields.c.str)
    for key, *row in conn.execute(select(*columns).where(fields.c.key.in_(list(keys)))):
        held.setdefault(key, set()).add(tuple(row))
    stale = {}
    for key, meta in conn.execute(select(documents.c.key, documents.c.meta).where(documents.c.key.in_(list(keys)))):
        rows = field_rows(key, dict(meta or {}))
        if {(r["field"], r["kind"], r["num"], r["str"]) for r in rows} != held.get(key, set()):
            stale[key] = rows
    return stale


def _rebuild(conn: Any, keys: Sequence[int]) -> int:
    """Replace the rows of the stale documents among ``keys``; returns how many there were."""
    stale = _stale(conn, keys)
    if stale:
        conn.execute(delete(fields).where(fields.c.key.in_(list(stale))))
        rows = [row for rows in stale.values() for row in rows]
        if rows:
            conn.execute(insert(fields), rows)
    return len(stale)
