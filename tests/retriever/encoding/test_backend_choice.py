"""``backend="auto"``'s decision (``choice.measure``) on scripted backends timed by a fake clock, and its helpers."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.encoding.backends import choice


def test_min_cosine_counts_a_nan_vector_as_no_match():
    unit = np.eye(2, dtype=np.float32)
    assert choice.min_cosine(unit, unit) == pytest.approx(1.0)
    assert choice.min_cosine(np.array([[1.0, 0.0], [np.nan, np.nan]], dtype=np.float32), unit) == -1.0


def test_describe_cpu_names_model_cores_and_flags_or_says_none_matter():
    info = {"model": "Example CPU", "cores": 2, "flags": ["avx2", "avx512_bf16"]}
    assert choice.describe_cpu(info) == "Example CPU, 2 cores available, flags avx2 avx512_bf16"
    assert choice.describe_cpu(info | {"flags": []}).endswith("flags (none of interest)")


class _ScriptedBackends:
    """Backends for ``choice.measure`` that cost set seconds on a fake clock and give set vectors.

    ``seconds[name]`` is ``(per passage batch, per query)``, ``None`` for a
    backend that cannot open; ``lossy`` names give vectors off the others'
    (cosine about 0.99), ``failing_queries`` names fail on single queries.
    The first timed passage batch of each backend costs 0.4 s more, as a burst
    of other work would.
    """

    def __init__(self, seconds: dict, lossy=(), failing_queries=()) -> None:
        self.seconds, self.lossy, self.failing_queries = seconds, set(lossy), set(failing_queries)
        self.now, self.batches = 0.0, {name: 0 for name in seconds}
        self._rows = np.random.default_rng(3).normal(size=(64, 16))

    def perf_counter(self) -> float:
        return self.now

    def open(self, name: str) -> str:
        if self.seconds[name] is None:
            raise RuntimeError(f"{name} is not installed")
        return name

    def encode(self, name: str, texts: list[str]) -> np.ndarray:
        passage_s, query_s = self.seconds[name]
        if len(texts) == 1 and name in self.failing_queries:
            raise ValueError("no graph for one row")
        if len(texts) > 1:
            self.batches[name] += 1
        self.now += query_s if len(texts) == 1 else passage_s + (0.4 if self.batches[name] == 2 else 0.0)
        vectors = self._rows[[sum(map(ord, t)) % 64 for t in texts]] + (0.1 if name in self.lossy else 0.0)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def measure(self, names, monkeypatch) -> dict:
        monkeypatch.setattr(choice, "time", self)  # measure reads the time through time.perf_counter alone
        return choice.measure(names, self.open, self.encode, passages=4, repeats=3)


def test_measure_keeps_the_fastest_faithful_backend_and_the_fastest_one_without_torch_for_queries(monkeypatch):
    seconds = {
        "torch-fp32": (0.30, 0.001),  # the reference; the fastest on queries, but queries must not need torch
        "onnx-fp32": (0.20, 0.004),
        "openvino-fp32": (0.25, 0.003),
        "openvino-bf16": (0.10, 0.002),  # the fastest, and lossy: never kept
        "torch-bf16": None,
    }
    scripted = _ScriptedBackends(seconds, lossy={"openvino-bf16"})
    result = scripted.measure(list(seconds), monkeypatch)
    assert (result["backend"], result["query_backend"]) == ("onnx-fp32", "openvino-fp32")
    measured = result["measured"]
    assert list(measured) == list(seconds)
    assert measured["torch-bf16"] == {"error": "RuntimeError: torch-bf16 is not installed"}
    assert measured["openvino-bf16"]["min_cosine"] < choice.MIN_COSINE <= measured["onnx-fp32"]["min_cosine"]
    for name in ("torch-fp32", "onnx-fp32", "openvino-fp32"):  # the fastest passage batch, the median query
        assert measured[name]["passages_s"] == pytest.approx(seconds[name][0], abs=2e-6)
        assert measured[name]["query_s"] == pytest.approx(seconds[name][1], abs=2e-6)
    assert result["min_cosine_bound"] == choice.MIN_COSINE


def test_measure_falls_back_to_the_reference_where_no_other_backend_qualifies(monkeypatch):
    seconds = {"torch-fp32": (0.30, 0.001), "onnx-fp32": (0.10, 0.002), "openvino-bf16": (0.05, 0.001)}
    scripted = _ScriptedBackends(seconds, lossy={"openvino-bf16"}, failing_queries={"onnx-fp32"})
    result = scripted.measure(list(seconds), monkeypatch)
    assert result["measured"]["onnx-fp32"] == {"error": "ValueError: no graph for one row"}
    assert (result["backend"], result["query_backend"]) == ("torch-fp32", "torch-fp32")  # no faithful one without torch

    everything_fails = _ScriptedBackends({"torch-fp32": None, "onnx-fp32": None})
    result = everything_fails.measure(["torch-fp32", "onnx-fp32"], monkeypatch)
    assert (result["backend"], result["query_backend"]) == ("torch-fp32", "torch-fp32")
    assert all("error" in figures for figures in result["measured"].values())
