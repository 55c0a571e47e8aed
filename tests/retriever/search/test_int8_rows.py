"""int8 copies of float32 rows: within half a step of each value, estimates within their bound, files checked."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.errors import CorruptCollectionError
from retriever.search import int8_rows
from retriever.storage.int8_files import read_int8_rows, write_int8_rows
from retriever.storage.segment_format import INT8_CODES_FILE, INT8_SCALE_FILE


def unit_rows(n: int, dim: int = 48, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_each_value_is_within_half_a_step_and_each_dimensions_peak_is_127():
    rows = unit_rows(500)
    rows[:, 3] = 0.0  # a dimension no row uses
    quantized = int8_rows.quantize(rows)
    assert quantized.codes.dtype == np.int8 and quantized.codes.shape == rows.shape
    assert quantized.scale.dtype == np.float32 and quantized.scale.shape == (48,)
    error = np.abs(quantized.codes * quantized.scale - rows)
    assert (error <= quantized.scale / 2 + 1e-7).all()
    peaks = np.abs(quantized.codes.astype(np.int32)).max(axis=0)
    assert (np.delete(peaks, 3) == 127).all() and peaks[3] == 0 and quantized.scale[3] == 1.0


def test_quantizing_in_batches_gives_what_one_pass_gives(monkeypatch):
    rows = unit_rows(1000, seed=1)
    whole = int8_rows.quantize(rows)
    monkeypatch.setattr(int8_rows, "_BATCH", 64)
    batched = int8_rows.quantize(rows)
    assert np.array_equal(whole.codes, batched.codes) and np.array_equal(whole.scale, batched.scale)


def test_estimates_are_off_by_no_more_than_the_steps_allow():
    rows, query = unit_rows(800, seed=2), unit_rows(1, seed=3)[0]
    quantized = int8_rows.quantize(rows)
    ids = np.array([5, 700, 3, 3, 42])
    estimated = int8_rows.scores(quantized, ids, query)
    bound = float(np.abs(query) @ quantized.scale) / 2
    assert estimated.dtype == np.float32 and estimated.shape == (5,)
    assert np.abs(estimated - rows[ids] @ query).max() <= bound + 1e-6
    assert bound < 0.01  # a ranking tier, not noise


def test_written_rows_read_back_mapped_and_checked(tmp_path):
    quantized = int8_rows.quantize(unit_rows(300, seed=4))
    write_int8_rows(quantized, tmp_path, lambda path, fill: fill(path))
    read = read_int8_rows(tmp_path, 300, 48)
    assert np.array_equal(read.codes, quantized.codes) and np.array_equal(read.scale, quantized.scale)
    with pytest.raises(
        CorruptCollectionError, match=r"vectors\.int8\.npy holds int8 \(300, 48\), not int8 \(301, 48\)"
    ):
        read_int8_rows(tmp_path, 301, 48)
    (tmp_path / INT8_SCALE_FILE).write_bytes(b"not an array")
    with pytest.raises(CorruptCollectionError, match="cannot read int8 rescoring rows"):
        read_int8_rows(tmp_path, 300, 48)
    (tmp_path / INT8_CODES_FILE).unlink()
    with pytest.raises(FileNotFoundError):
        read_int8_rows(tmp_path, 300, 48)
