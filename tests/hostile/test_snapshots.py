"""Crafted snapshot and collection folders, and hostile destinations: a snapshot or restore copies only what is
the folder's own, or stops with a SemsearchError and leaves nothing behind.

Never a hang (a FIFO), a byte of a file outside the folder (a link), a link
in the copy, a work folder left over, or a copy outside the destination.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retriever import Collection, SemsearchError
from retriever.storage.manifest import MANIFEST
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.segment_files import SEGMENT_NAME
from tests.hostile.conftest import case, examples
from tests.hostile.strategies import crafted_snapshot, hostile_destinations
from tests.hostile.test_collections import everything, fresh_copy

SECRET = b"AWS_SECRET=the key of another user\n" * 20


def first_segment(path: Path) -> Path:
    return sorted(p for p in (path / SEGMENTS_DIR).iterdir() if SEGMENT_NAME.fullmatch(p.name))[0]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _change_manifest(folder: Path, change: str, outside: Path) -> None:
    path = folder / MANIFEST
    data = json.loads(path.read_text())
    model = data["model"]
    if change == "not json":
        path.write_bytes(b"\xff{not json")
        return
    if change == "a list":
        path.write_text(json.dumps([data]))
        return
    edits = {
        "model sha256": lambda: model.update(sha256="0" * 64),
        "model dim": lambda: model.update(dim=model["dim"] + 1),
        "format": lambda: data.update(format="another-format"),
        "format version": lambda: data.update(format_version=99),
        "catalog url": lambda: data.update(catalog_url=f"sqlite:///{outside / 'catalog.sqlite'}"),
        "pending switch": lambda: data.update(
            model={**model, "sha256": "f" * 64}, model_since=10**6, previous_model=model
        ),
        "model outside": lambda: model.update(name=str(outside / "model")),
        "unknown field": lambda: data.update(injected={"x": 1}),
    }
    edits[change]()
    path.write_text(json.dumps(data))


def plant(folder: Path, kind: str, place: str, outside: Path) -> None:
    """Craft ``folder`` as ``tests.hostile.strategies.crafted_snapshot`` describes; secrets go in ``outside``."""
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_bytes(SECRET)
    if kind == "manifest":
        return _change_manifest(folder, place, outside)
    target = folder / place.replace("SEG", str(first_segment(folder).relative_to(folder)))
    target.parent.mkdir(parents=True, exist_ok=True)
    if kind == "foreign":
        (target.parent / "extra-link").symlink_to(outside / "secret.txt")
        (target.parent / "extra-file.npy").write_bytes(b"not a file of the folder")
        return
    if kind == "link-folder":
        away = outside / f"moved-{target.name}"
        if target.exists():
            shutil.move(str(target), str(away))
        else:
            away.mkdir()
        target.symlink_to(away, target_is_directory=True)
        return
    _remove(target)
    if kind == "link":
        target.symlink_to(outside / "secret.txt")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
        (target / "inside").write_bytes(b"a file in a folder where a file belongs")


def within_limit(action, limit_s: float = 30.0) -> dict:
    """``action()`` in a thread: ``{"answer": ...}`` or ``{"error": exc}``; fails when it hangs."""
    result: dict = {}

    def run():
        try:
            result["answer"] = action()
        except BaseException as exc:  # noqa: BLE001 - judged by the caller
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), "the copy hangs"
    return result


def assert_own_copy_or_refused(result: dict, dest: Path, what) -> None:
    """A refusal is a SemsearchError that leaves no destination and no work folder; a copy holds only regular
    files and folders of its own, none of the secret's bytes, and opens (or is refused) with a SemsearchError."""
    leftovers = list(dest.parent.glob(f".{dest.name}.partial-*"))
    assert not leftovers, (what, leftovers)
    if "error" in result:
        error = result["error"]
        assert isinstance(error, SemsearchError), f"{what}: {type(error).__name__}: {error}"
        assert not os.path.lexists(dest), what
        return
    for path in dest.rglob("*"):
        mode = path.lstat().st_mode
        assert stat.S_ISDIR(mode) or stat.S_ISREG(mode), (what, path)
        assert stat.S_ISDIR(mode) or SECRET[:20] not in path.read_bytes(), (what, path)


@settings(max_examples=examples(30))
@given(craft=crafted_snapshot())
def test_a_crafted_snapshot_is_restored_only_as_its_own(hostile_collection, tiny_model_dir, tmp_path_factory, craft):
    kind, place = craft
    with case("crafted snapshot: restore"):
        base = tmp_path_factory.mktemp("crafted-snapshot")
        with Collection.open(hostile_collection) as col:
            col.snapshot(base / "snap")
        plant(base / "snap", kind, place, base / "outside")
        dest = base / "live"
        result = within_limit(lambda: Collection.restore(base / "snap", dest).close())
        assert_own_copy_or_refused(result, dest, craft)
        if "answer" in result:
            opened = within_limit(lambda: everything(dest, tiny_model_dir))
            assert "answer" in opened or isinstance(opened["error"], SemsearchError), (craft, opened)


@settings(max_examples=examples(30))
@given(craft=crafted_snapshot())
def test_a_crafted_collection_is_snapshotted_only_as_its_own(hostile_collection, tmp_path_factory, craft):
    kind, place = craft
    with case("crafted collection: snapshot"):
        path = fresh_copy(hostile_collection, tmp_path_factory)
        plant(path, kind, place, path.parent / "outside")
        dest = path.parent / "snap"

        def take():
            with Collection.open(path) as col:
                return col.snapshot(dest)

        assert_own_copy_or_refused(within_limit(take), dest, craft)


def _listing(folder: Path) -> set[Path]:
    """Everything under ``folder`` but SQLite's own companions of the catalog, which come and go as it reads."""
    return {p for p in folder.rglob("*") if not p.name.endswith(("-wal", "-shm"))}


@settings(max_examples=examples(40))
@given(name=hostile_destinations())
def test_a_hostile_destination_is_refused_or_is_exactly_the_new_folder_named(
    hostile_collection, tmp_path_factory, name
):
    with case("snapshot destination: Python"):
        base = tmp_path_factory.mktemp("destinations")
        path = base / "col"
        shutil.copytree(hostile_collection, path)
        (base / "other").mkdir()
        (base / "link").symlink_to(path, target_is_directory=True)
        (base / "file").write_text("a file")
        started_in = os.getcwd()
        os.chdir(base)  # relative names are relative to here
        try:
            with Collection.open(path) as col:
                before = _listing(base)
                result = within_limit(lambda: col.snapshot(name))
        finally:
            os.chdir(started_in)
        if "error" in result:
            assert isinstance(result["error"], SemsearchError), f"{name!r}: {result['error']!r}"
            assert _listing(base) == before, name  # nothing written anywhere
            return
        dest = result["answer"].path
        assert not dest.resolve().is_relative_to(path.resolve()), name  # never inside the collection
        assert {p for p in _listing(base) if not p.is_relative_to(dest)} - {dest} <= before, name
        with Collection.open(dest) as snap:
            assert len(snap) == len(list(snap.ids()))


@pytest.fixture(scope="module")
def snapshot_client(hostile_collection, tmp_path_factory):
    """The API over a copy of the hostile collection, with a snapshot root beside it and a second collection."""
    from fastapi.testclient import TestClient

    from app.server import create_app

    base = tmp_path_factory.mktemp("http-snapshots")
    shutil.copytree(hostile_collection, base / "docs")
    shutil.copytree(hostile_collection, base / "papers")
    app = create_app(
        base / "docs",
        api_key="admin-key",
        warm_up=False,
        deadline_s=60,
        snapshot_root=base / "snapshots",
        max_snapshots=10_000,
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, base


@settings(max_examples=examples(40))
@given(name=hostile_destinations(), field=st.sampled_from(["name", "dest"]))
def test_a_hostile_snapshot_name_over_http_lands_only_under_the_snapshot_root(snapshot_client, name, field):
    client, base = snapshot_client
    with case("snapshot destination: HTTP"):
        outside = {p for p in base.rglob("*") if not p.is_relative_to(base / "snapshots")}
        response = client.post(
            "/admin/snapshot",
            content=json.dumps({field: name}),  # lone surrogates as \\u escapes
            headers={"X-API-Key": "admin-key", "Content-Type": "application/json"},
        )
        assert response.status_code in (200, 409, 422), (name, response.status_code, response.text)
        assert {p for p in base.rglob("*") if not p.is_relative_to(base / "snapshots")} == outside, name
        body = response.json()
        if response.status_code != 200:
            assert str(base) not in response.text and "detail" in body  # no server path in the answer
            return
        assert field == "name" and body["path"] == f"docs/{name}" and body["name"] == name
        assert (base / "snapshots" / "docs" / name / "manifest.json").is_file()
        assert client.delete(f"/admin/snapshots/{name}", headers={"X-API-Key": "admin-key"}).status_code == 200
