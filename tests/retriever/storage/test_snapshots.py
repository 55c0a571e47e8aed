"""Snapshots taken while another process commits and merges, and restores; on SQLite and PostgreSQL catalogs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from retriever import Collection
from retriever.errors import BadInputError
from retriever.storage.manifest import Manifest
from retriever.storage.merging import MergePolicy
from retriever.storage.snapshots import SnapshotReport, _copy_catalog, _try_copy
from tests.postgres import catalog_url, postgres_server, postgres_url  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[3]
BATCH = 5

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from retriever import Collection

    path, stop = sys.argv[1], Path(sys.argv[2])
    with Collection.open(path) as col:
        for batch in range(1, 400):
            if stop.exists():
                break
            col.add([{"id": f"w{batch}-{i}", "text": f"written in batch {batch}, document {i}"} for i in range(%d)])
            if batch %% 3 == 0:
                col.delete([f"w{batch - 1}-{i}" for i in range(%d)])
                col.compact()
"""
    % (BATCH, BATCH)
)


def consistent(path: Path) -> Collection:
    """Open a snapshot and check that every document of its catalog is in its segments, readable and findable."""
    col = Collection.open(path)
    ids = list(col.ids())
    assert len(ids) == len(col) and len(ids) % BATCH == 0
    for doc_id in ids:
        doc = col.get(doc_id)
        assert doc is not None and doc.text.startswith("written in batch") and col.chunk_spans(doc_id)
    assert col.search("written in batch", k=3, mode="bm25")
    return col


def test_snapshots_while_another_process_commits_deletes_and_merges(tmp_path, tiny_model_dir, catalog_url):
    source = tmp_path / "col"
    with Collection.create(source, tiny_model_dir, catalog_url=catalog_url) as col:
        col.add([{"id": f"seed-{i}", "text": f"written in batch 0, document {i}"} for i in range(BATCH)])
    stop = tmp_path / "stop"
    env = dict(os.environ)
    if catalog_url:  # the writer process may send the catalog's password to this server
        env["SEMSEARCH_CATALOG_HOSTS"] = make_url(catalog_url).host
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(source), str(stop)], cwd=REPO, env=env, stderr=subprocess.PIPE
    )
    reports: list[SnapshotReport] = []
    try:
        with Collection.open(source) as col:
            until = time.monotonic() + 90
            while len({r.generation for r in reports}) < 5 and len(reports) < 40 and time.monotonic() < until:
                reports.append(col.snapshot(tmp_path / f"snap{len(reports)}"))
                time.sleep(0.1)
    finally:
        stop.touch()
        _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err.decode()[-2000:]
    generations = [r.generation for r in reports]
    assert generations == sorted(generations) and len(set(generations)) >= 5  # the writer went on meanwhile
    for n, report in enumerate(reports):
        snap = consistent(tmp_path / f"snap{n}")
        assert len(snap) == report.documents and snap.info()["generation"] == report.generation
        assert Manifest.load(tmp_path / f"snap{n}").catalog_url is None  # the catalog is the file inside
        assert not list(tmp_path.glob(".snap*.partial-*"))
        snap.close()


def test_a_generation_merged_away_mid_copy_is_taken_again(tmp_path, tiny_model_dir):
    source = tmp_path / "col"
    with Collection.create(source, tiny_model_dir, merge_policy=MergePolicy(small_factor=10)) as col:
        for batch in range(3):
            col.add([{"id": f"b{batch}-{i}", "text": f"written in batch {batch}, document {i}"} for i in range(BATCH)])
        assert len(col.info()["segments"]) == 3

        def copy_then_merge(target: Path) -> None:
            _copy_catalog(col.catalog, target)
            col.compact()  # a writer merges the three segments away before their files are linked

        report = SnapshotReport(tmp_path / "snap")
        assert not _try_copy(source, copy_then_merge, tmp_path / "snap", report)
        assert not (tmp_path / "snap").exists() and not list(tmp_path.glob(".snap.partial-*"))
        report = col.snapshot(tmp_path / "snap")
    assert report.segments == 1 and report.documents == 3 * BATCH
    consistent(tmp_path / "snap").close()


def test_a_snapshot_flushes_every_file_and_folder_of_its_taggers_and_models(tmp_path, tiny_model_dir, monkeypatch):
    """``copytree`` leaves its copies in the page cache: each file and folder under ``taggers/`` and
    ``models/`` is fsynced before the snapshot is renamed into place, so none is empty after a crash."""
    from retriever.storage import snapshots

    source = tmp_path / "col"
    with Collection.create(source, tiny_model_dir) as col:
        col.add([{"id": f"d{i}", "text": f"document {i}"} for i in range(BATCH)])
        for path in (
            "taggers/topic/weights.npy",
            "taggers/topic/meta.json",
            "models/adapted-g1/config.json",
            "models/adapted-g1/tokenizer/vocab.txt",
        ):
            (source / path).parent.mkdir(parents=True, exist_ok=True)
            (source / path).write_text(f"contents of {path}")
        flushed = []
        monkeypatch.setattr(snapshots, "fsync_path", lambda path: flushed.append(Path(path)))
        monkeypatch.setattr(snapshots, "fsync_dir", lambda path: flushed.append(Path(path)))
        col.snapshot(tmp_path / "snap")
    work = next(path for path in flushed if path.name.startswith(".snap.partial-"))
    synced = {path.relative_to(work).as_posix() for path in flushed if work in path.parents}
    for tree in ("taggers", "models"):
        held = {path.relative_to(tmp_path / "snap").as_posix() for path in (tmp_path / "snap" / tree).rglob("*")}
        assert held and held | {tree} <= synced
    assert (tmp_path / "snap" / "models/adapted-g1/tokenizer/vocab.txt").read_text().endswith("vocab.txt")


def test_restore_makes_a_live_collection_and_leaves_the_snapshot_alone(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.add([{"id": f"d{i}", "text": f"written in batch 0, document {i}"} for i in range(BATCH)])
        col.delete(["d0"])
        col.add(
            [{"id": "d0", "text": "written in batch 1, the document again"}]
            + [{"id": f"e{i}", "text": f"written in batch 1, document {i}"} for i in range(BATCH)]
        )
        report = col.snapshot(tmp_path / "snap")
        expected = [(h.id, h.score) for h in col.search("document again", k=4, mode="bm25")]
    segment_file = next((tmp_path / "snap" / "segments").glob("*/text.bin"))
    assert report.linked > 0 and segment_file.stat().st_nlink >= 2  # hard links, same file system
    with Collection.restore(tmp_path / "snap", tmp_path / "live") as live:
        assert [(h.id, h.score) for h in live.search("document again", k=4, mode="bm25")] == expected
        live.add([{"id": "new", "text": "written in batch 2, document new"}])
        live.delete(["d1"])
        live.compact()
        assert len(live) == 2 * BATCH
    with consistent(tmp_path / "snap") as snap:
        assert len(snap) == 2 * BATCH and "new" not in snap and "d1" in snap


def test_bad_destinations_are_refused_before_anything_is_written(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.add([{"id": "a", "text": "written in batch 0"}])
        (tmp_path / "taken").mkdir()
        with pytest.raises(BadInputError, match="exists"):
            col.snapshot(tmp_path / "taken")
        with pytest.raises(BadInputError, match="inside the collection"):
            col.snapshot(tmp_path / "col" / "snap")
        with pytest.raises(BadInputError, match="no such directory"):
            col.snapshot(tmp_path / "missing" / "snap")
        col.snapshot(tmp_path / "snap")
    with pytest.raises(BadInputError, match="exists"):
        Collection.restore(tmp_path / "snap", tmp_path / "taken")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["col", "snap", "taken"]


def test_a_collection_switched_to_its_own_adapted_model_is_whole_without_its_source(tmp_path, tiny_model_dir):
    """``adapt -c`` keeps the model in ``DIR/models``: a snapshot and a restore carry it and name their copy."""
    import shutil

    from retriever import Embedder
    from tests.retriever.storage.test_model_switch import perturbed

    source = tmp_path / "col"
    with Collection.create(source, Embedder(tiny_model_dir, backend="torch-fp32")) as col:
        col.add([{"id": f"d{i}", "text": f"rivers and tea, document {i} of the batch"} for i in range(BATCH)])
        adapted = perturbed(tiny_model_dir, source / "models" / "adapted-g1", seed=3)
        col.switch_model(Embedder(adapted, backend="torch-fp32"), progress=False)
        expected = [(h.id, round(h.score, 5)) for h in col.search("rivers document 3", k=5, mode="dense")]
        col.snapshot(tmp_path / "snap")
    shutil.rmtree(source)
    assert Manifest.load(tmp_path / "snap").model["name"] == str(
        (tmp_path / "snap" / "models" / "adapted-g1").resolve()
    )
    with Collection.open(tmp_path / "snap") as snap:
        assert [(h.id, round(h.score, 5)) for h in snap.search("rivers document 3", k=5, mode="dense")] == expected
    Collection.restore(tmp_path / "snap", tmp_path / "live").close()
    shutil.rmtree(tmp_path / "snap")
    with Collection.open(tmp_path / "live") as live:
        assert live.model["name"].startswith(str((tmp_path / "live" / "models").resolve()))
        assert [(h.id, round(h.score, 5)) for h in live.search("rivers document 3", k=5, mode="dense")] == expected
