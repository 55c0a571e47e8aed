"""OpenVINO on the CPU, reading the exported ONNX graph (fp32, bf16 where the CPU has it, or int8).

A graph compiled for dynamic shapes pays for every change of input shape,
and queries change it on every call: each has its own length, and a server's
micro-batches each their own number of rows. So small inputs run on copies
of the graph compiled for one fixed shape: rows are padded up to the next
count in ``FIXED_ROWS`` (with copies of the first row, dropped afterwards)
and tokens to the next length in ``FIXED_TOKENS`` (masked, so each vector is
the one the unpadded run gives). Larger inputs (passage batches) run on the
dynamic graph. A fixed-shape copy is compiled on first use (its compiled
blob is cached on disk, so a later process loads it in a fraction of the
time) and holds its own weights: the few shapes below bound that at nine
copies.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path

import numpy as np

from retriever.encoding import threads as thread_settings
from retriever.encoding.backends.rows import normalize_rows
from retriever.encoding.export_lease import ExportLease
from retriever.storage.atomic import atomic_write

_PRECISION_HINTS = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}
#: Row counts a small batch is padded to for a fixed-shape graph; larger batches go in groups of the last.
FIXED_ROWS = (1, 4, 8)
#: Most rows run on fixed-shape graphs (in groups of ``FIXED_ROWS[-1]``); larger batches use the dynamic graph.
MAX_FIXED_BATCH = 32
#: Token lengths a small input is padded to for a fixed-shape graph; longer inputs use the dynamic graph.
FIXED_TOKENS = (16, 32, 64)
#: Subfolder of ``openvino-cache/<precision>`` that OpenVINO's own cache of the dynamic graph uses.
DYNAMIC_CACHE = "dynamic"


class OpenVinoBackend:
    """A model compiled by OpenVINO for this CPU; safe to call from several threads (calls take turns).

    Args:
        graph: The ``.onnx`` file (see ``retriever.encoding.export``).
        precision: ``"fp32"``, ``"bf16"`` (inference precision hint) or
            ``"int8"`` (the int8-quantised graph, computed in f32 elsewhere).
        threads: Inference threads (default: the cores available).
        fixed_shapes: Run small inputs on fixed-shape graphs (default True).
        lease: The lease on the export that holds ``graph`` (``Export.lease``), kept as long as this backend
            lives: the dynamic graph and fixed-shape copies are compiled from ``graph`` on first use, so
            the export must not be pruned meanwhile (default ``None``: the caller keeps it).
    """

    def __init__(
        self,
        graph: Path,
        precision: str = "fp32",
        threads: int | None = None,
        fixed_shapes: bool = True,
        lease: ExportLease | None = None,
    ) -> None:
        import openvino

        self.name = f"openvino-{precision}"
        self._graph = Path(graph)
        self._lease = lease
        self._core = openvino.Core()
        self._config = thread_settings.openvino_config(threads) | {
            "INFERENCE_PRECISION_HINT": _PRECISION_HINTS[precision]
        }
        # Compiled graphs are cached beside the graph, so a later process loads one in a fraction of the
        # compile time. One folder per precision: OpenVINO 2026.4 keys its cache without the precision hint,
        # and a bf16 compile that found the fp32 blob of the same graph gave NaN vectors.
        folder = self._graph.parent / "openvino-cache" / precision
        self._cache = folder if os.access(self._graph.parent, os.W_OK) else None
        if self._cache is not None:
            _remove_stale_blobs(self._graph.parent / "openvino-cache", folder)
        self._blob_tag = _blob_tag(self._graph, openvino.__version__)
        self._fixed_shapes = fixed_shapes
        self._lock = threading.Lock()
        self._dynamic = None  # (compiled graph, infer request), compiled on first use
        self._fixed: dict[tuple[int, int], tuple] = {}  # (rows, tokens) -> (compiled graph, its infer request)
        self._source_model = None  # the graph, read when a fixed-shape copy must be compiled
        self._mapped_blobs: list[tuple] = []  # (memory map, tensor) of imported blobs: their copies read from them
        if not fixed_shapes:
            self._dynamic_graph()

    def compile_fixed_shapes(self) -> None:
        """Compile every fixed-shape graph now (a server, before its first requests), not on first use."""
        if self._fixed_shapes:
            for rows in FIXED_ROWS:
                for tokens in FIXED_TOKENS:
                    with self._lock:
                        self._fixed_graph((rows, tokens))

    def padded_calls(self, rows: int, tokens: int) -> list[tuple[int, int]]:
        """The ``(rows, tokens)`` of each call that ``run`` makes for an input of that shape.

        Small inputs run in groups of ``FIXED_ROWS[-1]`` rows, each padded to
        the next fixed shape; others run as they are, on the dynamic graph.
        """
        if not self._runs_fixed(rows, tokens):
            return [(rows, tokens)]
        group = FIXED_ROWS[-1]
        return [_fixed_shape(min(group, rows - start), tokens) for start in range(0, rows, group)]

    def _runs_fixed(self, rows: int, tokens: int) -> bool:
        return self._fixed_shapes and tokens <= FIXED_TOKENS[-1] and rows <= MAX_FIXED_BATCH

    def run(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        rows, tokens = input_ids.shape
        if not self._runs_fixed(rows, tokens):
            with self._lock:
                compiled, request = self._dynamic_graph()
                vectors = self._infer(compiled, request, input_ids, attention_mask)
            return normalize_rows(vectors)
        group = FIXED_ROWS[-1]
        parts = [
            self._run_fixed(input_ids[start : start + group], attention_mask[start : start + group])
            for start in range(0, rows, group)
        ]
        return normalize_rows(np.concatenate(parts) if len(parts) > 1 else parts[0])

    def _run_fixed(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        """Pad to the next fixed shape, run it, and return the rows of the input."""
        rows, tokens = input_ids.shape
        shape = _fixed_shape(rows, tokens)
        padded_ids = np.zeros(shape, dtype=np.int64)
        padded_mask = np.zeros(shape, dtype=np.int64)
        padded_ids[:rows, :tokens] = input_ids
        padded_mask[:rows, :tokens] = attention_mask
        padded_ids[rows:] = padded_ids[0]  # filler rows: a real row, so no row is all padding
        padded_mask[rows:] = padded_mask[0]
        with self._lock:
            compiled, request = self._fixed_graph(shape)
            return self._infer(compiled, request, padded_ids, padded_mask)[:rows]

    @staticmethod
    def _infer(compiled, request, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        result = request.infer({"input_ids": input_ids, "attention_mask": attention_mask})
        return np.array(result[compiled.output(0)], dtype=np.float32)

    def _dynamic_graph(self) -> tuple:
        """The graph compiled for any input shape; the caller holds the lock (or is the constructor)."""
        if self._dynamic is None:
            config = self._config | ({"CACHE_DIR": str(self._cache / DYNAMIC_CACHE)} if self._cache else {})
            compiled = self._core.compile_model(str(self._graph), "CPU", config)
            self._dynamic = (compiled, compiled.create_infer_request())
        return self._dynamic

    def _fixed_graph(self, shape: tuple[int, int]) -> tuple:
        """The graph compiled for input ``shape``, loaded or compiled on first use; the caller holds the lock.

        A compiled copy is exported to ``openvino-cache/<precision>/fixed-<rows>x<tokens>-<tag>.blob``
        and imported by later processes: importing skips reading the ONNX graph and the hashing of its
        weights that OpenVINO's own cache does for a reshaped model. The blob is imported from a memory map, which
        the compiled copy keeps using: its weights stay file pages, shared by the processes serving one
        collection and reclaimable, instead of private memory. A blob that does not import is compiled anew.

        Returns:
            ``(compiled graph, infer request)``.
        """
        if shape in self._fixed:
            return self._fixed[shape]
        import openvino

        blob = None if self._cache is None else self._cache / f"fixed-{shape[0]}x{shape[1]}-{self._blob_tag}.blob"
        compiled = None
        if blob is not None and blob.exists():
            with contextlib.suppress(OSError, RuntimeError, ValueError):  # unreadable, torn, empty, another build
                view = np.memmap(blob, dtype=np.uint8, mode="c")  # copy-on-write: the file is never changed
                tensor = openvino.Tensor(view, shared_memory=True)
                compiled = self._core.import_model(tensor, "CPU", self._config)
                self._mapped_blobs.append((view, tensor))  # referenced by the compiled copy: kept as long as it is
        if compiled is None:
            if self._source_model is None:
                self._source_model = self._core.read_model(str(self._graph))
            model = self._source_model.clone()
            model.reshape({"input_ids": list(shape), "attention_mask": list(shape)})
            compiled = self._core.compile_model(model, "CPU", self._config)
            if blob is not None:
                with contextlib.suppress(OSError, RuntimeError):  # unsaved, it is compiled again next time
                    blob.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(blob, lambda tmp: tmp.write_bytes(compiled.export_model().getvalue()))
        self._fixed[shape] = (compiled, compiled.create_infer_request())
        return self._fixed[shape]


def _remove_stale_blobs(cache: Path, folder: Path) -> None:
    """Delete the compiled blobs that earlier layouts of ``cache`` left and nothing reads any more.

    OpenVINO's own cache files (``<hash>.blob``) once lay in ``openvino-cache/``
    itself and, for fixed shapes, in ``openvino-cache/<precision>/``; the
    dynamic graph's now lie in ``<precision>/dynamic/`` and fixed shapes are
    ``fixed-*.blob``. A file another process
    still maps stays readable to it until it closes it.
    """
    for stale in [*cache.glob("*.blob"), *(p for p in folder.glob("*.blob") if not p.name.startswith("fixed-"))]:
        with contextlib.suppress(OSError):
            stale.unlink()


def _fixed_shape(rows: int, tokens: int) -> tuple[int, int]:
    """The fixed shape an input of ``rows`` (at most ``FIXED_ROWS[-1]``) and ``tokens`` is padded to."""
    return next(n for n in FIXED_ROWS if n >= rows), next(n for n in FIXED_TOKENS if n >= tokens)


def _blob_tag(graph: Path, version: str) -> str:
    """What a compiled blob depends on beyond shape and precision: the graph, OpenVINO's build and the CPU."""
    from retriever.encoding.backends.choice import cpu_info

    info = cpu_info()
    payload = "\0".join([graph.name, version, info["model"], " ".join(info["flags"]), str(info["cores"])])
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
