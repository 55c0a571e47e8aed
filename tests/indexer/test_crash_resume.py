"""SIGKILL a real indexing process at several points; the collection must stay
at its last commit and a rerun must end exactly where an uninterrupted run does."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retriever import Collection
from retriever import vector_index
from retriever.bm25 import BM25Index, bm25_path

WORDS = (
    "river mountain coffee tea python database network search engine winter snow cloud fox dog "
    "green quick brown lazy rows tables indexes language learn text documents rank sea peaks"
).split()


def _write_corpus(path: Path, n: int = 240) -> None:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
            out.write(json.dumps({"id": f"doc-{i}", "title": f"note {i}", "text": text, "n": i}) + "\n")


def _index_command(corpus: Path, collection: Path, model: Path) -> list[str]:
    return [
        sys.executable, "-m", "app.cli", "index", str(corpus), "-c", str(collection),
        "--model", str(model), "--batch-size", "6", "--quiet",
    ]


def _generation(collection: Path) -> int:
    db = collection / "catalog.sqlite"
    if not (collection / "manifest.json").exists() or not db.exists():
        return -1
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            row = conn.execute("SELECT generation FROM state WHERE id = 1").fetchone()
    except sqlite3.Error:
        return -1
    return row[0] if row else -1


def _snapshot(collection_dir: Path) -> dict:
    """Documents, chunk spans and vectors, keyed by content rather than internal ids."""
    with Collection.open(collection_dir) as col:
        index = vector_index.read_generation(col.root, col.catalog.state().generation)
        faiss_ids = set(vector_index.ids_of(index).tolist())
        catalog_ids = set(col.catalog.all_chunk_ids().tolist())
        assert faiss_ids == catalog_ids, "vectors and catalog disagree after a kill"
        docs = col.catalog.documents(list(col.ids()))
        n_docs, n_chunks = col.catalog.counts()
        assert sum(row.n_chunks for row in docs.values()) == n_chunks
        bm25 = BM25Index.load(bm25_path(col.root, col.catalog.state().generation))
        assert sorted(bm25.doc_ids) == sorted(docs), "BM25 and catalog disagree after a kill"
        hits = [h.id for h in col.search("coffee tea mountain", k=5)] if n_docs else []
        return {
            "hashes": {doc_id: row.content_hash for doc_id, row in docs.items()},
            "chunks": n_chunks,
            "vectors": index.ntotal,
            "hits": hits,
        }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "notes.jsonl"
    _write_corpus(path)
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus, tiny_model_dir) -> dict:
    target = tmp_path_factory.mktemp("ref") / "col"
    subprocess.run(_index_command(corpus, target, tiny_model_dir), check=True, cwd=_repo())
    return _snapshot(target)


def _repo() -> Path:
    return Path(__file__).resolve().parents[2]


# (generation to wait for, extra delay): -1 kills as soon as the directory
# appears, before the manifest is written; the others land inside later
# batches, a few of them between publishing a vector file and its commit.
KILL_POINTS = [(-1, 0.0), (1, 0.0), (3, 0.02), (8, 0.005), (15, 0.0), (22, 0.01)]


def _run_and_kill(command: list[str], target: Path, generation: int, delay: float) -> None:
    process = subprocess.Popen(command, cwd=_repo(), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        if generation < 0:
            while not target.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
        else:
            while _generation(target) < generation and process.poll() is None:
                assert time.monotonic() < deadline, "indexing made no progress"
                time.sleep(0.002)
        time.sleep(delay)
        assert process.poll() is None, "the job finished before it could be killed; the test needs a bigger corpus"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()


def test_sigkill_at_several_points_then_rerun_matches_uninterrupted_run(
    tmp_path, corpus, tiny_model_dir, reference
):
    target = tmp_path / "col"
    command = _index_command(corpus, target, tiny_model_dir)
    committed = 0
    for generation, delay in KILL_POINTS:
        _run_and_kill(command, target, generation, delay)  # each run also resumes the last
        if (target / "manifest.json").exists():
            partial = _snapshot(target)  # consistent, or _snapshot's own check fails
            assert committed <= len(partial["hashes"]) < len(reference["hashes"])
            assert all(reference["hashes"][i] == h for i, h in partial["hashes"].items())
            committed = len(partial["hashes"])
    assert committed > 0

    subprocess.run(command, check=True, cwd=_repo(), stderr=subprocess.DEVNULL)
    assert _snapshot(target) == reference
    generation = _generation(target)
    leftovers = sorted(p.name for p in (target / "index").iterdir())
    assert leftovers == [f"bm25.{generation}.npz", f"vectors.{generation}.faiss"]
