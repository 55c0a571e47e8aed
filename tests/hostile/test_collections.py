"""Crafted collection directories: each open, search and read gives the true answer or a SemsearchError naming the file.

Never a hang (a FIFO), a file from outside the collection (a symbolic link,
a segment name leaving ``segments/``), a bare exception or wrong results.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading

import faiss
import numpy as np
from hypothesis import given, settings

from retriever import Collection, SemsearchError
from retriever.storage.manifest import DEFAULT_CATALOG
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.segment_files import SEGMENT_NAME
from tests.hostile.conftest import case, examples
from tests.hostile.strategies import collection_damage, segment_names

SECRET = b"the secret key of another user\n" * 40


def everything(path, model) -> tuple:
    """What a reader can get: ids, every text, and the hits of fixed searches."""
    with Collection.open(path, model) as col:
        texts = tuple((doc_id, col.get(doc_id).text) for doc_id in col.ids())
        hits = tuple(
            (h.id, round(h.score, 4))
            for mode in ("dense", "bm25", "hybrid")
            for h in col.search("green tea rivers coffee", k=5, mode=mode)
        )
        return texts, hits


def outcome(path, model, limit_s: float = 20.0):
    """``everything`` in a thread: its answer, or the exception it raised; fails when it hangs."""
    result = {}

    def run():
        try:
            result["answer"] = everything(path, model)
        except BaseException as exc:  # noqa: BLE001 - judged by the caller
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"reading {path} hangs"
    return result


def fresh_copy(template, tmp_path_factory):
    path = tmp_path_factory.mktemp("crafted") / "col"
    shutil.copytree(template, path, symlinks=True)
    return path


def first_segment(path):
    return sorted(p for p in (path / SEGMENTS_DIR).iterdir() if SEGMENT_NAME.fullmatch(p.name))[0]


def damage(segment, kind: str, name: str, detail, outside) -> None:
    target = segment / name
    if kind == "symlink":
        outside.write_bytes(SECRET if name == "text.bin" else target.read_bytes())  # even a true copy is refused
        target.unlink()
        os.symlink(outside, target)
    elif kind == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif kind == "truncate":
        size = target.stat().st_size
        os.truncate(target, int(size * detail))
    elif kind == "reshape":
        shape, dtype = detail
        original = np.load(target, mmap_mode="r").shape
        shape = shape if shape != original else (*shape, 1)
        np.save(target, np.ones(shape, dtype=dtype))
    else:
        n, dim = detail
        index = faiss.read_index(str(target))
        if (n, dim) == (index.ntotal, index.d):
            n += 1
        other = faiss.IndexFlatIP(dim)
        other.add(np.random.default_rng(n).standard_normal((n, dim)).astype(np.float32))
        faiss.write_index(other, str(target))


@settings(max_examples=examples(12))
@given(damage_=collection_damage())
def test_a_damaged_segment_is_refused_by_name(hostile_collection, tiny_model_dir, tmp_path_factory, damage_):
    kind, name, detail = damage_
    with case("crafted collection: damaged segment"):
        path = fresh_copy(hostile_collection, tmp_path_factory)
        segment = first_segment(path)
        damage(segment, kind, name, detail, path.parent / "outside")
        result = outcome(path, tiny_model_dir)
        if "answer" in result:  # only cutting nothing off an empty file may read on, to the true answer
            assert kind == "truncate", (kind, name)
            assert result["answer"] == everything(hostile_collection, tiny_model_dir), (kind, name)
            return
        error = result["error"]
        assert isinstance(error, SemsearchError), f"{kind} {name}: {type(error).__name__}: {error}"
        assert segment.name in str(error) or name in str(error), (kind, name, str(error))


@settings(max_examples=examples(12))
@given(name=segment_names())
def test_a_segment_name_from_the_catalog_never_leaves_segments(
    hostile_collection, tiny_model_dir, tmp_path_factory, name
):
    with case("crafted collection: segment name"):
        path = fresh_copy(hostile_collection, tmp_path_factory)
        db = sqlite3.connect(path / DEFAULT_CATALOG)
        (segments,) = db.execute("SELECT segments FROM semsearch_state").fetchone()
        listed = json.loads(segments)
        db.execute("UPDATE semsearch_state SET segments = ?", (json.dumps([[name, 0]] + listed[1:]),))
        db.commit()
        db.close()
        result = outcome(path, tiny_model_dir)
        if isinstance(name, str) and SEGMENT_NAME.fullmatch(name) and "answer" in result:
            return  # a well-formed name of a segment that exists (e.g. the first one's own)
        error = result.get("error")
        assert isinstance(error, SemsearchError), f"{name!r}: {result}"
        assert "segment" in str(error)
