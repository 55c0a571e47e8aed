"""The FAISS side of a segment: an index over its chunk rows, chosen by size.

Rows are numbered 0..n-1 in the segment, so no id map is stored. A segment
below ``IndexPolicy.ann_min_rows`` keeps an exact ``IndexFlatIP``; a larger
one (made by merging) gets an ``IndexIVFFlat`` trained on its own vectors,
with ``nprobe`` tuned at build time so that recall@10 against exact search
is at least ``IndexPolicy.target_recall`` on probe queries drawn from the
segment. Both are memory-mapped when read, so processes serving one
collection share pages.

Filtering and deletions use a bitmap over rows (``faiss.IDSelectorBitmap``).
An IVF search whose bitmap lets few rows through is answered exactly
instead, by gathering those rows' vectors.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import faiss
import numpy as np

from retriever.errors import CorruptCollectionError

FLAT = "flat"
IVF = "ivf"


@dataclass(frozen=True)
class IndexPolicy:
    """How a segment's vector index is chosen (recorded in the manifest).

    Attributes:
        ann_min_rows: Segments with at least this many chunks get an IVF index;
            smaller ones stay exact (default 32,768).
        target_recall: recall@10 against exact search that ``nprobe`` is tuned
            to reach (default 0.95; tuned with a margin to 0.97).
        exact_max_rows: A filtered search over an IVF segment that leaves at
            most this many rows is answered exactly (default 20,000).
    """

    ann_min_rows: int = 32_768
    target_recall: float = 0.95
    exact_max_rows: int = 20_000

    def to_dict(self) -> dict:
        return {"kind": "size-tiered", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict | None) -> "IndexPolicy":
        data = dict(data or {})
        data.pop("kind", None)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def build(vectors: np.ndarray, policy: IndexPolicy, seed: int = 0) -> tuple[faiss.Index, dict]:
    """An index over ``vectors`` (``(n, dim)`` float32, unit norm) chosen by ``n``.

    Returns:
        ``(index, info)`` where ``info`` records the type and its parameters
        (``{"type": "flat"}`` or ``{"type": "ivf", "nlist", "nprobe", "recall"}``).
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    if n < policy.ann_min_rows:
        index = faiss.IndexFlatIP(dim)
        index.add(vectors)
        return index, {"type": FLAT}
    nlist = _nlist_for(n)
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(seed)
    sample = vectors[np.sort(rng.choice(n, size=min(n, 64 * nlist), replace=False))]
    index.cp.seed = seed
    index.train(sample)
    index.add(vectors)
    index.make_direct_map()  # row -> vector, for exact filtered search and merging
    nprobe, recall = _tune_nprobe(index, vectors, policy.target_recall, rng)
    index.nprobe = nprobe
    return index, {"type": IVF, "nlist": nlist, "nprobe": nprobe, "recall": round(recall, 4)}


def _nlist_for(n: int) -> int:
    """About ``sqrt(n)`` lists, a power of two between 64 and 4,096."""
    return int(min(4096, max(64, 2 ** round(np.log2(np.sqrt(n))))))


def _tune_nprobe(index: faiss.IndexIVF, vectors: np.ndarray, target: float, rng) -> tuple[int, float]:
    """The smallest power-of-two ``nprobe`` whose recall@10 on probe queries beats ``target`` + 0.02.

    Probe queries are normalised midpoints of a random row and one of its 20
    nearest rows: in populated regions, as real queries are, but never a
    stored row itself.
    """
    n = len(vectors)
    anchors = rng.choice(n, size=min(n, 200), replace=False)
    _, near = faiss.knn(vectors[anchors], vectors, 21, metric=faiss.METRIC_INNER_PRODUCT)
    partners = near[np.arange(len(anchors)), rng.integers(1, 21, size=len(anchors))]
    queries = vectors[anchors] + vectors[partners]
    queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    _, exact = faiss.knn(queries, vectors, 10, metric=faiss.METRIC_INNER_PRODUCT)
    goal = min(1.0, target + 0.02)
    nprobe, recall = 1, 0.0
    while True:
        _, found = index.search(queries, 10, params=faiss.SearchParametersIVF(nprobe=nprobe))
        recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, found)])
        if recall >= goal or nprobe >= index.nlist:
            return nprobe, float(recall)
        nprobe = min(index.nlist, nprobe * 2)


def write(index: faiss.Index, path: Path) -> None:
    faiss.write_index(index, str(path))


def read(path: Path, info: dict) -> faiss.Index:
    """Memory-map a segment's index; IVF gets its tuned ``nprobe`` and a direct map.

    Raises:
        FileNotFoundError: The file is gone (a merge removed the segment).
        CorruptCollectionError: The file exists but is not a readable index.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(path)
    flags = faiss.IO_FLAG_MMAP_IFC if info.get("type", FLAT) == FLAT else faiss.IO_FLAG_MMAP
    try:
        index = faiss.read_index(str(path), flags | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError as exc:
        if not path.exists():
            raise FileNotFoundError(path) from None
        raise CorruptCollectionError(f"cannot read vector index {path}: {exc}") from None
    if info.get("type") == IVF:
        index.nprobe = int(info["nprobe"])
        if index.direct_map.type == faiss.DirectMap.NoMap:
            index.make_direct_map()
    return index


def reconstruct(index: faiss.Index, rows: np.ndarray) -> np.ndarray:
    """Vectors of ``rows``, ``(len(rows), dim)`` float32."""
    if len(rows) == 0:
        return np.zeros((0, index.d), dtype=np.float32)
    if isinstance(index, faiss.IndexFlat):
        return faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)[rows]
    return index.reconstruct_batch(np.ascontiguousarray(rows, dtype=np.int64))


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run FAISS on one OpenMP thread in this thread, then restore the count.

    A single query gains little from a thread team, and loses much when the
    machine is busy: the team's barrier waits for a descheduled thread (a
    10,000-vector flat search took 16 ms on two threads beside another
    CPU-bound process, 0.8 ms on one). OpenMP's thread count is a per-thread
    setting, so concurrent searches and builds do not disturb each other.
    """
    previous = faiss.omp_get_max_threads()
    if previous > 1:
        faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        if previous > 1:
            faiss.omp_set_num_threads(previous)


def search(
    index: faiss.Index,
    queries: np.ndarray,
    k: int,
    allowed: np.ndarray | None,
    n_allowed: int,
    policy: IndexPolicy,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` inner products among the rows ``allowed`` lets through.

    Args:
        queries: ``(q, dim)`` float32.
        allowed: Boolean mask over rows, or ``None`` for every row.
        n_allowed: How many rows ``allowed`` lets through.

    Returns:
        ``(scores, rows)`` of shape ``(q, k)``; empty slots have row -1.
    """
    with _one_thread():
        return _search(index, queries, k, allowed, n_allowed, policy)


def _search(index, queries, k, allowed, n_allowed, policy):
    k = max(1, min(k, n_allowed))
    if allowed is None:
        scores, rows = index.search(queries, k)
        if isinstance(index, faiss.IndexIVF) and _short(rows, k):  # probed lists ran dry
            scores, rows = index.search(queries, k, params=faiss.SearchParametersIVF(nprobe=index.nlist))
        return scores, rows
    if not isinstance(index, faiss.IndexFlat) and n_allowed <= policy.exact_max_rows:
        rows = np.flatnonzero(allowed)
        scores, positions = faiss.knn(queries, reconstruct(index, rows), k, metric=faiss.METRIC_INNER_PRODUCT)
        return scores, np.where(positions >= 0, rows[np.maximum(positions, 0)], -1)
    bitmap = np.packbits(allowed, bitorder="little")
    selector = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap))
    if not isinstance(index, faiss.IndexIVF):
        return index.search(queries, k, params=faiss.SearchParameters(sel=selector))
    # a sparse filter empties most probed lists: probe more, in proportion
    share = n_allowed / max(index.ntotal, 1)
    nprobe = int(min(index.nlist, np.ceil(index.nprobe / max(share, 1e-9))))
    scores, rows = index.search(queries, k, params=faiss.SearchParametersIVF(sel=selector, nprobe=nprobe))
    if _short(rows, k) and nprobe < index.nlist:
        scores, rows = index.search(queries, k, params=faiss.SearchParametersIVF(sel=selector, nprobe=index.nlist))
    return scores, rows  # ``bitmap`` stays alive until here


def _short(rows: np.ndarray, k: int) -> bool:
    """Whether some query's row of ``rows`` ``(q, k)`` has fewer than ``k`` hits."""
    return bool(((rows >= 0).sum(axis=1) < k).any())
