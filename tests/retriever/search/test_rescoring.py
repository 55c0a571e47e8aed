"""Rescoring compressed codes' candidates: int8 ranks them, float32 scores only the best, estimates on request."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.search import int8_rows, rescoring, vector_index
from retriever.search.vector_index import IndexPolicy
from retriever.storage.vector_files import read_vectors, write_vectors

ALWAYS = IndexPolicy(codes="always")


def clustered(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, dim))
    rows = centres[rng.integers(0, 8, n)] + 0.5 * rng.normal(size=(n, dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def written(built, folder, int8: bool = True):
    write_vectors(built, folder, lambda path, fill: fill(path))
    info = dict(built.info) if int8 else {k: v for k, v in built.info.items() if k != "int8"}
    return read_vectors(folder, info)


@pytest.fixture
def gathered(monkeypatch):
    """How many float32 rows each gather of a rescoring reads."""
    counts = []
    gather = rescoring.gather_rows
    monkeypatch.setattr(rescoring, "gather_rows", lambda rows, ids: counts.append(len(ids)) or gather(rows, ids))
    return counts


def test_int8_ranks_the_candidates_and_float32_scores_only_the_best(tmp_path, gathered):
    vectors = clustered(2000, seed=1)
    built = written(vector_index.build(vectors, ALWAYS), tmp_path)
    assert built.int8 is not None and built.info["int8"] is True
    queries = clustered(10, seed=2)
    gathered.clear()  # the build's own tuning searched too
    scores, rows = vector_index.search(built, queries, 10, None, len(vectors), ALWAYS)
    assert gathered and max(gathered) == 2 * 10 + rescoring.EXACT_SLACK
    assert np.allclose(scores, np.take_along_axis(queries @ vectors.T, rows, axis=1), atol=1e-6)


def test_a_segment_without_int8_rows_rescores_every_candidate_from_float32(tmp_path, gathered):
    vectors = clustered(2000, seed=1)
    built = written(vector_index.build(vectors, ALWAYS), tmp_path, int8=False)
    assert built.int8 is None
    queries = clustered(10, seed=2)
    gathered.clear()  # the build's own tuning searched too
    scores, rows = vector_index.search(built, queries, 10, None, len(vectors), ALWAYS)
    assert min(gathered) >= 100  # every candidate the codes passed on
    assert np.allclose(scores, np.take_along_axis(queries @ vectors.T, rows, axis=1), atol=1e-6)
    (tmp_path / "int8").mkdir()
    with_int8 = written(vector_index.build(vectors, ALWAYS), tmp_path / "int8")
    assert np.array_equal(vector_index.search(with_int8, queries, 10, None, len(vectors), ALWAYS)[1], rows)


def test_estimates_are_the_int8_rankings_own_scores_and_exact_scores_mend_them(tmp_path, gathered):
    vectors = clustered(2000, seed=3)
    built = written(vector_index.build(vectors, ALWAYS), tmp_path)
    query = clustered(1, seed=4)
    gathered.clear()
    scores, rows = vector_index.search(built, query, 10, None, len(vectors), ALWAYS, estimates=True)
    assert not gathered  # no float32 row read
    assert np.allclose(scores[0], int8_rows.scores(built.int8, rows[0], query[0]), atol=1e-6)
    exact = vectors[rows[0]] @ query[0]
    assert np.abs(scores[0] - exact).max() < 0.01 and not np.allclose(scores[0], exact, atol=1e-7)
    shuffled = rows[0][::-1].copy()
    assert np.allclose(vector_index.exact_scores(built, shuffled, query[0]), vectors[shuffled] @ query[0], atol=1e-6)


def test_a_filter_that_lets_few_rows_through_ranks_them_by_int8_when_estimates_are_wanted(tmp_path, gathered):
    vectors = clustered(3000, seed=5)
    built = written(vector_index.build(vectors, ALWAYS), tmp_path)
    allowed = np.zeros(len(vectors), dtype=bool)
    allowed[::7] = True
    query = clustered(1, seed=6)
    truth = np.flatnonzero(allowed)[np.argsort(-(vectors[allowed] @ query[0]))[:10]]
    gathered.clear()
    scores, rows = vector_index.search(built, query, 10, allowed, int(allowed.sum()), ALWAYS, estimates=True)
    assert not gathered and allowed[rows[0]].all()  # no float32 row read; only rows let through
    assert np.allclose(scores[0], int8_rows.scores(built.int8, rows[0], query[0]), atol=1e-6)
    assert len(set(rows[0]) & set(truth)) >= 9
    exact_scores, exact_rows = vector_index.search(built, query, 10, allowed, int(allowed.sum()), ALWAYS)
    assert np.array_equal(exact_rows[0], truth)  # without estimates: every row let through, from float32


def test_int8_scores_of_many_rows_are_converted_a_batch_at_a_time(monkeypatch):
    rows = clustered(5000, seed=7)
    quantized = int8_rows.quantize(rows)
    ids, query = np.arange(0, 5000, 2), clustered(1, seed=8)[0]
    whole = int8_rows.scores(quantized, ids, query)
    monkeypatch.setattr(int8_rows, "_BATCH", 100)
    assert np.allclose(int8_rows.scores(quantized, ids, query), whole, atol=1e-6)
