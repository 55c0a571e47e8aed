"""OpenVINO on the CPU, reading the exported ONNX graph (fp32, bf16 where the CPU has it, or int8)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from retriever import threads as thread_settings
from retriever.backends import normalize_rows

_PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}


class OpenVinoBackend:
    """A model compiled by OpenVINO for this CPU.

    Args:
        graph: The ``.onnx`` file (see ``retriever.export``).
        precision: ``"fp32"``, ``"bf16"`` (inference precision hint) or
            ``"int8"`` (the int8-quantised graph, computed in f32 elsewhere).
        threads: Inference threads (default: the cores available).
    """

    def __init__(self, graph: Path, precision: str = "fp32", threads: int | None = None) -> None:
        import openvino

        self.name = f"openvino-{precision}"
        core = openvino.Core()
        # Compiled blobs are cached beside the graph: a later process loads in a fraction of the compile time.
        if os.access(Path(graph).parent, os.W_OK):
            core.set_property({"CACHE_DIR": str(Path(graph).parent / "openvino-cache")})
        config = thread_settings.openvino_config(threads) | {"INFERENCE_PRECISION_HINT": _PRECISION_HINTS[precision]}
        self._compiled = core.compile_model(str(graph), "CPU", config)
        self._request = self._compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request: calls take turns

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        with self._lock:
            result = self._request.infer({"input_ids": input_ids, "attention_mask": attention_mask})
            vectors = np.array(result[self._compiled.output(0)], dtype=np.float32)
        return normalize_rows(vectors)
