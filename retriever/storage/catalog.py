"""The SQL side of a collection: documents' display fields and the committed generation.

SQLAlchemy Core over SQLite (a file inside the collection, WAL mode, full
fsync) or any other SQLAlchemy URL. The catalog holds what filters and hits
need (id, key, title, metadata, hashes), not the text, so a filter scans
small rows. Each document version has a ``key``: the segments store keys,
never ids, so merging segments changes no row here. ``semsearch_fields``
holds each document's metadata as indexed rows that filters are answered
from, written in the same transaction as its document row
(``retriever.storage.metadata_index``).

``semsearch_judgments`` holds the collection's judgments (``retriever.judgments.store``).

``semsearch_state`` holds the committed generation: its number, the ordered
list of segments with the generation of each one's deletion file, and the
counters for new keys and segment names. A writer publishes a generation in
one transaction that also changes the document rows.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from retriever.errors import BadInputError, CorruptCollectionError, SemsearchError
from retriever.storage.catalog_url import redact, with_password
from retriever.storage.metadata_index import FilterPlan, field_rows, fields_table, format_row
from retriever.storage.segment_files import parse_segments

_BATCH = 500  # ids per IN (...) clause

metadata_obj = MetaData()

documents = Table(
    "semsearch_documents",
    metadata_obj,
    Column("id", String(1024), primary_key=True),
    Column("key", BigInteger, nullable=False, unique=True),
    Column("title", Text, nullable=False, default=""),
    Column("meta", JSON, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("text_hash", String(64), nullable=False),
    Column("n_chunks", Integer, nullable=False),
    Column("updated_at", Float, nullable=False),
)

fields = fields_table(metadata_obj)

# built once: a search's display-field read is on the query path
_BY_KEYS_SQL = (  # the columns in StoredDocument's order; names quoted for every SQL dialect
    'SELECT "id", "key", "title", "meta", "content_hash", "text_hash", "n_chunks" '
    f'FROM {documents.name} WHERE "key" IN ({{keys}})'
)
_BY_IDS = select(documents).where(documents.c.id.in_(bindparam("ids", expanding=True)))
_SET_METADATA = (
    update(documents)
    .where(documents.c.id == bindparam("doc_id"))
    .values(meta=bindparam("new_meta", type_=JSON), content_hash=bindparam("new_hash"))
)  # executemany: one row each
_DROP_FIELDS = delete(fields).where(fields.c.key == bindparam("doc_key"))

# Judgments (retriever.judgments.store): which documents answer which queries. Not part of a generation:
# written in plain transactions, kept when their documents go. Catalogs made before them lack the table.
judgments = Table(
    "semsearch_judgments",
    metadata_obj,
    Column("query_key", String(17), primary_key=True),
    Column("query", Text, nullable=False),
    Column("doc_id", String(1024), primary_key=True),
    Column("grade", Integer, nullable=False),
    Column("who", String(256), nullable=False, default=""),
    Column("at", Float, nullable=False),
)

state = Table(
    "semsearch_state",
    metadata_obj,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("collection_uuid", String(36), nullable=False),
    Column("generation", BigInteger, nullable=False),
    Column("segments", Text, nullable=False),
    Column("next_key", BigInteger, nullable=False),
    Column("next_segment", BigInteger, nullable=False),
    Column("updated_at", Float, nullable=False),
)


@dataclass(frozen=True)
class SegmentRef:
    """A segment of a generation: its folder name and the generation of its deletion file (0: none)."""

    name: str
    deletions: int = 0


@dataclass(frozen=True)
class CatalogState:
    collection_uuid: str
    generation: int
    segments: tuple[SegmentRef, ...]
    next_key: int
    next_segment: int
    updated_at: float


@dataclass(frozen=True)
class StoredDocument:
    """A document's catalog row."""

    id: str
    key: int
    title: str
    meta: dict
    content_hash: str
    text_hash: str
    n_chunks: int


@dataclass
class DocumentRow:
    """A document row to insert (a new document, or a new version replacing the old row)."""

    id: str
    key: int
    title: str
    metadata: dict[str, Any]
    content_hash: str
    text_hash: str
    n_chunks: int


@dataclass
class Publish:
    """Everything one commit changes in the catalog.

    Attributes:
        segments: The new generation's segment list.
        next_key, next_segment: Counters after this commit.
        remove: Ids whose rows go (deleted, or replaced by a row in ``insert``).
        insert: New rows.
        metadata: ``(id, key, metadata, content_hash)`` for rows whose title and text stay.
    """

    segments: Sequence[SegmentRef]
    next_key: int
    next_segment: int
    remove: Sequence[str] = ()
    insert: Sequence[DocumentRow] = ()
    metadata: Sequence[tuple[str, int, dict, str]] = field(default_factory=tuple)


def make_engine(url: str) -> Engine:
    """An engine; SQLite gets WAL, full fsync and a busy timeout."""
    kwargs: dict[str, Any] = {}
    if str(url).startswith("sqlite"):
        # SQLite's JSON paths match keys as stored: \u-escaped non-ASCII keys
        # would never match a filter such as {"größe": 3}.
        kwargs["json_serializer"] = lambda obj: json.dumps(obj, ensure_ascii=False)
    try:
        engine = create_engine(with_password(url), **kwargs)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise SemsearchError(f"cannot use catalog URL {redact(url)}: {exc}") from None
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

    return engine


def _chunked(items: Sequence, size: int = _BATCH) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _segments_json(segments: Sequence[SegmentRef]) -> str:
    return json.dumps([[s.name, s.deletions] for s in segments])


class Catalog:
    """Document rows in SQL, behind one committed generation."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)

    def close(self) -> None:
        self.engine.dispose()

    # -- life cycle -------------------------------------------------------
    def create(self, collection_uuid: str) -> None:
        """Create the tables, the state row at generation 0 (no segments) and the metadata rows' format row."""
        try:
            metadata_obj.create_all(self.engine)
        except SQLAlchemyError as exc:  # e.g. a server that refuses the connection
            raise SemsearchError(f"cannot create catalog {self.safe_url()}: {exc.orig or exc}") from None
        with self.engine.begin() as conn:
            owner = conn.execute(select(state.c.collection_uuid)).first()
            if owner is not None:  # never take over (and empty) another collection's catalog
                raise BadInputError(f"catalog {self.safe_url()} already belongs to collection {owner.collection_uuid}")
            conn.execute(
                insert(state).values(
                    id=1,
                    collection_uuid=collection_uuid,
                    generation=0,
                    segments="[]",
                    next_key=1,
                    next_segment=1,
                    updated_at=time.time(),
                )
            )
            conn.execute(insert(fields).values(**format_row()))  # a new catalog indexes lists

    def drop(self) -> None:
        """Remove this format's tables (used when a conversion is retried)."""
        metadata_obj.drop_all(self.engine)

    def state(self) -> CatalogState:
        try:
            with self.engine.connect() as conn:
                row = conn.execute(select(state).where(state.c.id == 1)).one_or_none()
        except SQLAlchemyError as exc:
            raise CorruptCollectionError(f"cannot read catalog {self.safe_url()}: {exc.orig or exc}") from None
        if row is None:
            raise CorruptCollectionError(f"catalog {self.safe_url()} has no state row")
        segments = tuple(SegmentRef(name, dels) for name, dels in parse_segments(row.segments, self.safe_url()))
        return CatalogState(
            row.collection_uuid, row.generation, segments, row.next_key, row.next_segment, row.updated_at
        )

    def safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    # -- writes -----------------------------------------------------------
    def publish(self, expected_generation: int, change: Publish) -> int:
        """Apply ``change`` and move to generation ``expected_generation + 1``, in one transaction.

        Returns:
            The new generation.
        Raises:
            CorruptCollectionError: if the generation moved under the writer.
        """
        now = time.time()
        new_generation = expected_generation + 1
        with self.engine.begin() as conn:
            moved = conn.execute(
                update(state)
                .where(state.c.id == 1, state.c.generation == expected_generation)
                .values(
                    generation=new_generation,
                    segments=_segments_json(change.segments),
                    next_key=change.next_key,
                    next_segment=change.next_segment,
                    updated_at=now,
                )
            )
            if moved.rowcount != 1:
                raise CorruptCollectionError(f"catalog generation moved from {expected_generation} during a write")
            for part in _chunked(list(dict.fromkeys(change.remove))):
                gone = select(documents.c.key).where(documents.c.id.in_(part))
                conn.execute(delete(fields).where(fields.c.key.in_(gone)))
                conn.execute(delete(documents).where(documents.c.id.in_(part)))
            for part in _chunked(list(change.metadata)):
                conn.execute(
                    _SET_METADATA.values(updated_at=now),
                    [{"doc_id": d, "new_meta": meta, "new_hash": h} for d, _, meta, h in part],
                )
                conn.execute(_DROP_FIELDS, [{"doc_key": key} for _, key, _, _ in part])
            leaves = [row for doc_id, key, meta, _ in change.metadata for row in field_rows(key, meta)]
            leaves += [row for doc in change.insert for row in field_rows(doc.key, doc.metadata)]
            if leaves:
                conn.execute(insert(fields), leaves)
            if change.insert:
                conn.execute(
                    insert(documents),
                    [
                        {
                            "id": row.id,
                            "key": row.key,
                            "title": row.title,
                            "meta": row.metadata,
                            "content_hash": row.content_hash,
                            "text_hash": row.text_hash,
                            "n_chunks": row.n_chunks,
                            "updated_at": now,
                        }
                        for row in change.insert
                    ],
                )
        return new_generation

    def vacuum(self) -> None:
        """Give the space of deleted rows back to the file system (SQLite only)."""
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as conn:
                conn.exec_driver_sql("VACUUM")
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- reads ------------------------------------------------------------
    def lookup(self, ids: Sequence[str]) -> dict[str, StoredDocument]:
        """Rows of the ids that exist, by id."""
        found: dict[str, StoredDocument] = {}
        with self.engine.connect() as conn:
            for part in _chunked(list(ids)):
                for row in conn.execute(_BY_IDS, {"ids": part}):
                    found[row.id] = _stored(row)
        return found

    def by_keys(self, keys: Sequence[int]) -> dict[int, StoredDocument]:
        """Rows of the given keys (one query per 500 keys), by key.

        On the query path: the statement goes to the driver's own cursor, with
        the keys (integers, checked by ``int``) written into it, which saves
        most of a millisecond of SQLAlchemy's per-execution work per search.
        """
        found: dict[int, StoredDocument] = {}
        with self.engine.connect() as conn:
            cursor = conn.connection.driver_connection.cursor()
            try:
                for part in _chunked([int(k) for k in keys]):
                    cursor.execute(_BY_KEYS_SQL.format(keys=",".join(map(str, part))))
                    for row in cursor.fetchall():
                        found[row[1]] = _stored(row)
            finally:
                cursor.close()
                conn.connection.driver_connection.rollback()  # end the read: PostgreSQL opened a transaction
        return found

    def matching_keys(self, where: dict) -> np.ndarray:
        """Sorted keys of documents whose metadata satisfies ``where`` (int64)."""
        plan = FilterPlan(where, fields, documents)
        with self.engine.connect() as conn:
            rows = [row for statement in plan.statements() for row in conn.execute(statement).all()]
        return plan.evaluate(rows)

    def ids_by_source(self, prefix: str) -> dict[str, str]:
        """``{id: metadata.source}`` for documents whose source starts with ``prefix``, case and all.

        SQL ``LIKE`` narrows the rows (SQLite's ignores ASCII case), then each
        source is compared exactly, so ``/t/A/`` never selects ``/t/a/x.txt``.
        """
        source = documents.c.meta["source"].as_string()
        query = select(documents.c.id, source).where(source.startswith(prefix, autoescape=True))
        with self.engine.connect() as conn:
            return {row[0]: row[1] for row in conn.execute(query) if row[1].startswith(prefix)}

    def counts(self) -> tuple[int, int]:
        """``(documents, chunks)``."""
        with self.engine.connect() as conn:
            n_docs, n_chunks = conn.execute(
                select(func.count(), func.coalesce(func.sum(documents.c.n_chunks), 0))
            ).one()
        return int(n_docs), int(n_chunks)

    def metadata_fields(self, sample: int = 1000) -> dict[str, list]:
        """Metadata field names with up to 20 example values each, from a sample of documents."""
        fields: dict[str, list] = {}
        with self.engine.connect() as conn:
            for meta in conn.execute(select(documents.c.meta).limit(sample)).scalars():
                for key, value in (meta or {}).items():
                    values = fields.setdefault(key, [])
                    if isinstance(value, (str, int, float, bool)) and value not in values and len(values) < 20:
                        values.append(value)
        return fields

    def iter_metadata(self) -> Iterator[tuple[str, dict]]:
        """``(id, metadata)`` of every document, streamed in id order."""
        with self.engine.connect() as conn:
            query = select(documents.c.id, documents.c.meta).order_by(documents.c.id)
            for doc_id, meta in conn.execution_options(yield_per=1000).execute(query):
                yield doc_id, dict(meta or {})

    def iter_ids(self) -> Iterator[str]:
        with self.engine.connect() as conn:
            yield from conn.execute(select(documents.c.id).order_by(documents.c.id)).scalars()

    def all_keys(self) -> np.ndarray:
        """Every key, sorted (int64)."""
        with self.engine.connect() as conn:
            keys = np.fromiter(conn.execute(select(documents.c.key)).scalars(), dtype=np.int64)
        keys.sort()
        return keys


def _stored(row: Sequence) -> StoredDocument:
    """A ``documents`` row (SQLAlchemy's, or the driver's from ``_BY_KEYS_SQL``): its first seven columns.

    JSON arrives parsed through SQLAlchemy and PostgreSQL's driver, as text from SQLite's.
    """
    doc_id, key, title, meta, content_hash, text_hash, n_chunks = tuple(row)[:7]
    meta = json.loads(meta) if isinstance(meta, (str, bytes)) else meta
    return StoredDocument(doc_id, key, title, dict(meta or {}), content_hash, text_hash, n_chunks)
