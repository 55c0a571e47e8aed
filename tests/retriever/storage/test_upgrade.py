"""Format-1 collections (one FAISS and one BM25 file per generation) convert to segments in place."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import faiss
import numpy as np
import pytest

from retriever import Collection, CorruptCollectionError
from retriever.errors import FormatVersionError
from retriever.storage.manifest import MANIFEST
from retriever.storage.segment import SEGMENTS_DIR
from retriever.upgrading import upgrade

REPO = Path(__file__).resolve().parents[3]
DOCS = [
    ("tea", "Tea", "Green tea is steamed after picking and then rolled.", {"lang": "en", "year": 2021}),
    ("coffee", "", "Coffee beans are roasted at a high temperature.", {"lang": "en"}),
    ("long", "Rivers", " ".join(["rivers flow into the sea through wide deltas"] * 30), {"lang": "de"}),
]


def write_format_1(path: Path, embedder) -> dict[str, np.ndarray]:
    """A collection as semsearch wrote it before segments: catalog tables, index/vectors.<g>.faiss, manifest v1.

    Returns each document's chunk vectors.
    """
    from retriever.encoding.chunking import Chunker

    path.mkdir(parents=True)
    chunker = Chunker(embedder.tokenizer, embedder.max_tokens - 2, 8, True)
    db = sqlite3.connect(path / "catalog.sqlite")
    db.executescript(
        """
        CREATE TABLE documents (id VARCHAR(1024) PRIMARY KEY, title TEXT NOT NULL, text TEXT NOT NULL,
            meta JSON NOT NULL, content_hash VARCHAR(64) NOT NULL, n_chunks INTEGER NOT NULL, updated_at FLOAT NOT NULL);
        CREATE TABLE chunks (id BIGINT PRIMARY KEY, doc_id VARCHAR(1024) NOT NULL, ordinal INTEGER NOT NULL,
            start INTEGER NOT NULL, "end" INTEGER NOT NULL);
        CREATE TABLE state (id INTEGER PRIMARY KEY, collection_uuid VARCHAR(36) NOT NULL, generation BIGINT NOT NULL,
            next_chunk_id BIGINT NOT NULL, updated_at FLOAT NOT NULL);
        """
    )
    index = faiss.index_factory(embedder.dim, "IDMap2,Flat", faiss.METRIC_INNER_PRODUCT)
    next_id = 100  # format 1 never reused chunk ids
    from retriever.documents import Document

    written = {}
    for doc_id, title, text, meta in DOCS:
        doc = Document(doc_id, text, title, meta)
        chunks = chunker.split(doc)
        vectors = embedder.embed([c.embed_text for c in chunks])
        written[doc_id] = vectors
        ids = np.arange(next_id, next_id + len(chunks), dtype=np.int64)
        index.add_with_ids(vectors, ids)
        db.execute(
            "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, 0)",
            (doc_id, title, text, json.dumps(meta), doc.content_hash(), len(chunks)),
        )
        for ordinal, (chunk_id, chunk) in enumerate(zip(ids, chunks)):
            db.execute(
                "INSERT INTO chunks VALUES (?, ?, ?, ?, ?)", (int(chunk_id), doc_id, ordinal, chunk.start, chunk.end)
            )
        next_id += len(chunks) + 5
    collection_uuid = str(uuid.uuid4())
    db.execute("INSERT INTO state VALUES (1, ?, 7, ?, 0)", (collection_uuid, next_id))
    db.commit()
    db.close()
    (path / "index").mkdir()
    faiss.write_index(index, str(path / "index" / "vectors.7.faiss"))
    (path / "index" / "bm25.7.npz").write_bytes(b"format-1 bm25")
    manifest = {
        "uuid": collection_uuid,
        "created_at": "2026-01-01T00:00:00+00:00",
        "model": embedder.identity(),
        "chunking": chunker.settings(),
        "index": {"library": "faiss", "factory": "IDMap2,Flat", "metric": "inner_product"},
        "catalog_url": None,
        "bm25": {"k1": 0.9, "b": 0.4, "stemmer": "porter", "stopwords": "en", "fields": "title+text"},
        "format": "semsearch-collection",
        "format_version": 1,
        "extra": {},
    }
    (path / MANIFEST).write_text(json.dumps(manifest))
    return written


@pytest.fixture
def old_vectors(tmp_path, tiny_embedder) -> tuple[Path, dict[str, np.ndarray]]:
    """A format-1 collection and the chunk vectors it holds."""
    path = tmp_path / "old"
    return path, write_format_1(path, tiny_embedder)


@pytest.fixture
def old(old_vectors) -> Path:
    return old_vectors[0]


def test_opening_a_format_1_collection_says_how_to_convert_it(old):
    with pytest.raises(FormatVersionError, match=r"format version 1.*semsearch upgrade -c"):
        Collection.open(old)


def test_upgrade_keeps_documents_vectors_and_spans(old_vectors, tiny_embedder):
    old, written = old_vectors
    message = upgrade(old, progress=False)
    assert "converted" in message and "3 documents" in message
    col = Collection.open(old, tiny_embedder)
    assert sorted(col.ids()) == ["coffee", "long", "tea"]
    for doc_id, title, text, meta in DOCS:
        doc = col.get(doc_id)
        assert (doc.title, doc.text, doc.metadata) == (title, text, meta)
    assert len(col.chunk_spans("long")) > 1
    query = tiny_embedder.embed(["green tea steamed"])[0]
    expected = {doc_id: float((vectors @ query).max()) for doc_id, vectors in written.items()}
    got = {h.id: h.score for h in col.search("green tea steamed", k=3, mode="dense")}
    assert got == pytest.approx(expected, abs=1e-5)  # the very vectors format 1 held
    assert [h.id for h in col.search("rivers deltas", k=1, mode="bm25")] == ["long"]
    assert [h.id for h in col.search("tea", k=5, where={"lang": "de"})] == ["long"]
    assert not (old / "index").exists() and (old / SEGMENTS_DIR).is_dir()
    tables = {
        r[0]
        for r in sqlite3.connect(old / "catalog.sqlite").execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    assert not tables & {"documents", "chunks", "state"}
    col.add({"id": "new", "text": "a document added after the conversion"})
    assert len(col) == 4
    assert "nothing to do" in upgrade(old, progress=False)


def test_an_interrupted_conversion_leaves_format_1_and_a_rerun_finishes(old, tiny_embedder, monkeypatch):
    from retriever.storage import manifest as manifest_module

    def crash(self, root):
        raise KeyboardInterrupt  # killed just before the switch

    monkeypatch.setattr(manifest_module.Manifest, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        upgrade(old, progress=False)
    monkeypatch.undo()
    with pytest.raises(FormatVersionError):
        Collection.open(old)  # still format 1, still whole
    assert (old / "index" / "vectors.7.faiss").is_file()
    upgrade(old, progress=False)
    assert len(Collection.open(old, tiny_embedder)) == 3


def test_semsearch_upgrade_command(old):
    run = subprocess.run(
        [sys.executable, "-m", "app.cli", "upgrade", "-c", str(old), "-q"], cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert "from format version 1 to 2" in run.stderr
    info = subprocess.run(
        [sys.executable, "-m", "app.cli", "info", "-c", str(old)], cwd=REPO, capture_output=True, text=True
    )
    assert info.returncode == 0 and "1 segment: exact" in info.stdout


def test_a_damaged_format_1_index_is_reported(old):
    (old / "index" / "vectors.7.faiss").write_bytes(b"junk")
    with pytest.raises(CorruptCollectionError, match="vectors.7.faiss"):
        upgrade(old, progress=False)
    assert json.loads((old / MANIFEST).read_text())["format_version"] == 1


def other_applications_tables(url: str) -> None:
    """Tables named as format 1's, owned by another application sharing the database."""
    from sqlalchemy import text

    from retriever.storage.catalog import make_engine

    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE documents (id INTEGER PRIMARY KEY, body TEXT)"))
        conn.execute(text("CREATE TABLE chunks (id INTEGER PRIMARY KEY)"))
        conn.execute(text("CREATE TABLE state (id INTEGER PRIMARY KEY, collection_uuid VARCHAR(36))"))
        conn.execute(text("INSERT INTO documents VALUES (1, 'not semsearch''s')"))
        conn.execute(text("INSERT INTO state VALUES (1, 'another-application')"))
    engine.dispose()


def table_names(url: str) -> set[str]:
    from sqlalchemy import inspect

    from retriever.storage.catalog import make_engine

    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_of_a_current_collection_leaves_other_applications_tables(catalog_url, tiny_embedder, tmp_path):
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, catalog_url=catalog_url) as col:
        col.add({"id": "a", "text": "tea"})
        url = col.manifest.catalog_location(path)
    other_applications_tables(url)
    assert "nothing to do" in upgrade(path, progress=False)
    assert {"documents", "chunks", "state"} <= table_names(url)
    with Collection.open(path, tiny_embedder) as col:
        assert list(col.ids()) == ["a"]


def test_a_format_1_catalog_of_another_collection_is_not_converted(old):
    db = sqlite3.connect(old / "catalog.sqlite")
    db.execute("UPDATE state SET collection_uuid = 'another-collection'")
    db.commit()
    db.close()
    with pytest.raises(CorruptCollectionError, match="another-collection"):
        upgrade(old, progress=False)
    assert {"documents", "chunks", "state"} <= table_names(f"sqlite:///{old / 'catalog.sqlite'}")
