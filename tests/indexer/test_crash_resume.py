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
from retriever.storage.segment import SEGMENTS_DIR

WORDS = (
    "river mountain coffee tea python database network search engine winter snow cloud fox dog "
    "green quick brown lazy rows tables indexes language learn text documents rank sea peaks"
).split()


def _write_corpus(path: Path, n: int = 240, edit_every: int = 0) -> None:
    """``n`` notes; with ``edit_every``, every such note gets other text (a second version)."""
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
            if edit_every and i % edit_every == 0:
                text = "edited " + text[::-1]
            out.write(json.dumps({"id": f"doc-{i}", "title": f"note {i}", "text": text, "n": i}) + "\n")


def _index_command(corpus: Path, collection: Path, model: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "app.cli",
        "index",
        str(corpus),
        "-c",
        str(collection),
        "--model",
        str(model),
        "--batch-size",
        "6",
        "--quiet",
    ]


def _generation(collection: Path) -> int:
    db = collection / "catalog.sqlite"
    if not (collection / "manifest.json").exists() or not db.exists():
        return -1
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            row = conn.execute("SELECT generation FROM semsearch_state WHERE id = 1").fetchone()
    except sqlite3.Error:
        return -1
    return row[0] if row else -1


def _snapshot(collection_dir: Path) -> dict:
    """Documents, chunk counts and top hits, keyed by content rather than internal keys."""
    with Collection.open(collection_dir) as col:
        state = col.catalog.state()
        view = col.reader.current()
        stored = col.catalog.lookup(list(col.ids()))
        n_docs, n_chunks = col.catalog.counts()
        live = set()
        for part in view.parts:
            rows = range(part.segment.n_docs) if part.live_docs is None else part.live_docs.nonzero()[0]
            live.update(int(part.segment.keys[r]) for r in rows)
        assert live == {row.key for row in stored.values()}, "segments and catalog disagree after a kill"
        assert sum(p.n_live_chunks for p in view.parts) == n_chunks
        referenced = {ref.name for ref in state.segments}
        hits = [h.id for h in col.search("coffee tea mountain", k=5)] if n_docs else []
        texts = {doc_id: col.get(doc_id).text for doc_id in stored}
    return {
        "hashes": {doc_id: row.content_hash for doc_id, row in stored.items()},
        "texts": texts,
        "chunks": n_chunks,
        "hits": hits,
        "segments_referenced": referenced <= {p.name for p in (collection_dir / SEGMENTS_DIR).iterdir()},
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


def test_sigkill_at_several_points_then_rerun_matches_uninterrupted_run(tmp_path, corpus, tiny_model_dir, reference):
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
    _assert_no_leftovers(target)


def _assert_no_leftovers(target: Path) -> None:
    with Collection.open(target) as col:
        state = col.catalog.state()
    on_disk = {p.name: sorted(f.name for f in p.glob("deleted.*")) for p in (target / SEGMENTS_DIR).iterdir()}
    files = {r.name: [f"deleted.{r.deletions}.npy", f"deleted.{r.deletions}.npy.crc32"] for r in state.segments}
    assert on_disk == {r.name: files[r.name] if r.deletions else [] for r in state.segments}


def test_sigkill_while_replacing_documents_then_rerun_matches(tmp_path, corpus, tiny_model_dir):
    """Kills land while new versions are written: segments, deletion files, the publish and merges."""
    edited = tmp_path / "edited.jsonl"
    _write_corpus(edited, edit_every=3)
    expected_dir = tmp_path / "expected"
    subprocess.run(_index_command(corpus, expected_dir, tiny_model_dir), check=True, cwd=_repo())
    subprocess.run(_index_command(edited, expected_dir, tiny_model_dir), check=True, cwd=_repo())
    expected = _snapshot(expected_dir)

    target = tmp_path / "col"
    subprocess.run(_index_command(corpus, target, tiny_model_dir), check=True, cwd=_repo())
    before = _snapshot(target)
    start = _generation(target)
    command = _index_command(edited, target, tiny_model_dir)
    for step, delay in [(1, 0.0), (2, 0.003), (4, 0.0), (6, 0.01), (9, 0.001)]:
        _run_and_kill(command, target, start + step, delay)
        partial = _snapshot(target)
        for doc_id, text in partial["texts"].items():  # every document is whole: old or new version
            assert text in (before["texts"][doc_id], expected["texts"][doc_id])
        assert set(partial["texts"]) == set(expected["texts"])
    subprocess.run(command, check=True, cwd=_repo(), stderr=subprocess.DEVNULL)
    assert _snapshot(target) == expected
    _assert_no_leftovers(target)
