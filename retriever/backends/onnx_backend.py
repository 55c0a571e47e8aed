"""ONNX Runtime on the CPU, running the exported graph (fp32, or int8 dynamic quantisation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retriever import threads as thread_settings
from retriever.backends import normalize_rows


class OnnxBackend:
    """An ONNX Runtime session over ``graph``; safe to call from several threads.

    Args:
        graph: The ``.onnx`` file (see ``retriever.export``).
        precision: ``"fp32"`` or ``"int8"``: a label; the graph decides.
        threads: Intra-op threads (default: the cores available).
    """

    def __init__(self, graph: Path, precision: str = "fp32", threads: int | None = None) -> None:
        import onnxruntime

        self.name = f"onnx-{precision}"
        self._session = onnxruntime.InferenceSession(
            str(graph), thread_settings.onnxruntime_options(threads), providers=["CPUExecutionProvider"]
        )

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        (vectors,) = self._session.run(["embedding"], {"input_ids": input_ids, "attention_mask": attention_mask})
        return normalize_rows(vectors)
