"""Temporary files and folders a killed process left are swept; a live writer's are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from retriever import Collection
from retriever.encoding import export_cache
from retriever.storage.leftovers import GRACE_S, MAX_AGE_S, sweep_temporaries


def dead_pid() -> int:
    """The number of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def aged(path, seconds: float):
    past = time.time() - seconds
    os.utime(path, (past, past), follow_symlinks=False)
    return path


def test_a_writer_sweeps_temporaries_that_killed_processes_left_in_the_collection(tiny_embedder, tmp_path):
    path = tmp_path / "col"
    Collection.create(path, tiny_embedder).close()
    dead = path / f".HEAD.{dead_pid()}.tmp"
    dead.write_text("3\n")
    aged(dead, GRACE_S + 60)
    live = path / f".manifest.json.{os.getpid()}.tmp"
    live.write_text("{}")
    ancient = path / ".HEAD.1.tmp"
    ancient.write_text("1\n")
    aged(ancient, MAX_AGE_S + 60)
    young = path / f".HEAD.{dead_pid()}.tmp"
    young.write_text("2\n")  # may be a live write on another host sharing the folder
    with Collection.open(path, tiny_embedder) as col:
        col.add({"id": "a", "text": "tea"})
    assert not dead.exists() and not ancient.exists()
    assert live.exists() and young.exists()


def test_only_atomic_temporaries_are_swept(tmp_path):
    keep = [tmp_path / ".notes.tmp", tmp_path / "HEAD.12.tmp", tmp_path / ".x.12.tmp.bak"]
    for path in keep:
        path.write_text("mine")
        aged(path, MAX_AGE_S + 60)
    assert sweep_temporaries(tmp_path) == []
    assert all(path.exists() for path in keep)


def test_an_export_sweeps_the_temporary_folders_of_killed_exports(tmp_path):
    exported = tmp_path / "exported"
    exported.mkdir()
    dead = exported / f".tmp-{dead_pid()}-{'a' * 32}"
    old_style = exported / f".tmp-{'b' * 32}"  # written before the folders carried their process
    live = exported / f".tmp-{os.getpid()}-{'c' * 32}"
    for folder in (dead, old_style, live):
        folder.mkdir()
        (folder / "model.onnx").write_bytes(b"x" * 1000)
    aged(dead, GRACE_S + 60)
    aged(old_style, MAX_AGE_S + 60)
    aged(live, MAX_AGE_S - 60)
    assert sorted(export_cache.sweep_export_temporaries(exported)) == sorted([dead, old_style])
    assert not dead.exists() and not old_style.exists() and live.exists()


def test_size_on_disk_counts_what_another_process_removes_meanwhile_as_gone(tmp_path, monkeypatch):
    """A staged folder committed or a segment collected by another process while the size is summed
    (the soak saw ``compact`` die on it) is left out, not an error."""
    import shutil

    from retriever.storage import cleanup

    segments = tmp_path / "segments"
    staged = segments / ".staged-host-1-ab"
    staged.mkdir(parents=True)
    (segments / "kept.bin").write_bytes(b"x" * 10)
    (segments / "removed.bin").write_bytes(b"x" * 1000)
    (staged / "rows.npy").write_bytes(b"x" * 100)
    real_stat = os.stat
    removed = []

    def stat_while_another_process_cleans_up(path, *args, **kwargs):
        if not removed:  # the first file looked at: the other process removes the rest now
            removed.append(path)
            shutil.rmtree(staged)
            for name in ("kept.bin", "removed.bin"):
                if not str(path).endswith(name):
                    os.unlink(segments / name)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(cleanup.os, "stat", stat_while_another_process_cleans_up)
    size = cleanup.size_on_disk(tmp_path)
    assert removed and size == (10 if str(removed[0]).endswith("kept.bin") else 1000)
