"""Convert a collection of an older on-disk format to the current one, in place.

A collection at the current format gets what later versions add to it:
int8 rescoring rows for compressed segments (``int8_upgrade``), and filter
rows for the list values of documents written before lists were indexed
(``fields_upgrade``; recorded in the catalog, so it runs once).

Format 1 kept one FAISS file (``IDMap2,Flat``) and one BM25 file per
generation in ``index/``, and the document texts and chunk rows in the
catalog. Format 2 keeps documents in segments (``retriever.storage.segment``).

The conversion writes the segments and the new catalog tables beside the
old ones; the manifest, rewritten last, is the switch. A conversion killed
before it leaves the format-1 collection as it was, and running it again
starts over; one killed after it only leaves old files, removed by a rerun.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterator

import faiss
import numpy as np
from sqlalchemy import inspect, text
from sqlalchemy.exc import SQLAlchemyError
from tqdm import tqdm

from retriever.documents import Document
from retriever.errors import BadInputError, CorruptCollectionError
from retriever.storage.builders import SegmentBuilders
from retriever.storage.catalog import Catalog, DocumentRow, Publish, SegmentRef
from retriever.storage.fields_upgrade import index_list_fields
from retriever.storage.generations import HEAD_FILE, write_head
from retriever.storage.int8_upgrade import add_int8_rows
from retriever.storage.manifest import FORMAT_VERSION, MANIFEST, Manifest
from retriever.storage.merging import MergePolicy
from retriever.storage.segment import SEGMENTS_DIR, SegmentData, segment_name

_V1_TABLES = ("documents", "chunks", "state")
_DOCS_PER_SEGMENT = 50_000


def upgrade(path: str | Path, builders: SegmentBuilders, progress: bool = True) -> str:
    """Bring the collection at ``path`` to the current format; returns what was done, in one line.

    ``builders`` are the search room's (``retriever.upgrading`` hands them in): the analyser and index
    policy that format-1 documents are written into segments with, the quantiser of int8 rows.

    Raises:
        CollectionNotFoundError / CorruptCollectionError: ``path`` is no readable collection.
        BadInputError: The collection's format is newer than this semsearch.
    """
    root = Path(path)
    manifest_path = root / MANIFEST
    try:
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        Manifest.load(root)  # raises the usual "no collection" error
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptCollectionError(f"cannot read {manifest_path}: {exc}") from None
    version = data.get("format_version")
    if version == FORMAT_VERSION:
        Manifest.load(root)  # any other problem surfaces here
        manifest = Manifest(**data)
        removed = _remove_format_1(root, manifest.catalog_location(root), manifest.uuid)
        extra = " (removed files left by an earlier conversion)" if removed else ""
        done = _bring_up_to_date(root, manifest, builders, progress)
        if done:
            return f"{root}: {'; '.join(done)}{extra}"
        return f"{root} is already at format version {FORMAT_VERSION}; nothing to do{extra}"
    if version != 1:
        raise BadInputError(f"{root} has format version {version!r}; this semsearch converts version 1 only")
    data = {**data, "format_version": FORMAT_VERSION}
    data["index"] = {
        "library": "faiss",
        "metric": "inner_product",
        "policy": builders.index_builder(None).to_dict(),
        "merge": MergePolicy().to_dict(),
    }
    manifest = Manifest(**data)
    url = manifest.catalog_location(root)
    catalog = Catalog(url)
    try:
        n_docs = _convert(root, manifest, catalog, builders, progress)
    finally:
        catalog.close()
    manifest.save(root)  # the switch: from here on the collection is format 2
    _remove_format_1(root, url, manifest.uuid)
    return f"converted {root} from format version 1 to {FORMAT_VERSION} ({n_docs} documents)"


def _bring_up_to_date(root: Path, manifest: Manifest, builders: SegmentBuilders, progress: bool) -> list[str]:
    """What later versions add to a current-format collection: int8 rows, list values' filter rows.

    Returns:
        What was done, one phrase each (none: it was up to date).
    """
    done = []
    added = add_int8_rows(root, builders.quantize, progress)
    if added:
        done.append(f"wrote int8 rescoring rows for {added} segment(s) written before them")
    catalog = Catalog(manifest.catalog_location(root))
    try:
        rebuilt = index_list_fields(root, catalog, progress)
    finally:
        catalog.close()
    if rebuilt:
        done.append(f"indexed the list values of {rebuilt} document(s) written before lists were filterable")
    return done


def _convert(root: Path, manifest: Manifest, catalog: Catalog, builders: SegmentBuilders, progress: bool) -> int:
    """Write format-2 segments and tables from the format-1 ones; returns the document count."""
    engine = catalog.engine
    if not set(_V1_TABLES) <= set(inspect(engine).get_table_names()):
        raise CorruptCollectionError(f"{root} says format 1 but its catalog lacks the format-1 tables")
    for table in ("state", "semsearch_state"):
        owner = _owner(engine, table)
        if owner not in (None, manifest.uuid):
            raise CorruptCollectionError(
                f"{root} is collection {manifest.uuid}, but the {table!r} table of catalog "
                f"{catalog.safe_url()} belongs to {owner}; nothing was converted or removed"
            )
    catalog.drop()  # an interrupted earlier conversion starts over
    shutil.rmtree(root / SEGMENTS_DIR, ignore_errors=True)
    (root / HEAD_FILE).unlink(missing_ok=True)
    with engine.connect() as conn:
        generation = conn.execute(text("SELECT generation FROM state WHERE id = 1")).scalar_one()
        n_docs = conn.execute(text("SELECT count(*) FROM documents")).scalar_one()
    vectors_of = _read_vectors(root / "index" / f"vectors.{generation}.faiss")
    catalog.create(manifest.uuid)
    (root / SEGMENTS_DIR).mkdir()
    analyzer = builders.analyzer(manifest.bm25["stemmer"], manifest.bm25["stopwords"])
    policy = builders.index_builder(manifest.index["policy"])
    segments, rows, key = [], [], 1
    bar = tqdm(total=n_docs, unit="doc", desc="converting", disable=not progress)
    for batch in _documents(engine):
        spans = [[(s, e) for _, s, e in chunks] for _, _, chunks in batch]
        ids = [chunk_id for _, _, chunks in batch for chunk_id, _, _ in chunks]
        missing = [i for i in ids if i not in vectors_of]
        if missing:
            raise CorruptCollectionError(f"{root}: chunk {missing[0]} has no vector in the format-1 index")
        keys = list(range(key, key + len(batch)))
        docs = [doc for doc, _, _ in batch]
        data = SegmentData.from_documents(
            keys,
            [d.title for d in docs],
            [d.text for d in docs],
            spans,
            np.stack([vectors_of[i] for i in ids]),
            analyzer,
        )
        name = segment_name(len(segments) + 1)
        data.write(root / SEGMENTS_DIR / name, policy)
        segments.append(SegmentRef(name, 0))
        rows += [
            DocumentRow(d.id, k, d.title, d.metadata, content_hash, d.text_hash(), len(s))
            for d, k, (_, content_hash, _), s in zip(docs, keys, batch, spans)
        ]
        key += len(batch)
        bar.update(len(batch))
    bar.close()
    catalog.publish(0, Publish(segments, key, len(segments) + 1, insert=rows))
    write_head(root, 1)
    return n_docs


def _documents(engine) -> Iterator[list[tuple[Document, str, list[tuple[int, int, int]]]]]:
    """Format-1 documents in batches: ``(document, content_hash, [(chunk id, start, end)])``."""
    with engine.connect() as conn:
        chunk_rows: dict[str, list] = {}
        for doc_id, chunk_id, start, end in conn.execute(
            text('SELECT doc_id, id, start, "end" FROM chunks ORDER BY doc_id, ordinal')
        ):
            chunk_rows.setdefault(doc_id, []).append((int(chunk_id), int(start), int(end)))
        batch = []
        for doc_id, title, body, meta, content_hash in conn.execute(
            text("SELECT id, title, text, meta, content_hash FROM documents ORDER BY id")
        ):
            metadata = json.loads(meta) if isinstance(meta, str) else (meta or {})
            batch.append((Document(doc_id, body, title or "", metadata), content_hash, chunk_rows.get(doc_id, [])))
            if len(batch) == _DOCS_PER_SEGMENT:
                yield batch
                batch = []
        if batch:
            yield batch


def _read_vectors(path: Path) -> dict[int, np.ndarray]:
    """``{chunk id: vector}`` from a format-1 ``IDMap2,Flat`` file."""
    try:
        index = faiss.read_index(str(path))
    except RuntimeError as exc:
        raise CorruptCollectionError(f"cannot read format-1 vector index {path}: {exc}") from None
    ids = faiss.vector_to_array(index.id_map).astype(np.int64)
    inner = faiss.downcast_index(index.index)  # rows in the order of id_map
    vectors = inner.reconstruct_n(0, inner.ntotal) if inner.ntotal else np.zeros((0, index.d), np.float32)
    return dict(zip(ids.tolist(), vectors))


def _owner(engine, table: str) -> str | None:
    """The ``collection_uuid`` of ``table``'s state row; ``None`` when there is none.

    Anything else than a semsearch state table (another application's
    ``state``, say) answers ``"another application"``.
    """
    if table not in set(inspect(engine).get_table_names()):
        return None
    try:
        with engine.connect() as conn:
            return conn.execute(text(f'SELECT collection_uuid FROM "{table}" WHERE id = 1')).scalar_one_or_none()
    except SQLAlchemyError:
        return "another application"


def _remove_format_1(root: Path, url: str, collection_uuid: str) -> bool:
    """Drop this collection's format-1 tables and files; returns whether there were any.

    Tables are dropped only when their ``state`` row names ``collection_uuid``:
    tables of the same names on a shared database may be another application's.
    """
    catalog = Catalog(url)
    try:
        present = [t for t in _V1_TABLES if t in set(inspect(catalog.engine).get_table_names())]
        if _owner(catalog.engine, "state") != collection_uuid:
            present = []  # not ours (or the state row went first: nothing of ours is left)
        with catalog.engine.begin() as conn:
            for table in present:
                conn.execute(text(f'DROP TABLE "{table}"'))
    finally:
        catalog.close()
    old_index = Path(root) / "index"
    existed = old_index.exists()
    shutil.rmtree(old_index, ignore_errors=True)
    return bool(present) or existed
