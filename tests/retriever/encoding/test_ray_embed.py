"""Embedding a Ray Dataset column on a local Ray with 2 CPUs, against ``Embedder.embed``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TINY_CORPUS

REPO = Path(__file__).resolve().parents[3]
TEXTS = [line.strip() for line in TINY_CORPUS.replace(". ", ".\n").splitlines() if line.strip()]
TEXTS += ["", "tea " * 200]  # an empty text, and one longer than the tiny model's window


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray for the session: 2 CPUs, no dashboard."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'semsearch[ray]'")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


def _dataset(ray):
    rows = [{"id": f"t{i}", "text": text} for i, text in enumerate(TEXTS)]
    return ray.data.from_items(rows, override_num_blocks=4)


def _assert_same_vectors(rows, column, expected_by_id):
    assert sorted(row["id"] for row in rows) == sorted(expected_by_id)
    for row in rows:
        vector = np.asarray(row[column])
        expected = expected_by_id[row["id"]]
        assert vector.dtype == np.float32 and vector.shape == expected.shape
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
        assert float(vector @ expected) >= 0.9999, row["id"]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_embed_dataset_equals_embedder_with_two_actors(local_ray, tiny_model_dir, tiny_embedder):
    from retriever.encoding.ray_embed import embed_dataset

    expected = dict(zip([f"t{i}" for i in range(len(TEXTS))], tiny_embedder.embed(TEXTS, on_overflow="warn")))
    out = embed_dataset(_dataset(local_ray), "text", tiny_model_dir, batch_size=4, concurrency=2)
    rows = out.take_all()
    assert len(rows) == len(TEXTS)
    assert {row["id"]: row["text"] for row in rows} == {f"t{i}": text for i, text in enumerate(TEXTS)}
    _assert_same_vectors(rows, "embedding", expected)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_callable_class_works_in_map_batches(local_ray, tiny_embedder):
    from retriever.encoding.ray_embed import EmbedBatches

    expected = dict(zip([f"t{i}" for i in range(len(TEXTS))], tiny_embedder.embed(TEXTS, on_overflow="warn")))
    out = _dataset(local_ray).map_batches(
        EmbedBatches,
        fn_constructor_kwargs={"column": "text", "model": tiny_embedder.name, "output_column": "vec"},
        batch_size=5,
        batch_format="numpy",
        compute=local_ray.data.ActorPoolStrategy(size=1),
    )
    _assert_same_vectors(out.take_all(), "vec", expected)


def test_an_embedder_travels_as_its_model_and_bad_arguments_are_refused(local_ray, tiny_embedder):
    from retriever.encoding.ray_embed import _model_location, embed_dataset

    assert _model_location(tiny_embedder) == tiny_embedder.name
    assert _model_location(None) is None
    with pytest.raises(ValueError, match="concurrency"):
        embed_dataset(_dataset(local_ray), "text", tiny_embedder, concurrency=0)


def test_without_ray_the_import_fails_with_one_line_saying_what_to_install():
    code = "import sys; sys.modules['ray'] = None; sys.modules['ray.data'] = None; import retriever.encoding.ray_embed"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: retriever.encoding.ray_embed needs Ray: pip install 'semsearch[ray]'"
    )
