"""Snapshots and restores against planted links, concurrent writers of another kind, killed runs and each other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from retriever import Collection, Embedder
from retriever.errors import BadInputError, CorruptCollectionError
from retriever.search import vector_index
from retriever.storage import leftovers, snapshots
from retriever.storage.manifest import Manifest
from retriever.upgrading import add_int8_rows
from tests.retriever.storage.test_int8_upgrade import strip_int8
from tests.retriever.storage.test_model_switch import perturbed

REPO = Path(__file__).resolve().parents[3]
SECRET = "AWS_SECRET=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DOCS = [{"id": f"d{i}", "text": f"rivers and tea, document {i} of the batch"} for i in range(5)]


@pytest.fixture
def snapshot(tmp_path, tiny_model_dir) -> Path:
    """A snapshot of a five-document collection, and a secret file beside it at ``tmp_path/secret.txt``."""
    (tmp_path / "secret.txt").write_text(SECRET)
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.add(DOCS)
        col.snapshot(tmp_path / "snap")
    return tmp_path / "snap"


def holds_secret(folder: Path) -> bool:
    return any(SECRET.encode() in path.read_bytes() for path in folder.rglob("*") if path.is_file())


def test_a_segment_file_linked_to_a_file_outside_is_refused_by_restore(snapshot, tmp_path):
    text = next((snapshot / "segments").glob("*/text.bin"))
    text.unlink()
    text.symlink_to(tmp_path / "secret.txt")
    with pytest.raises(CorruptCollectionError, match=r"text.bin is a symbolic link"):
        Collection.restore(snapshot, tmp_path / "live")
    assert not (tmp_path / "live").exists() and not list(tmp_path.glob(".live.partial-*"))


def test_a_tagger_or_model_file_linked_outside_is_refused_by_restore_and_snapshot(snapshot, tmp_path):
    for tree, name in (("taggers/topic", "meta.json"), ("models/adapted-g1", "config.json")):
        (snapshot / tree).mkdir(parents=True)
        (snapshot / tree / name).symlink_to(tmp_path / "secret.txt")
        with pytest.raises(CorruptCollectionError, match=rf"{name} is a symbolic link"):
            Collection.restore(snapshot, tmp_path / "live")
        live = tmp_path / "col"  # a live collection with the same planted link copies none of it either
        (live / tree).mkdir(parents=True)
        (live / tree / name).symlink_to(tmp_path / "secret.txt")
        with Collection.open(live) as col, pytest.raises(CorruptCollectionError, match="symbolic link"):
            col.snapshot(tmp_path / "again")
        for planted in (snapshot, live):
            (planted / tree / name).unlink()
    assert not (tmp_path / "live").exists() and not (tmp_path / "again").exists()
    with Collection.restore(snapshot, tmp_path / "live") as restored:
        assert len(restored) == len(DOCS) and not holds_secret(tmp_path / "live")


def test_a_linked_segment_folder_and_a_fifo_are_refused(snapshot, tmp_path):
    segment = next((snapshot / "segments").glob("s*"))
    os.rename(segment, tmp_path / "elsewhere")
    segment.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(CorruptCollectionError, match="not a folder of the collection's own"):
        Collection.restore(snapshot, tmp_path / "live")
    segment.unlink()
    os.rename(tmp_path / "elsewhere", segment)
    (segment / "doc_lengths.npy").unlink()
    os.mkfifo(segment / "doc_lengths.npy")  # an open without O_NONBLOCK would hang here
    with pytest.raises(CorruptCollectionError, match="doc_lengths.npy is not a regular file"):
        Collection.restore(snapshot, tmp_path / "live")
    assert not (tmp_path / "live").exists()


def test_a_foreign_file_in_a_segment_folder_is_not_carried(snapshot, tmp_path):
    segment = next((snapshot / "segments").glob("s*"))
    (segment / "notes.txt").write_text("not a file of the segment")
    with Collection.restore(snapshot, tmp_path / "live") as live:
        assert len(live) == len(DOCS) and live.check().ok
    assert not (tmp_path / "live" / "segments" / segment.name / "notes.txt").exists()


def test_a_snapshot_names_the_model_of_the_generation_it_copies(tmp_path, tiny_model_dir):
    """Another handle (as another process would) switches the model after this one loaded the manifest."""
    path = tmp_path / "col"
    with Collection.create(path, Embedder(tiny_model_dir, backend="torch-fp32")) as col:
        col.add(DOCS)
    with Collection.open(path) as stale:
        stale.search("rivers", k=1, mode="bm25")
        with Collection.open(path) as switching:
            adapted = perturbed(tiny_model_dir, tmp_path / "adapted", seed=3)
            switching.switch_model(Embedder(adapted, backend="torch-fp32"), progress=False)
            new_model = switching.manifest.model
            expected = [(h.id, round(h.score, 5)) for h in switching.search("rivers document 3", k=5, mode="dense")]
        report = stale.snapshot(tmp_path / "snap")
    written = Manifest.load(tmp_path / "snap")
    assert written.model["sha256"] == new_model["sha256"] and written.model_at(report.generation) == new_model
    with Collection.open(tmp_path / "snap") as snap:
        assert [(h.id, round(h.score, 5)) for h in snap.search("rivers document 3", k=5, mode="dense")] == expected


def test_a_switch_recorded_but_not_published_is_not_in_the_snapshot(tmp_path, tiny_model_dir):
    path = tmp_path / "col"
    with Collection.create(path, Embedder(tiny_model_dir, backend="torch-fp32")) as col:
        col.add(DOCS)
        generation, old_model = col.info()["generation"], col.manifest.model
    manifest = Manifest.load(path)  # a switch saves its manifest, then publishes: taken in between
    manifest.switched({**old_model, "name": "another", "sha256": "f" * 64}, generation + 1).save(path)
    with Collection.open(path) as col:
        report = col.snapshot(tmp_path / "snap")
    written = Manifest.load(tmp_path / "snap")
    assert report.generation == generation and written.model == old_model
    assert written.previous_model is None and written.model_since == 0


def test_a_snapshot_during_an_int8_upgrade_takes_each_segment_whole(tmp_path, tiny_embedder, monkeypatch):
    rng = np.random.default_rng(5)
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, index_policy=vector_index.IndexPolicy(codes="always")) as col:
        vectors = rng.normal(size=(40, tiny_embedder.dim)).astype(np.float32)
        col.add([{"id": f"v{i}", "text": f"vector {i}"} for i in range(40)], vectors=vectors)
        folder = path / "segments" / col.info()["segments"][0]["name"]
        strip_int8(folder)
        link_or_copy, upgraded = snapshots.link_or_copy, []

        def upgrade_before_the_segment_json(source: Path, target: Path, counts: dict) -> None:
            if source.name == "segment.json" and not upgraded:  # the upgrade lands between the listing and it
                upgraded.append(add_int8_rows(path, progress=False))
            link_or_copy(source, target, counts)

        monkeypatch.setattr(snapshots, "link_or_copy", upgrade_before_the_segment_json)
        report = col.snapshot(tmp_path / "snap")
    assert upgraded == [1] and report.tries == 2
    copied = tmp_path / "snap" / "segments" / folder.name
    meta = json.loads((copied / "segment.json").read_text())
    assert meta["index"]["int8"] and set(meta["checksums"]) <= {p.name for p in copied.iterdir()}
    with Collection.open(tmp_path / "snap") as snap:
        assert snap.check().ok and len(snap) == 40


def test_two_snapshots_to_one_destination_in_one_process_refuse_the_second(tmp_path, tiny_model_dir, monkeypatch):
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.add(DOCS)
        inside, go_on = threading.Event(), threading.Event()
        copy_segment = snapshots._copy_segment

        def held(*args, **kwargs):
            if threading.current_thread() is not threading.main_thread():
                inside.set()
                assert go_on.wait(60)
            return copy_segment(*args, **kwargs)

        monkeypatch.setattr(snapshots, "_copy_segment", held)
        outcome = {}
        first = threading.Thread(target=lambda: outcome.update(report=col.snapshot(tmp_path / "snap")))
        first.start()
        try:
            assert inside.wait(60)
            with pytest.raises(BadInputError, match="being taken"):
                col.snapshot(tmp_path / "snap")
        finally:
            go_on.set()
            first.join(60)
    assert outcome["report"].documents == len(DOCS)
    with Collection.open(tmp_path / "snap") as snap:
        assert len(snap) == len(DOCS) and snap.check().ok
    assert not list(tmp_path.glob(".snap.partial-*"))


KILLED_MID_COPY = textwrap.dedent("""
    import os, signal, sys
    from retriever import Collection
    from retriever.storage import snapshots

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    snapshots._copy_segment = killed
    with Collection.open(sys.argv[1]) as col:
        col.snapshot(sys.argv[2])
""")


def test_the_work_folder_of_a_killed_snapshot_is_swept_once_its_process_is_gone(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.add(DOCS)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MID_COPY, str(tmp_path / "col"), str(tmp_path / "snap")],
        cwd=REPO,
        capture_output=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    (left,) = tmp_path.glob(".snap.partial-*")
    assert (left / "catalog.sqlite").is_file()  # it got as far as the catalog
    alive = tmp_path / f".other.partial-{os.getpid()}-0123abcd"  # this process's: in use
    alive.mkdir()
    old = os.path.getmtime(left) - leftovers.GRACE_S - 60
    for path in (left, alive):
        os.utime(path, (old, old))
    with Collection.open(tmp_path / "col") as col:
        col.snapshot(tmp_path / "snap")
    assert not left.exists() and alive.is_dir()
    with Collection.open(tmp_path / "snap") as snap:
        assert len(snap) == len(DOCS)


def test_folders_whose_names_read_as_url_parts_hold_collections_and_snapshots(tmp_path, tiny_model_dir):
    odd = tmp_path / "a?b#c%d"  # a catalog URL built by pasting the path would end at '?' or '#'
    odd.mkdir()
    with Collection.create(odd / "col", tiny_model_dir) as col:
        col.add(DOCS)
        report = col.snapshot(odd / "snap?1")
    assert report.documents == len(DOCS) and not list(odd.glob(".*"))
    with Collection.restore(odd / "snap?1", odd / "live#2") as live:
        assert len(live) == len(DOCS) and live.check().ok
    assert sorted(p.name for p in odd.iterdir()) == ["col", "live#2", "snap?1"]
