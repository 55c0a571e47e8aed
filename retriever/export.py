"""The exported encoder graph: built once per model, cached by the model's weight hash.

Layout of the cache (default ``~/.cache/semsearch``, or ``$SEMSEARCH_CACHE``)::

    exported/<weights sha256>/model.onnx       mean-pooled, L2-normalised sentence vectors
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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from retriever.atomic import atomic_write, atomic_write_text, fsync_dir
from retriever.errors import SemsearchError

CACHE_ENV = "SEMSEARCH_CACHE"
EXPORT_FORMAT = 1
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
    """

    path: Path
    weights_sha256: str
    dim: int
    max_tokens: int
    do_lower_case: bool

    @property
    def onnx_path(self) -> Path:
        return self.path / "model.onnx"

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
    """The cached export for a weight hash, or ``None`` when there is none (or it is unreadable)."""
    path = cache_root(cache_dir) / "exported" / weights_sha256
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if meta.get("format") != EXPORT_FORMAT or meta.get("weights_sha256") != weights_sha256:
        return None
    return Export(path, weights_sha256, int(meta["dim"]), int(meta["max_tokens"]), bool(meta["do_lower_case"]))


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
        record = json.loads((cache_root(cache_dir) / "locations" / f"{fingerprint}.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return load_export(str(record.get("weights_sha256", "")), cache_dir)


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
    tmp = folder / f".tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    try:
        _export_graph(transformer, tmp / "model.onnx")
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
        try:
            os.rename(tmp, folder / weights_sha256)
        except OSError:  # another process published the same export first
            pass
        fsync_dir(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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

    wrapper = MeanPooled(transformer.auto_model).eval()
    example = (torch.ones((2, 8), dtype=torch.int64), torch.ones((2, 8), dtype=torch.int64))
    axes = {name: {0: "batch", 1: "tokens"} for name in GRAPH_INPUTS} | {"embedding": {0: "batch"}}
    try:
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
