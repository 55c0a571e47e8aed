"""atomic_write: the old file or the complete new one, never a torn one, no leftovers."""

from __future__ import annotations

import pytest

from retriever.storage.atomic import atomic_write, atomic_write_text


class Boom(RuntimeError):
    pass


def test_failed_write_keeps_the_old_file_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old content")

    def write(tmp):
        assert tmp.parent == target.parent and tmp != target
        tmp.write_bytes(b"new but half")
        raise Boom("disk full")

    with pytest.raises(Boom):
        atomic_write(target, write)
    assert target.read_bytes() == b"old content"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def test_failure_before_anything_is_written_leaves_no_file(tmp_path):
    target = tmp_path / "new.txt"

    def write(tmp):
        raise Boom("nothing written")

    with pytest.raises(Boom):
        atomic_write(target, write)
    assert list(tmp_path.iterdir()) == []


def test_callback_that_writes_nothing_fails_cleanly(tmp_path):
    target = tmp_path / "data.txt"
    target.write_text("old")
    with pytest.raises(FileNotFoundError):
        atomic_write(target, lambda tmp: None)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["data.txt"]


def test_successful_write_replaces_the_file(tmp_path):
    target = tmp_path / "data.txt"
    target.write_text("old")
    atomic_write(target, lambda tmp: tmp.write_text("new"))
    assert target.read_text() == "new"
    atomic_write_text(target, "caf\u00e9 \u2713\n")
    assert target.read_bytes() == "caf\u00e9 \u2713\n".encode("utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["data.txt"]


def test_write_creates_a_missing_file(tmp_path):
    target = tmp_path / "fresh.json"
    atomic_write_text(target, "{}")
    assert target.read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["fresh.json"]
