"""The batch job on Ray: the same collection as the local job, resumable after a kill.

One local Ray (2 CPUs for actors, one more for readers) serves the in-process
tests; the kill test runs ``semsearch index --ray`` as a real process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from indexer.job import index_paths  # noqa: E402
from retriever import Collection  # noqa: E402
from retriever.search import vector_index  # noqa: E402
from tests.indexer.test_crash_resume import _generation, _repo, _snapshot, _write_corpus  # noqa: E402

WORKERS = 2


@pytest.fixture(scope="module")
def local_ray():
    """A Ray started once for the module; the job uses it as it is and leaves it running."""
    if ray.is_initialized():  # another module's Ray has other resources; Ray Data starts one again when used
        ray.shutdown()
    ray.init(
        address="local", num_cpus=WORKERS + 1, include_dashboard=False, log_to_driver=False, logging_level="WARNING"
    )
    yield
    ray.shutdown()


def _index(path: Path, model, inputs: list[Path], engine: str, **kwargs):
    with Collection.open_or_create(path, model) as col:
        return index_paths(col, inputs, engine=engine, workers=WORKERS, progress=False, **kwargs)


def _chunk_vectors(col: Collection) -> dict[str, np.ndarray]:
    """Each live document's chunk vectors, in chunk order."""
    id_of = {row.key: doc_id for doc_id, row in col.catalog.lookup(list(col.ids())).items()}
    out = {}
    for part in col.reader.current().parts:
        segment = part.segment
        vectors = vector_index.reconstruct(segment.index, np.arange(segment.n_chunks))
        for row in range(segment.n_docs):
            key = int(segment.keys[row])
            if key in id_of and (part.live_docs is None or part.live_docs[row]):
                out[id_of[key]] = vectors[segment.chunk_doc == row]
    return out


def test_ray_run_equals_local_run_on_scifact_slice(tmp_path, local_ray, scifact_slice, tiny_model_dir):
    local = _index(tmp_path / "local", tiny_model_dir, [scifact_slice], "local")
    distributed = _index(tmp_path / "ray", tiny_model_dir, [scifact_slice], "ray", batch_docs=96)
    assert local.to_dict() | {"seconds": 0} == distributed.to_dict() | {"seconds": 0}
    queries = [" ".join(json.loads(line)["text"].split()[:8]) for line in (scifact_slice / "queries.jsonl").open()][:10]
    with Collection.open(tmp_path / "local") as a, Collection.open(tmp_path / "ray") as b:
        ids = sorted(a.ids())
        assert ids == sorted(b.ids()) and len(ids) > 500
        assert all(a.chunk_spans(i) == b.chunk_spans(i) for i in ids)
        assert all(a.get(i) == b.get(i) for i in ids)
        va, vb = _chunk_vectors(a), _chunk_vectors(b)
        assert sorted(va) == ids == sorted(vb)
        cosines = np.concatenate([np.sum(va[i] * vb[i], axis=1) for i in ids])
        assert cosines.min() > 0.9999
        for query in queries:
            for mode in ("dense", "hybrid"):
                assert [h.id for h in a.search(query, k=10, mode=mode)] == [
                    h.id for h in b.search(query, k=10, mode=mode)
                ]


@pytest.fixture
def messy_inputs(tmp_path) -> list[Path]:
    """A corpus with a bad record and an id that a second file repeats, plus a text file."""
    notes = tmp_path / "in" / "notes.jsonl"
    notes.parent.mkdir()
    _write_corpus(notes, n=60)
    with notes.open("a", encoding="utf-8") as out:
        out.write("{not json\n")
    (tmp_path / "in" / "later.jsonl").write_text(
        json.dumps({"id": "doc-3", "text": "another doc-3, read first (sorted before notes.jsonl)"})
        + "\n"
        + json.dumps({"id": "extra", "text": "coffee by the river"})
        + "\n",
        encoding="utf-8",
    )
    (tmp_path / "in" / "readme.txt").write_text("plain text about snow and tea", encoding="utf-8")
    return [tmp_path / "in"]


def test_skips_duplicates_and_reruns_as_the_local_job(tmp_path, local_ray, messy_inputs, tiny_model_dir):
    local = _index(tmp_path / "local", tiny_model_dir, messy_inputs, "local", batch_docs=8)
    first = _index(tmp_path / "ray", tiny_model_dir, messy_inputs, "ray", batch_docs=8)
    assert first.to_dict() | {"seconds": 0} == local.to_dict() | {"seconds": 0}
    assert len(first.skipped) == 2 and any("duplicate id 'doc-3'" in error.reason for error in first.skipped)
    assert _snapshot(tmp_path / "ray") == _snapshot(tmp_path / "local")

    again = _index(tmp_path / "ray", tiny_model_dir, messy_inputs, "ray", batch_docs=8)
    assert again.written.chunks == 0 and again.indexed == 0
    assert len(again.written.unchanged) == len(first.written.added)

    (messy_inputs[0] / "readme.txt").unlink()
    pruned = _index(tmp_path / "ray", tiny_model_dir, messy_inputs, "ray", prune=True)
    assert pruned.written.deleted == [str((messy_inputs[0] / "readme.txt").resolve())]
    assert pruned.indexed == 0


def _ray_command(corpus: Path, collection: Path, model: Path) -> list[str]:
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
        "--ray",
        "--workers",
        str(WORKERS),
    ]


def test_sigkill_of_the_driver_then_rerun_matches_a_clean_run(tmp_path, tiny_model_dir):
    corpus = tmp_path / "notes.jsonl"
    _write_corpus(corpus, n=240)
    reference = tmp_path / "reference"
    _index(reference, tiny_model_dir, [corpus], "local", batch_docs=6)

    target = tmp_path / "col"
    command = _ray_command(corpus, target, tiny_model_dir)
    process = subprocess.Popen(command, cwd=_repo(), stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while _generation(target) < 3 and process.poll() is None:
            assert time.monotonic() < deadline, "the Ray job committed nothing"
            time.sleep(0.005)
        assert process.poll() is None, "the job finished before it could be killed; the test needs a bigger corpus"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    partial = _snapshot(target)  # consistent, or _snapshot's own check fails
    expected = _snapshot(reference)
    assert 0 < len(partial["hashes"]) < len(expected["hashes"])
    assert all(expected["hashes"][i] == h for i, h in partial["hashes"].items())

    rerun = subprocess.run(command + ["--json"], cwd=_repo(), capture_output=True, text=True, check=True)
    report = json.loads(rerun.stdout)
    assert report["unchanged"] == len(partial["hashes"])
    assert report["added"] == len(expected["hashes"]) - len(partial["hashes"])
    assert _snapshot(target) == expected
    assert not [p.name for p in (target / "segments").iterdir() if p.name.startswith(".staged-")]


def test_ray_flag_without_ray_is_one_line(tmp_path):
    code = "import sys; sys.modules['ray'] = None; from app.cli import main; sys.exit(main(sys.argv[1:]))"
    target = tmp_path / "col"
    result = subprocess.run(
        [sys.executable, "-c", code, "index", str(tmp_path), "-c", str(target), "--ray"],
        cwd=_repo(),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr == "semsearch: error: --ray needs Ray: pip install 'semsearch[ray]'\n"
    assert not target.exists()
