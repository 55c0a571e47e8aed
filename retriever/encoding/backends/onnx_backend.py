"""ONNX Runtime on the CPU, running the exported graph (fp32, or int8 dynamic quantisation)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from retriever.encoding import threads as thread_settings
from retriever.encoding.backends.rows import normalize_rows


class OnnxBackend:
    """An ONNX Runtime session over ``graph``; safe to call from several threads.

    Args:
        graph: The ``.onnx`` file (see ``retriever.encoding.export``).
        precision: ``"fp32"`` or ``"int8"``: a label; the graph decides.
        threads: Intra-op threads (default: the cores available).
    """

    def __init__(self, graph: Path, precision: str = "fp32", threads: int | None = None) -> None:
        import onnxruntime

        self.name = f"onnx-{precision}"
        self.graph = Path(graph)  # the graph asked for (its optimised copy may be what runs)
        options = thread_settings.onnxruntime_options(threads)
        optimized = _optimized_path(Path(graph), onnxruntime.__version__)
        source = Path(graph)
        if optimized.exists():  # optimised on this CPU by this version before: skip the graph rewrites
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
            source = optimized
        elif os.access(optimized.parent, os.W_OK):  # else (a read-only cache) optimise in memory each time
            options.optimized_model_filepath = str(optimized.with_name(f".{optimized.name}.{os.getpid()}.tmp"))
        self._session = onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        if options.optimized_model_filepath:
            try:
                os.replace(options.optimized_model_filepath, optimized)
            except OSError:  # another process got there first, or the file was not written
                Path(options.optimized_model_filepath).unlink(missing_ok=True)

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        (vectors,) = self._session.run(["embedding"], {"input_ids": input_ids, "attention_mask": attention_mask})
        return normalize_rows(vectors)


def _optimized_path(graph: Path, version: str) -> Path:
    """Where ONNX Runtime's optimised graph for this CPU and version is kept, beside ``graph``.

    The optimised graph may use kernels of this CPU, so the name holds a hash
    of the CPU's model and flags and of the runtime version.
    """
    from retriever.encoding.backends.choice import cpu_info

    key = hashlib.sha256(json.dumps([cpu_info(), version], sort_keys=True).encode()).hexdigest()[:16]
    return graph.with_name(f"{graph.stem}.ort-{key}.onnx")
