"""The SQL side of a collection: documents, chunks and the committed generation.

SQLAlchemy Core over SQLite (a file inside the collection, WAL mode, full
fsync) or any other SQLAlchemy URL. One row in ``state`` holds the generation
whose vector file is current; writers bump it in the same transaction that
changes documents and chunks.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

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

from retriever.catalog_url import redact, with_password
from retriever.errors import BadInputError, CorruptCollectionError, SemsearchError
from retriever.filters import compile_where

_BATCH = 500  # ids per IN (...) clause

metadata_obj = MetaData()

documents = Table(
    "documents",
    metadata_obj,
    Column("id", String(1024), primary_key=True),
    Column("title", Text, nullable=False, default=""),
    Column("text", Text, nullable=False),
    Column("meta", JSON, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("n_chunks", Integer, nullable=False),
    Column("updated_at", Float, nullable=False),
)

chunks = Table(
    "chunks",
    metadata_obj,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("doc_id", String(1024), nullable=False, index=True),
    Column("ordinal", Integer, nullable=False),
    Column("start", Integer, nullable=False),
    Column("end", Integer, nullable=False),
)

state = Table(
    "state",
    metadata_obj,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("collection_uuid", String(36), nullable=False),
    Column("generation", BigInteger, nullable=False),
    Column("next_chunk_id", BigInteger, nullable=False),
    Column("updated_at", Float, nullable=False),
)


@dataclass(frozen=True)
class CatalogState:
    collection_uuid: str
    generation: int
    next_chunk_id: int
    updated_at: float


@dataclass(frozen=True)
class ChunkRow:
    id: int
    doc_id: str
    ordinal: int
    start: int
    end: int


@dataclass
class DocumentWrite:
    """A document row and its chunk rows, ready to insert."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any]
    content_hash: str
    chunk_ids: list[int]
    spans: list[tuple[int, int]]


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


def _apply_metadata(conn, updates: Sequence[tuple[str, dict, str]], now: float) -> None:
    for doc_id, meta, content_hash in updates:
        conn.execute(
            update(documents)
            .where(documents.c.id == doc_id)
            .values(meta=meta, content_hash=content_hash, updated_at=now)
        )


def _chunked(items: Sequence, size: int = _BATCH) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class Catalog:
    """Documents and chunks in SQL, behind one committed generation number."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)

    def close(self) -> None:
        self.engine.dispose()

    # -- life cycle -------------------------------------------------------
    def create(self, collection_uuid: str) -> None:
        """Create the tables and the state row at generation 0."""
        try:
            metadata_obj.create_all(self.engine)
        except SQLAlchemyError as exc:  # e.g. a server that refuses the connection
            raise SemsearchError(f"cannot create catalog {self._safe_url()}: {exc.orig or exc}") from None
        with self.engine.begin() as conn:
            owner = conn.execute(select(state.c.collection_uuid)).first()
            if owner is not None:  # never take over (and empty) another collection's catalog
                raise BadInputError(
                    f"catalog {self._safe_url()} already belongs to collection {owner.collection_uuid}"
                )
            conn.execute(
                insert(state).values(
                    id=1,
                    collection_uuid=collection_uuid,
                    generation=0,
                    next_chunk_id=0,
                    updated_at=time.time(),
                )
            )

    def state(self) -> CatalogState:
        try:
            with self.engine.connect() as conn:
                row = conn.execute(select(state).where(state.c.id == 1)).one_or_none()
        except SQLAlchemyError as exc:
            raise CorruptCollectionError(f"cannot read catalog {self._safe_url()}: {exc.orig or exc}") from None
        if row is None:
            raise CorruptCollectionError(f"catalog {self._safe_url()} has no state row")
        return CatalogState(row.collection_uuid, row.generation, row.next_chunk_id, row.updated_at)

    def _safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    # -- writes -----------------------------------------------------------
    def commit(
        self,
        expected_generation: int,
        remove_doc_ids: Iterable[str],
        writes: Sequence[DocumentWrite],
        next_chunk_id: int,
        metadata_updates: Sequence[tuple[str, dict, str]] = (),
    ) -> int:
        """Apply removals, writes and metadata updates and bump the generation, in one transaction.

        Returns:
            The new generation.
        Raises:
            CorruptCollectionError: if the generation moved under the writer.
        """
        now = time.time()
        remove = list(dict.fromkeys(remove_doc_ids))
        new_generation = expected_generation + 1
        with self.engine.begin() as conn:
            moved = conn.execute(
                update(state)
                .where(state.c.id == 1, state.c.generation == expected_generation)
                .values(generation=new_generation, next_chunk_id=next_chunk_id, updated_at=now)
            )
            if moved.rowcount != 1:
                raise CorruptCollectionError(
                    f"catalog generation moved from {expected_generation} during a write"
                )
            for part in _chunked(remove):
                conn.execute(delete(chunks).where(chunks.c.doc_id.in_(part)))
                conn.execute(delete(documents).where(documents.c.id.in_(part)))
            _apply_metadata(conn, metadata_updates, now)
            if writes:
                conn.execute(
                    insert(documents),
                    [
                        {
                            "id": w.id,
                            "title": w.title,
                            "text": w.text,
                            "meta": w.metadata,
                            "content_hash": w.content_hash,
                            "n_chunks": len(w.chunk_ids),
                            "updated_at": now,
                        }
                        for w in writes
                    ],
                )
                conn.execute(
                    insert(chunks),
                    [
                        {"id": cid, "doc_id": w.id, "ordinal": i, "start": s, "end": e}
                        for w in writes
                        for i, (cid, (s, e)) in enumerate(zip(w.chunk_ids, w.spans))
                    ],
                )
        return new_generation

    def update_metadata(self, updates: Sequence[tuple[str, dict, str]]) -> None:
        """Replace ``(id, metadata, content_hash)`` of documents whose title and text are
        unchanged, in one transaction; vectors and BM25 stay as they are, so the
        generation does not move."""
        now = time.time()
        with self.engine.begin() as conn:
            _apply_metadata(conn, updates, now)
            conn.execute(update(state).where(state.c.id == 1).values(updated_at=now))

    # -- reads ------------------------------------------------------------
    def content_hashes(self, ids: Sequence[str]) -> dict[str, str]:
        """``{id: content_hash}`` for the ids that exist."""
        found: dict[str, str] = {}
        with self.engine.connect() as conn:
            for part in _chunked(list(ids)):
                rows = conn.execute(
                    select(documents.c.id, documents.c.content_hash).where(documents.c.id.in_(part))
                )
                found.update({row.id: row.content_hash for row in rows})
        return found

    def chunk_ids_of(self, doc_ids: Sequence[str]) -> np.ndarray:
        """Chunk ids belonging to ``doc_ids``, as int64."""
        out: list[int] = []
        with self.engine.connect() as conn:
            for part in _chunked(list(doc_ids)):
                out.extend(conn.execute(select(chunks.c.id).where(chunks.c.doc_id.in_(part))).scalars())
        return np.asarray(out, dtype=np.int64)

    def matching_chunk_ids(self, where: dict) -> np.ndarray:
        """Chunk ids of documents whose metadata satisfies ``where``."""
        condition = compile_where(where, documents.c.meta)
        query = (
            select(chunks.c.id)
            .select_from(chunks.join(documents, chunks.c.doc_id == documents.c.id))
            .where(condition)
        )
        with self.engine.connect() as conn:
            return np.fromiter(conn.execute(query).scalars(), dtype=np.int64)

    def chunks_of(self, doc_ids: Sequence[str]) -> list[ChunkRow]:
        """Chunk rows of the given documents."""
        out: list[ChunkRow] = []
        with self.engine.connect() as conn:
            for part in _chunked(list(doc_ids)):
                for row in conn.execute(select(chunks).where(chunks.c.doc_id.in_(part))):
                    out.append(ChunkRow(row.id, row.doc_id, row.ordinal, row.start, row.end))
        return out

    def matching_doc_ids(self, where: dict) -> set[str]:
        """Ids of documents whose metadata satisfies ``where``."""
        condition = compile_where(where, documents.c.meta)
        with self.engine.connect() as conn:
            return set(conn.execute(select(documents.c.id).where(condition)).scalars())

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        rows: dict[int, ChunkRow] = {}
        with self.engine.connect() as conn:
            for part in _chunked([int(c) for c in chunk_ids]):
                for row in conn.execute(select(chunks).where(chunks.c.id.in_(part))):
                    rows[row.id] = ChunkRow(row.id, row.doc_id, row.ordinal, row.start, row.end)
        return rows

    def documents(self, ids: Sequence[str]) -> dict[str, Any]:
        """Document rows (id, title, text, meta, ...) by id."""
        found: dict[str, Any] = {}
        with self.engine.connect() as conn:
            for part in _chunked(list(ids)):
                for row in conn.execute(select(documents).where(documents.c.id.in_(part))):
                    found[row.id] = row
        return found

    def ids_by_source(self, prefix: str) -> dict[str, str]:
        """``{id: metadata.source}`` for documents whose source starts with ``prefix``."""
        source = documents.c.meta["source"].as_string()
        query = select(documents.c.id, source).where(source.startswith(prefix, autoescape=True))
        with self.engine.connect() as conn:
            return {row[0]: row[1] for row in conn.execute(query)}

    def all_chunk_ids(self) -> np.ndarray:
        with self.engine.connect() as conn:
            return np.fromiter(conn.execute(select(chunks.c.id)).scalars(), dtype=np.int64)

    def counts(self) -> tuple[int, int]:
        """``(documents, chunks)``."""
        with self.engine.connect() as conn:
            n_docs = conn.execute(select(func.count()).select_from(documents)).scalar_one()
            n_chunks = conn.execute(select(func.count()).select_from(chunks)).scalar_one()
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

    def iter_texts(self, batch: int = 1000) -> Iterator[tuple[str, str, str]]:
        """``(id, title, text)`` of every document, streamed."""
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=batch).execute(
                select(documents.c.id, documents.c.title, documents.c.text)
            )
            for row in result:
                yield row.id, row.title, row.text

    def iter_ids(self) -> Iterator[str]:
        with self.engine.connect() as conn:
            yield from conn.execute(select(documents.c.id).order_by(documents.c.id)).scalars()
