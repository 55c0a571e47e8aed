"""Encoder backends: token ids in, mean-pooled unit vectors out.

A backend is named ``<runtime>-<precision>``: ``torch-fp32`` (the reference),
``torch-bf16``, ``onnx-fp32``, ``onnx-int8``, ``openvino-fp32``,
``openvino-bf16``, ``openvino-int8``. bf16 needs a CPU with bf16 instructions;
int8 is lossy and used only when asked. Every backend's ``run`` takes int64
``input_ids`` and ``attention_mask`` of shape ``(batch, tokens)`` and returns
float32 rows of L2 norm 1, shape ``(batch, dim)``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from retriever.encoding.backends.rows import normalize_rows
from retriever.errors import BadInputError

__all__ = ["Backend", "LOSSY", "SUPPORTED", "load", "normalize_rows", "parse"]

RUNTIMES = ("torch", "onnx", "openvino")
PRECISIONS = ("fp32", "bf16", "int8")
#: Backends that may change results beyond cosine 0.9999: never chosen by ``auto``.
LOSSY = ("onnx-int8", "openvino-int8")
SUPPORTED = ("torch-fp32", "torch-bf16", "onnx-fp32", "onnx-int8", "openvino-fp32", "openvino-bf16", "openvino-int8")


class Backend(Protocol):
    """What ``Embedder`` needs from an encoder runtime."""

    name: str

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """``(batch, tokens)`` int64 ids and mask to ``(batch, dim)`` float32 unit vectors."""


def parse(spec: str) -> str:
    """Normalise a backend name: ``"onnx"`` means ``"onnx-fp32"``; unknown names raise ``BadInputError``."""
    name = spec.strip().lower()
    if name in RUNTIMES:
        name = f"{name}-fp32"
    if name not in SUPPORTED:
        raise BadInputError(f"unknown encoder backend {spec!r}; choose auto or one of {', '.join(SUPPORTED)}")
    return name


def load(name: str, *, export=None, model=None, threads: int | None = None) -> Backend:
    """Open backend ``name`` (see ``parse``).

    Args:
        name: A backend name from ``SUPPORTED``.
        export: The model's ``retriever.encoding.export.Export`` (for onnx and openvino).
        model: The loaded ``SentenceTransformer`` (for torch).
        threads: Threads for the runtime (default: ``retriever.encoding.threads.thread_count()``).
    """
    runtime, precision = parse(name).split("-")
    if runtime == "torch":
        from retriever.encoding.backends.torch_backend import TorchBackend

        return TorchBackend(model, precision)
    if export is None:
        raise BadInputError(f"backend {name} needs the exported model")
    graph = export.int8_path() if precision == "int8" else export.onnx_path
    if runtime == "onnx":
        from retriever.encoding.backends.onnx_backend import OnnxBackend

        if precision == "fp32" and export.fused_path is not None:
            graph = export.fused_path
        return OnnxBackend(graph, precision, threads)
    from retriever.encoding.backends.openvino_backend import OpenVinoBackend

    return OpenVinoBackend(graph, precision, threads, lease=export.lease)
