"""The exported encoder graph: built once per model, cached by the model's weight hash.

Layout of the cache (default ``~/.cache/semsearch``, or ``$SEMSEARCH_CACHE``)::

    exported/<weights sha256>/model.onnx       mean-pooled, L2-normalised sentence vectors
    exported/<weights sha256>/model.fused.onnx the same with ONNX Runtime's BERT fusions, where they apply
    exported/<weights sha256>/model.int8.onnx  dynamic int8 quantisation, made when asked
    exported/<weights sha256>/tokenizer.json   the model's tokenizer (tokenizers library)
    exported/<weights sha256>/meta.json        dim, window, lower-casing, weight hash
    locations/<fingerprint>.json               model directory (paths, sizes, mtimes) -> weight hash
    choices/<key>.json                         ``backend="auto"``'s decision per machine and model

Exporting needs torch; reading an export needs only ``tokenizers`` and the
runtime, so a process that finds its model here never imports torch. The
graph takes ``input_ids`` and ``attention_mask`` (int64, ``(batch, tokens)``)
and returns ``embedding`` (float32, ``(batch, dim)``), computed exactly as
``Embedder`` does with torch: mean over real tokens, then L2 normalisation.
At most ``MAX_EXPORTS`` exports are kept: writing one removes those loaded
least recently beyond them (``prune_exports``), and the ``locations/``
records that named them. An ``Export`` holds a lease on its folder for as
long as it lives (``export_lease``), and an export leased by a live process
is never removed, so a backend may read its files long after loading it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from retriever.encoding.export_cache import (
    MAX_EXPORTS,
    forget_removed_locations,
    prune_exports,
    recorded_weights,
    remove_export,
    sweep_export_temporaries,
)
from retriever.encoding.export_lease import ExportLease, leased
from retriever.errors import SemsearchError
from retriever.storage.atomic import atomic_write, atomic_write_text, fsync_dir

CACHE_ENV = "SEMSEARCH_CACHE"
#: 2: the graph is traced with eager attention, and the fused graph is written beside it.
EXPORT_FORMAT = 2
ONNX_OPSET = 17
GRAPH_INPUTS = ("input_ids", "attention_mask")


class ExportError(SemsearchError):
    """The model cannot be exported (an unsupported module or exporter failure)."""


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir``, else ``$SEMSEARCH_CACHE``, else ``~/.cache/semsearch``."""
    chosen = cache_dir or os.environ.get(CACHE_ENV) or "~/.cache/semsearch"
    return Path(chosen).expanduser()


@dataclass(frozen=True)
class Export:
    """A cached export of one model.

    Attributes:
        path: Its directory, ``exported/<weights sha256>``.
        weights_sha256: The model's weight hash (as ``Embedder.weights_sha256``).
        dim: Embedding dimension.
        max_tokens: The model's window, special tokens included.
        do_lower_case: Whether texts are lower-cased before tokenising.
        lease: This process's lease on ``path``, held as long as the export is referenced (``None``: unleased,
            as an ``Export`` made by hand).
    """

    path: Path
    weights_sha256: str
    dim: int
    max_tokens: int
    do_lower_case: bool
    lease: ExportLease | None = field(default=None, compare=False, repr=False)

    @property
    def onnx_path(self) -> Path:
        return self.path / "model.onnx"

    @property
    def fused_path(self) -> Path | None:
        """The graph with one fused Attention, SkipLayerNormalization and BiasGelu node per layer, if it was made.

        ONNX Runtime's own session optimisations leave the attention of a
        traced BERT as some twenty small nodes per layer; the fused graph runs
        a query sooner with the same vectors (``make bench-speed``; docs/benchmarks.md).
        """
        path = self.path / "model.fused.onnx"
        return path if path.exists() else None

    @property
    def tokenizer_path(self) -> Path:
        return self.path / "tokenizer.json"

    def int8_path(self) -> Path:
        """The dynamically int8-quantised graph, made on first call (lossy: only when asked)."""
        target = self.path / "model.int8.onnx"
        if not target.exists():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            def write(tmp: Path) -> None:
                root = logging.getLogger()
                level = root.level
                root.setLevel(logging.ERROR)  # quantize_dynamic logs advice to the root logger
                try:
                    quantize_dynamic(str(self.onnx_path), str(tmp), weight_type=QuantType.QInt8)
                finally:
                    root.setLevel(level)

            atomic_write(target, write)
        return target


def load_export(weights_sha256: str, cache_dir=None) -> Export | None:
    """The cached export for a weight hash, leased (``Export.lease``), or ``None`` when there is none (or it
    is unreadable, or being removed)."""
    path = cache_root(cache_dir) / "exported" / weights_sha256
    lease = ExportLease.take(path)  # before reading: a leased export is not removed while it is read
    if lease is None:
        return None
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    if meta.get("format") != EXPORT_FORMAT or meta.get("weights_sha256") != weights_sha256:
        lease.release()
        return None
    with contextlib.suppress(OSError):  # a read-only cache is still read
        os.utime(path)  # loaded now: the folder's mtime orders exports for ``prune_exports``
    dim, max_tokens, do_lower_case = int(meta["dim"]), int(meta["max_tokens"]), bool(meta["do_lower_case"])
    return Export(path, weights_sha256, dim, max_tokens, do_lower_case, lease)


def location_fingerprint(location: Path | str) -> str | None:
    """A cheap key for a model directory: its resolved path and every file's size and mtime.

    ``None`` for a hub id (no local directory to fingerprint).
    """
    root = Path(location)
    if not root.is_dir():
        return None
    entries = [str(root.resolve())]
    for path in sorted(root.rglob("*")):
        if path.is_file():
            stat = path.stat()
            entries.append(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()


def find_export(location: Path | str, cache_dir=None) -> Export | None:
    """The export of the model at ``location`` when its files are unchanged since it was recorded."""
    fingerprint = location_fingerprint(location)
    if fingerprint is None:
        return None
    try:
        weights = recorded_weights(cache_root(cache_dir) / "locations" / f"{fingerprint}.json")
    except OSError:
        return None
    return load_export(weights, cache_dir) if weights else None


def remember_location(location: Path | str, weights_sha256: str, cache_dir=None) -> None:
    """Record that the model directory at ``location`` has weight hash ``weights_sha256``."""
    fingerprint = location_fingerprint(location)
    if fingerprint is None:
        return
    folder = cache_root(cache_dir) / "locations"
    folder.mkdir(parents=True, exist_ok=True)
    record = {"location": str(Path(location).resolve()), "weights_sha256": weights_sha256}
    atomic_write_text(folder / f"{fingerprint}.json", json.dumps(record))


def export_model(model, weights_sha256: str, cache_dir=None) -> Export:
    """Export a loaded sentence-transformers model to ONNX, unless already cached.

    Args:
        model: A ``SentenceTransformer`` of a Transformer, a mean Pooling and
            optionally a Normalize module (anything else raises ``ExportError``).
        weights_sha256: Its weight hash; the cache key.
        cache_dir: Cache root (default ``cache_root()``).

    Returns:
        The export, written atomically: a half-written one is never visible.
    """
    found = load_export(weights_sha256, cache_dir)
    if found is not None:
        return found
    transformer = _check_exportable(model)
    folder = cache_root(cache_dir) / "exported"
    folder.mkdir(parents=True, exist_ok=True)
    sweep_export_temporaries(folder)
    tmp = folder / f".tmp-{os.getpid()}-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        _export_graph(transformer, tmp / "model.onnx")
        _fuse_graph(tmp / "model.onnx", tmp / "model.fused.onnx", transformer.auto_model.config)
        model.tokenizer.backend_tokenizer.save(str(tmp / "tokenizer.json"))
        meta = {
            "format": EXPORT_FORMAT,
            "weights_sha256": weights_sha256,
            "dim": int(model.get_embedding_dimension()),
            "max_tokens": int(model.max_seq_length),
            "do_lower_case": bool(getattr(transformer, "do_lower_case", False)),
            "inputs": list(GRAPH_INPUTS),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        for path in tmp.iterdir():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        _remove_stale(folder / weights_sha256)
        try:
            os.rename(tmp, folder / weights_sha256)
        except OSError:  # another process published the same export first
            pass
        fsync_dir(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with contextlib.suppress(OSError):  # a full cache never fails the export it made
        if prune_exports(folder, MAX_EXPORTS, spare=weights_sha256):
            forget_removed_locations(cache_root(cache_dir))
    found = load_export(weights_sha256, cache_dir)
    if found is None:
        raise ExportError(f"export of {weights_sha256[:12]} was not readable after writing it")
    return found


def _check_exportable(model):
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    modules = list(model)
    kinds = [type(module).__name__ for module in modules]
    if (
        len(modules) not in (2, 3)
        or not isinstance(modules[0], Transformer)
        or not isinstance(modules[1], Pooling)
        or modules[1].pooling_mode != "mean"
        or (len(modules) == 3 and not isinstance(modules[2], Normalize))
    ):
        raise ExportError(f"only Transformer + mean Pooling (+ Normalize) models export; this one is {kinds}")
    return modules[0]


def _export_graph(transformer, target: Path) -> None:
    import torch

    class MeanPooled(torch.nn.Module):
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask):
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    encoder = transformer.auto_model
    wrapper = MeanPooled(encoder).eval()
    example = (torch.ones((2, 8), dtype=torch.int64), torch.ones((2, 8), dtype=torch.int64))
    axes = {name: {0: "batch", 1: "tokens"} for name in GRAPH_INPUTS} | {"embedding": {0: "batch"}}
    # Traced with eager attention: its plain MatMul-Softmax pattern is the one ONNX Runtime fuses, and
    # OpenVINO ran it faster too (docs/benchmarks.md).
    attention = getattr(encoder.config, "_attn_implementation", None)
    switch = attention not in (None, "eager") and hasattr(encoder, "set_attn_implementation")
    try:
        if switch:
            encoder.set_attn_implementation("eager")
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                example,
                str(target),
                input_names=list(GRAPH_INPUTS),
                output_names=["embedding"],
                dynamic_axes=axes,
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
    except Exception as exc:  # noqa: BLE001 - exporter failures come in many types
        raise ExportError(f"ONNX export failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if switch:
            encoder.set_attn_implementation(attention)


#: Most difference in cosine the fused graph may make to the plain graph's vectors, else it is not kept.
FUSED_MIN_COSINE = 0.99999


def _fuse_graph(source: Path, target: Path, config) -> bool:
    """Write ONNX Runtime's BERT fusions of ``source`` to ``target`` when every layer fuses.

    The fused graph is kept only when each of the ``config.num_hidden_layers``
    attention blocks became one ``Attention`` node and its vectors match the
    plain graph's (cosine >= ``FUSED_MIN_COSINE`` on sample texts of unequal
    length, so padding is covered); otherwise nothing is written and ONNX
    Runtime runs the plain graph.

    Returns:
        Whether ``target`` was written.
    """
    heads, hidden, layers = (
        getattr(config, name, None) for name in ("num_attention_heads", "hidden_size", "num_hidden_layers")
    )
    if not (heads and hidden and layers):
        return False
    from onnxruntime.transformers.optimizer import optimize_model

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the optimizer logs each fusion to the root logger
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fused = optimize_model(str(source), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0)
    except Exception:  # noqa: BLE001 - an unfusable graph runs unfused
        return False
    finally:
        root.setLevel(level)
    if sum(node.op_type == "Attention" for node in fused.model.graph.node) != layers:
        return False
    fused.save_model_to_file(str(target))
    window = int(getattr(config, "max_position_embeddings", 512)) - 2
    try:
        agrees = _agreement(source, target, int(getattr(config, "vocab_size", 2000)), window) >= FUSED_MIN_COSINE
    except Exception:  # noqa: BLE001 - a fused graph that fails to run is not kept
        agrees = False
    if not agrees:
        target.unlink()
    return agrees


def _agreement(plain: Path, fused: Path, vocab_size: int, window: int) -> float:
    """Smallest cosine between the two graphs' vectors for a padded batch of token ids (at most ``window``)."""
    import numpy as np
    import onnxruntime

    rng = np.random.default_rng(0)
    lengths = sorted({min(length, window) for length in (3, 9, 17, 40)})
    ids = np.zeros((len(lengths), max(lengths)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(min(1000, vocab_size // 2), vocab_size, length)
        mask[row, :length] = 1
    outputs = []
    for path in (plain, fused):
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        (vectors,) = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
        outputs.append(vectors.astype(np.float64))
    return float(np.min(np.sum(outputs[0] * outputs[1], axis=1)))


def _remove_stale(path: Path) -> None:
    """Move aside and delete an export of an older format at ``path``, so a new one can take its place.

    Raises:
        ExportError: A process still uses that export (holds a lease on it).
    """
    if path.is_dir() and load_export(path.name, path.parent.parent) is None:
        if not remove_export(path) and leased(path):
            raise ExportError(
                f"the export of {path.name[:12]} in an older format is in use by another process; "
                "it is made again once no process uses it"
            )
