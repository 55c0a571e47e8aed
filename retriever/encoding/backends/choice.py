"""``backend="auto"``: measure the candidates on this machine once, keep the fastest faithful one.

A candidate qualifies when its vectors stay within cosine ``MIN_COSINE`` of
torch fp32 on every sample passage and every sample query (a NaN fails); among those, the one that encodes the
sample passages fastest encodes passages, and the one that encodes single
queries fastest without torch encodes queries (importing torch alone costs
more than any query). The decision is
stored under the cache root, keyed by the CPU (model name, instruction-set
flags, cores), the runtimes' versions and the model's weight hash, so later
processes reuse it without loading torch.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from retriever.storage.atomic import atomic_write_text

MIN_COSINE = 0.9999
#: Bumped when the backends change in ways that may change the winner: older decisions are measured again.
SCHEME = 5
#: Flags that decide which precisions a CPU runs fast.
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "avx_vnni")

SAMPLE_TEXT = (
    "Green tea is made from leaves that are steamed or pan-fired soon after picking, which stops "
    "oxidation and keeps their colour. Rivers carry sediment to the sea, where it settles into deltas "
    "whose shape depends on tides and waves. A protein kinase adds phosphate groups to other proteins, "
    "switching signalling pathways on and off inside the cell. Databases keep rows in tables and "
    "answer queries through indexes that avoid reading every row."
)
#: Queries from a keyword to a sentence (about 4 to 25 tokens), as searches come.
SAMPLE_QUERIES = (
    "how is green tea processed",
    "river delta formation",
    "what does a kinase do",
    "database index",
    "which health effects does drinking green tea every day have on older adults",
    "a phosphorylation cascade activated by growth factors drives the proliferation of tumour cells in mice",
)


def cpu_info() -> dict:
    """This CPU's model name, relevant instruction-set flags and available cores."""
    from retriever.encoding.threads import available_cores

    model, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        import platform

        model = platform.processor() or platform.machine()
    return {"model": model, "flags": sorted(flags & set(CPU_FLAGS)), "cores": available_cores()}


def describe_cpu(info: dict | None = None) -> str:
    """One line naming the CPU for a figure: model, available cores, flags of interest."""
    info = info or cpu_info()
    return f"{info['model']}, {info['cores']} cores available, flags {' '.join(info['flags']) or '(none of interest)'}"


def has_bf16(info: dict | None = None) -> bool:
    """Whether the CPU has bf16 arithmetic (AVX-512 BF16 or AMX)."""
    flags = (info or cpu_info())["flags"]
    return "avx512_bf16" in flags or "amx_bf16" in flags


def candidates(info: dict | None = None) -> list[str]:
    """Backends ``auto`` measures here: every lossless one, bf16 only on a CPU that has it."""
    names = ["torch-fp32", "onnx-fp32", "openvino-fp32"]
    if has_bf16(info):
        names += ["openvino-bf16", "torch-bf16"]
    return names


def choice_key(weights_sha256: str, info: dict | None = None) -> str:
    """Cache key of a decision: CPU, runtime versions and the model's weights."""
    versions = {}
    for module in ("torch", "onnxruntime", "openvino"):
        try:
            from importlib.metadata import version

            versions[module] = version(module)
        except Exception:  # noqa: BLE001 - not installed
            versions[module] = None
    payload = json.dumps(
        {"cpu": info or cpu_info(), "versions": versions, "weights": weights_sha256, "scheme": SCHEME}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def load_choice(root: Path, key: str) -> dict | None:
    """A stored decision, or ``None``."""
    try:
        return json.loads((root / "choices" / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def save_choice(root: Path, key: str, decision: dict) -> None:
    folder = root / "choices"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / f"{key}.json", json.dumps(decision, indent=1))


def min_cosine(vectors: np.ndarray, reference: np.ndarray) -> float:
    """Smallest row-wise cosine between two ``(n, dim)`` arrays of unit rows; -1.0 where a row holds NaN."""
    smallest = float(np.min(np.sum(vectors.astype(np.float64) * reference, axis=1)))
    return -1.0 if np.isnan(smallest) else smallest


#: ``encode(backend, texts)`` -> ``(len(texts), dim)`` unit vectors.
Encode = Callable[[object, list[str]], np.ndarray]


def measure(
    names: Sequence[str],
    open_backend: Callable[[str], object],
    encode: Callable[[object, list[str]], np.ndarray],
    *,
    passages: int = 32,
    repeats: int = 3,
) -> dict:
    """Time and check each backend against the first (torch fp32, the reference).

    Args:
        names: Backend names; ``names[0]`` is the reference.
        open_backend: Opens a backend by name (may raise; that candidate is skipped).
        encode: ``encode(backend, texts)`` -> ``(n, dim)`` unit vectors.
        passages: Sample passages per timing run.
        repeats: Timing rounds of passages over all backends (each one's
            fastest counts); queries take ``3 * repeats`` rounds, each query
            encoded by every backend in turn, and their median counts.

    Returns:
        ``{"backend": passage winner, "query_backend": query winner, "measured":
        {name: {"passages_s", "query_s", "min_cosine"} or {"error"}}}``.
    """
    texts = _sample_passages(passages)
    opened, measured = _open_and_check_passages(names, open_backend, encode, texts)
    _time_passages(opened, measured, encode, texts, repeats)
    _check_queries(opened, measured, encode)
    _time_queries(opened, measured, encode, repeats)
    return _winners(names, measured)


def _sample_passages(n: int) -> list[str]:
    """``n`` passages of about 190 tokens, near the length of an indexed chunk.

    Each is ``SAMPLE_TEXT`` twice over, starting one word later than the one before.
    """
    words = SAMPLE_TEXT.split() * 2
    return [" ".join(words[i % len(words) :] + words[: i % len(words)]) for i in range(n)]


def _failure(exc: Exception) -> dict:
    """A candidate's figures when its runtime failed: the error, shortened."""
    return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _open_and_check_passages(
    names: Sequence[str], open_backend: Callable[[str], object], encode: Encode, texts: list[str]
) -> tuple[dict[str, object], dict[str, dict]]:
    """Open each backend and encode ``texts`` once (also the warm-up); the first that works is the reference.

    Returns:
        ``(opened, measured)``: the backends that worked, by name, and per
        name ``{"passages_s": inf, "min_cosine"}`` or ``{"error"}``.
    """
    reference = None
    measured: dict[str, dict] = {}
    opened: dict[str, object] = {}
    for name in names:
        try:
            backend = open_backend(name)
            vectors = encode(backend, texts)  # also the warm-up
        except Exception as exc:  # noqa: BLE001 - a runtime that fails here is not a candidate
            measured[name] = _failure(exc)
            continue
        if reference is None:
            reference = vectors
        opened[name] = backend
        measured[name] = {"passages_s": float("inf"), "min_cosine": round(min_cosine(vectors, reference), 8)}
    return opened, measured


def _time_passages(
    opened: dict[str, object], measured: dict[str, dict], encode: Encode, texts: list[str], repeats: int
) -> None:
    """Set each backend's ``passages_s``: its fastest of ``repeats`` encodes of ``texts``."""
    for _ in range(repeats):  # rounds over all candidates, so a burst of other load hits them alike
        for name, backend in opened.items():
            start = time.perf_counter()
            encode(backend, texts)
            figures = measured[name]
            figures["passages_s"] = round(min(figures["passages_s"], time.perf_counter() - start), 6)


def _check_queries(opened: dict[str, object], measured: dict[str, dict], encode: Encode) -> None:
    """Lower each backend's ``min_cosine`` by its single-query vectors; a backend that fails is dropped from ``opened``.

    Untimed: a runtime may compile a graph for a new shape. The first backend
    that encodes the queries is their reference.
    """
    reference_queries = None
    for name, backend in list(opened.items()):
        try:  # single queries may run on other graphs than passage batches (fixed shapes): checked too
            vectors = np.concatenate([encode(backend, [query]) for query in SAMPLE_QUERIES])
        except Exception as exc:  # noqa: BLE001 - as in _open_and_check_passages
            measured[name] = _failure(exc)
            del opened[name]
            continue
        if reference_queries is None:
            reference_queries = vectors
        figures = measured[name]
        figures["min_cosine"] = round(min(figures["min_cosine"], min_cosine(vectors, reference_queries)), 8)


def _time_queries(opened: dict[str, object], measured: dict[str, dict], encode: Encode, repeats: int) -> None:
    """Set each backend's ``query_s``: its median time for one query, over ``3 * repeats`` rounds of every query."""
    query_times: dict[str, list[float]] = {name: [] for name in opened}
    for _ in range(repeats * 3):  # each query by every candidate in turn: bursts of load hit them alike
        for query in SAMPLE_QUERIES:
            for name, backend in opened.items():
                start = time.perf_counter()
                encode(backend, [query])
                query_times[name].append(time.perf_counter() - start)
    for name, times in query_times.items():
        measured[name]["query_s"] = round(float(np.median(times)), 6)


def _winners(names: Sequence[str], measured: dict[str, dict]) -> dict:
    """The decision: the fastest faithful passage encoder, and the fastest faithful one without torch for queries.

    Without a faithful candidate passages go to ``names[0]``; without a
    torch-free one queries go to the passage winner.
    """
    faithful = [n for n, m in measured.items() if "min_cosine" in m and m["min_cosine"] >= MIN_COSINE]
    winner = min(faithful, key=lambda n: measured[n]["passages_s"]) if faithful else names[0]
    torch_free = [n for n in faithful if not n.startswith("torch")]
    query_winner = min(torch_free, key=lambda n: measured[n]["query_s"]) if torch_free else winner
    return {"backend": winner, "query_backend": query_winner, "measured": measured, "min_cosine_bound": MIN_COSINE}
