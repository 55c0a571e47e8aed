"""Faults tried for real: a disk that fills up during a commit, a read-only file system under a reader,
and the PostgreSQL catalog stopped in the middle of a commit and started again.

The first two need a file system of their own: a small tmpfs (and a
read-only bind mount of it), which needs root; elsewhere they skip and say so.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from retriever import Collection
from retriever.errors import SemsearchError
from retriever.storage.faults import StorageFaultError
from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)


@contextlib.contextmanager
def mounted(args: list[str], target: Path):
    """``mount *args target`` for the duration; skipped with the reason where mounting is not allowed."""
    target.mkdir(parents=True, exist_ok=True)
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to mount a small file system of its own")
    done = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({' '.join(args)}): {done.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write a file until the file system is full; returns it (delete it to free the space)."""
    filler = folder / "filler"
    with open(filler, "wb") as out:
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 65536)
                out.flush()
    return filler


def docs(prefix: str, n: int, words: int) -> list[dict]:
    return [{"id": f"{prefix}{i}", "text": f"{prefix} document {i} " + "padding text " * words} for i in range(n)]


def test_a_full_disk_stops_a_commit_cleanly_and_the_next_one_succeeds(tmp_path, tiny_model_dir):
    with mounted(["-t", "tmpfs", "-o", "size=3m", "tmpfs"], tmp_path / "fs") as fs:
        with Collection.create(fs / "col", tiny_model_dir) as col:
            col.add(docs("first", 20, 5))
            generation = col.info()["generation"]
            filler = fill(fs)
            with pytest.raises(StorageFaultError, match="the disk is full; nothing was committed"):
                col.add(docs("second", 60, 150))
            assert col.info()["generation"] == generation and len(col) == 20
            with Collection.open(fs / "col") as again:  # as the next process finds it
                assert len(again) == 20 and again.check().ok
                assert again.search("first document", k=1, mode="bm25")[0].id.startswith("first")
            assert not [p for p in (fs / "col" / "segments").iterdir() if p.name.startswith(".staged")]
            filler.unlink()
            assert len(col.add(docs("second", 60, 20)).added) == 60 and len(col) == 80 and col.check().ok


def test_a_reader_on_a_read_only_file_system_searches_and_sees_commits(tmp_path, tiny_model_dir):
    with mounted(["-t", "tmpfs", "-o", "size=8m", "tmpfs"], tmp_path / "fs") as fs:
        with Collection.create(fs / "col", tiny_model_dir) as writer:
            writer.add(docs("first", 10, 5))
            with mounted(["--bind", str(fs / "col")], tmp_path / "ro") as view:
                done = subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True, text=True)
                if done.returncode != 0:
                    pytest.skip(f"cannot make a read-only bind mount: {done.stderr.strip()}")
                with Collection.open(view) as reader:
                    assert len(reader) == 10
                    writer.add([{"id": "late", "text": "written while a reader reads a read-only view"}])
                    assert reader.search("reader reads", k=1, mode="bm25")[0].id == "late" and len(reader) == 11
                    with pytest.raises(StorageFaultError, match="the file system is read-only; nothing was committed"):
                        reader.add([{"id": "refused", "text": "a write through the read-only view"}])
                    with pytest.raises(StorageFaultError, match="read-only"):
                        reader.delete(["late"])
            assert len(writer) == 11 and "refused" not in writer and writer.check().ok


def test_the_postgresql_catalog_stopped_in_the_middle_of_a_commit(
    tmp_path, tiny_model_dir, postgres_server, postgres_url
):
    with Collection.create(tmp_path / "col", tiny_model_dir, catalog_url=postgres_url) as col:
        col.add(docs("first", 10, 5))
        generation = col.info()["generation"]
        hook = col.writer.on_commit

        def crash_then_go_on(*args):  # the server dies after the segment is written, before the publish
            postgres_server.halt()
            return hook(*args)

        col.writer.on_commit = crash_then_go_on
        try:
            unknown = r"the outcome of committing generation \d+ to postgresql.* is unknown"
            with pytest.raises(SemsearchError, match=unknown):
                col.add(docs("second", 10, 5))
        finally:
            col.writer.on_commit = hook
            postgres_server.restart()
    with Collection.open(tmp_path / "col") as again:
        assert again.info()["generation"] == generation and len(again) == 10 and again.check().ok
        assert len(again.add(docs("second", 10, 5)).added) == 10 and len(again) == 20 and again.check().ok
        assert sorted(p.name for p in (tmp_path / "col" / "segments").iterdir()) == sorted(
            s["name"] for s in again.info()["segments"]
        )  # what the failed commit wrote is gone
