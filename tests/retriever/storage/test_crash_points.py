"""A writer killed at each step of a commit (``os._exit``: no cleanup runs, as with SIGKILL).

The collection must read as its last committed generation, whole, and the
next writer must clean up and finish the same write to the same result.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from retriever import Collection
from retriever.storage.merging import MergePolicy
from retriever.storage.segment import SEGMENTS_DIR

REPO = Path(__file__).resolve().parents[3]
FIRST = [{"id": f"d{i}", "text": f"tea rivers note {i} " * (1 + i % 3), "metadata": {"n": i}} for i in range(12)]
SECOND = [{**d, "text": d["text"] + " revised"} for d in FIRST[:5]] + [
    {"id": f"e{i}", "text": f"coffee snow peaks {i}", "metadata": {"n": 100 + i}} for i in range(5)
]

# (what to patch, condition on its arguments) -> the process dies there
KILL_POINTS = {
    "between segment files": ("retriever.storage.segment.write_durably", "args[0].name == 'postings.rows.npy'"),
    "after a deletion file": ("retriever.storage.writer.write_deletions", "True"),
    "before the publish": ("retriever.storage.catalog.Catalog.publish", "True"),
    "after the publish, before HEAD": ("retriever.storage.writer.write_head", "True"),
    "while merging": ("retriever.storage.writer.merge", "True"),
}

CHILD = """
import importlib, os, sys, json
target, condition, path, model = sys.argv[1:5]
module_name, _, attr = target.rpartition(".")
try:
    owner = importlib.import_module(module_name)
except ModuleNotFoundError:
    module_name, _, cls = module_name.rpartition(".")
    owner = getattr(importlib.import_module(module_name), cls)
original = getattr(owner, attr)

def dying(*args, **kwargs):
    if eval(condition):
        os._exit(137)
    return original(*args, **kwargs)

setattr(owner, attr, dying)
from retriever import Collection
docs = json.loads(sys.stdin.read())
with Collection.open(path, model) as col:
    col.upsert(docs)
"""


def build(path: Path, model) -> Collection:
    col = Collection.create(path, model, merge_policy=MergePolicy(factor=2, floor_chunks=1000))
    col.add(FIRST)
    return col


def contents(col: Collection) -> dict:
    return {i: (d.text, d.metadata) for i in col.ids() for d in [col.get(i)]}


@pytest.fixture(scope="module")
def expected(tmp_path_factory, tiny_model_dir) -> tuple[dict, dict]:
    col = build(tmp_path_factory.mktemp("expected") / "col", tiny_model_dir)
    before = contents(col)
    col.upsert(SECOND)
    return before, contents(col)


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_killed_writer_leaves_a_whole_generation_and_the_next_one_finishes(tmp_path, tiny_model_dir, expected, point):
    import json

    before, after = expected
    path = tmp_path / "col"
    build(path, tiny_model_dir).close()
    target, condition = KILL_POINTS[point]
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), target, condition, str(path), str(tiny_model_dir)],
        input=json.dumps(SECOND),
        text=True,
        capture_output=True,
        cwd=REPO,
    )
    assert run.returncode == 137, run.stderr[-2000:]

    with Collection.open(path, tiny_model_dir) as col:
        now = contents(col)
        assert now in (before, after), "a kill left a mix of old and new versions"
        if point == "while merging":
            assert now == after  # the commit was published; only its merge died
        elif point == "after the publish, before HEAD":
            assert now == after
        else:
            assert now == before
        hits = {h.id for h in col.search("tea rivers", k=50)}
        assert hits == set(now)
        col.upsert(SECOND)  # the next writer cleans up, then finishes the write
        assert contents(col) == after
        state = col.catalog.state()
        on_disk = {p.name: sorted(f.name for f in p.glob("deleted.*")) for p in (path / SEGMENTS_DIR).iterdir()}
        files = {r.name: [f"deleted.{r.deletions}.npy", f"deleted.{r.deletions}.npy.crc32"] for r in state.segments}
        assert on_disk == {r.name: files[r.name] if r.deletions else [] for r in state.segments}
        assert (path / "HEAD").read_text().strip() == str(state.generation)
