"""Scratch copies (``retriever.judgments.trial``) and measuring another model on one (``evaluate(model=...)``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from retriever import Collection, ModelMismatchError
from retriever.judgments.trial import scratch_copy, sweep_scratch_folders
from retriever.storage.leftovers import GRACE_S

DOCS = {
    "d1": "Green tea is steamed right after picking.",
    "d2": "Coffee beans are roasted at high temperature.",
    "d3": "Rivers flow into the sea through deltas.",
    "d4": "Snow covers the mountain peaks in winter.",
}
JUDGED = [
    {"query": "steamed green tea", "id": "d1"},
    {"query": "roasted coffee", "id": "d2"},
    {"query": "rivers to the sea", "id": "d3"},
    {"query": "snow in winter", "id": "d4"},
]


@pytest.fixture()
def collection(tmp_path, tiny_embedder):
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.upsert([{"id": key, "text": text} for key, text in DOCS.items()])
        yield col


def scratch_folders(folder):
    return [path for path in folder.iterdir() if ".scratch-" in path.name]


def test_a_scratch_copy_is_the_collection_and_writes_to_it_stay_there(collection, tmp_path):
    generation = collection.reader.current().generation
    with scratch_copy(collection) as copy:
        assert copy.root.parent.parent == tmp_path and copy.root != collection.root
        assert sorted(copy.ids()) == sorted(collection.ids())
        assert [h.id for h in copy.search("green tea", mode="bm25")] == [
            h.id for h in collection.search("green tea", mode="bm25")
        ]
        copy.upsert([{"id": "d9", "text": "Only in the copy."}])
        copy.delete(["d1"])
        assert "d9" in copy.ids()
    assert sorted(collection.ids()) == sorted(DOCS) and collection.reader.current().generation == generation
    assert scratch_folders(tmp_path) == []


def test_a_scratch_copy_re_embedded_with_another_model_leaves_the_collection_as_it_was(
    collection, perturbed_embedder, tmp_path
):
    model = dict(collection.model)
    vector = collection.search("green tea", mode="dense", k=1)[0].score
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    with scratch_copy(collection, perturbed_embedder, folder=folder) as copy:
        assert copy.root.parent.parent == folder
        assert copy.model["sha256"] == perturbed_embedder.weights_sha256 != model["sha256"]
        assert sorted(copy.ids()) == sorted(DOCS)
    assert collection.model == model and collection.search("green tea", mode="dense", k=1)[0].score == vector
    assert scratch_folders(folder) == [] and scratch_folders(tmp_path) == []


def test_a_folder_inside_the_collection_or_missing_is_refused(collection, tmp_path):
    from retriever import BadInputError

    for folder, message in [(collection.root / "segments", "inside the collection"), (tmp_path / "nope", "exist")]:
        with pytest.raises(BadInputError, match=message):
            with scratch_copy(collection, folder=folder):
                pass  # pragma: no cover - never reached
    assert scratch_folders(collection.root / "segments") == [] and scratch_folders(tmp_path) == []


def test_the_scratch_folder_goes_when_the_block_fails(collection, tmp_path):
    with pytest.raises(RuntimeError, match="the trial failed"):
        with scratch_copy(collection):
            assert len(scratch_folders(tmp_path)) == 1
            raise RuntimeError("the trial failed")
    assert scratch_folders(tmp_path) == []


def test_a_model_that_cannot_embed_the_same_chunks_is_refused_and_leaves_nothing(collection, tmp_path):
    from retriever import Embedder
    from tests.conftest import build_tiny_model

    short = Embedder(build_tiny_model(tmp_path / "short", max_seq_length=16), backend="torch")
    with pytest.raises(ModelMismatchError, match="reads at most 16 tokens|other tokens"):
        collection.evaluate(JUDGED, model=short)
    assert scratch_folders(tmp_path) == [] and collection.model["sha256"] != short.weights_sha256


def test_evaluate_with_a_model_measures_the_collection_switched_to_it(collection, perturbed_model_dir, tmp_path):
    measured = collection.evaluate(JUDGED, model=str(perturbed_model_dir), mode="dense", per_query=True)
    with scratch_copy(collection) as copy:
        copy.switch_model(str(perturbed_model_dir), progress=False)
        switched = copy.evaluate(JUDGED, mode="dense", per_query=True)
    assert measured.per_query == switched.per_query and measured.metrics == switched.metrics
    assert measured.settings["model"] == switched.settings["model"] != collection.model["name"]
    assert collection.evaluate(JUDGED, mode="dense").settings["model"] == collection.model["name"]
    assert scratch_folders(tmp_path) == []


def test_scratch_folders_of_killed_processes_are_swept(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    old = time.time() - GRACE_S - 60
    left = tmp_path / f".col.scratch-{dead_pid}-abc123"
    mine = tmp_path / f".col.scratch-{os.getpid()}-def456"
    fresh = tmp_path / f".col.scratch-{dead_pid}-ghi789"
    for folder in (left, mine, fresh):
        (folder / "collection").mkdir(parents=True)
    for folder in (left, mine):
        os.utime(folder, (old, old))
    other = tmp_path / "col"
    other.mkdir()
    os.utime(other, (old, old))
    assert sweep_scratch_folders(tmp_path) == [left]
    assert not left.exists() and mine.exists() and fresh.exists() and other.exists()
