"""The FAISS side of a segment: an index over its chunk rows, chosen by size.

Rows are numbered 0..n-1 in the segment, so no id map is stored. A segment
below ``IndexPolicy.ann_min_rows`` keeps an exact ``IndexFlatIP``. A larger
one (made by merging) gets an inverted file (IVF) trained on its own
vectors. By default (``IndexPolicy.codes`` ``compressed``; ``always``
compresses small segments too) the IVF holds 1-bit RaBitQ codes scanned
with SIMD (``ivf-rabitq``): the candidates the codes rank first are then
rescored exactly from the segment's float32 rows (``vectors.npy``,
memory-mapped, so only the rows a query rescores are read), and only the
codes need stay resident. Candidates are first ranked by int8 copies of the
rows (``int8_rows``: a quarter of float32, which the page cache can hold),
and only the best few are read in float32. With codes ``float32`` it holds
the vectors themselves (``ivf``). A segment below that size but past
``IndexPolicy.codes_min_rows`` (a commit of 20,000 chunks) holds codes too,
in an IVF of few lists (one per 256 rows), which costs a search less than
codes of every row scanned whole (``rabitq``, which segments written before
still hold), whose cost each query rotation and candidate heap repeats over
every code, or the exact scan of the float32 rows (docs/benchmarks.md).
``nprobe`` (and, for
codes, how many candidates are rescored) is tuned at build time so that
recall@10 of the whole search against exact search is at least
``IndexPolicy.target_recall`` on query-like probes, placed off the rows as
far as real queries sit from their documents (``probe_queries``). Indexes
are written, and memory-mapped when read, by ``retriever.storage.vector_files``
(so processes serving one collection share pages).

Filtering and deletions use a bitmap over rows (``faiss.IDSelectorBitmap``).
A search of an IVF or of codes whose bitmap lets few rows through is
answered exactly instead, by gathering those rows' vectors (as is every
``exact`` search, whose policy lets any number through); a search asking
for ``estimates`` ranks them by their int8 rows instead.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Iterator

import faiss
import numpy as np

from retriever.errors import BadInputError
from retriever.search import int8_rows, ivf_tuning, rescoring
from retriever.storage.segment_format import FLAT, IVF, IVF_RABITQ
from retriever.storage.vector_files import VectorIndex, reconstruct

CODES = ("float32", "compressed", "always")


@dataclass(frozen=True)
class IndexPolicy:
    """How a segment's vector index is chosen (recorded in the manifest).

    Attributes:
        ann_min_rows: Segments with at least this many chunks get an IVF index;
            smaller ones stay exact (default 32,768).
        codes_min_rows: With codes ``compressed``, smaller segments from this many chunks on
            hold codes too, in an IVF of few lists (one per 256 rows; default 16,384).
        target_recall: recall@10 against exact search that ``nprobe`` is tuned
            to reach (default 0.95; tuned with a margin to 0.97).
        exact_max_rows: A filtered search over an IVF or codes segment that leaves at
            most this many rows is answered exactly (default 20,000).
        codes: What an IVF index holds: ``compressed`` RaBitQ codes rescored
            from float32 rows (default), ``float32`` vectors, or ``always`` (compressed,
            and small segments too, in an IVF of few lists).
        rescore: Candidates the codes pass to exact rescoring, per hit asked
            for (default 10; at least 100 in all); a build may raise it (up
            to 8 times) where the codes need more to reach ``target_recall``.
        probe_ratio: Where ``nprobe`` is tuned: probes' median best cosine as a
            share of rows' median nearest-neighbour cosine (default 0.75, a little
            below where real queries sit; see ``ivf_tuning.probe_queries``).
    """

    ann_min_rows: int = 32_768
    codes_min_rows: int = 16_384
    target_recall: float = 0.95
    exact_max_rows: int = 20_000
    codes: str = "compressed"
    rescore: int = 10
    probe_ratio: float = 0.75

    def __post_init__(self) -> None:
        if self.codes not in CODES:
            raise BadInputError(f"index codes must be one of {', '.join(CODES)}, got {self.codes!r}")
        if self.rescore < 1:
            raise BadInputError(f"rescore must be at least 1, got {self.rescore}")

    def to_dict(self) -> dict:
        return {"kind": "size-tiered", **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict | None) -> "IndexPolicy":
        data = dict(data or {})
        data.pop("kind", None)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def index_type_for(self, n: int) -> str:
        """The index type ``build`` gives ``n`` vectors under this policy (``index_type_for``)."""
        return index_type_for(n, self)

    def build(self, vectors: np.ndarray) -> VectorIndex:
        """The index ``build`` makes of ``vectors`` under this policy: what a segment writer is handed
        (``retriever.storage.segment.IndexBuilder``)."""
        return build(vectors, self)


def index_type_for(n: int, policy: IndexPolicy) -> str:
    """The index type ``build`` gives ``n`` vectors under ``policy``."""
    compressed_from = min(policy.codes_min_rows, policy.ann_min_rows)
    if policy.codes == "always" or (policy.codes == "compressed" and n >= compressed_from):
        return IVF_RABITQ
    return FLAT if n < policy.ann_min_rows else IVF


def build(vectors: np.ndarray, policy: IndexPolicy, seed: int = 0) -> VectorIndex:
    """An index over ``vectors`` (``(n, dim)`` float32, unit norm) chosen by ``n`` and ``policy.codes``.

    ``info`` records the type and its parameters: ``{"type": "flat"}``,
    or ``{"type": "ivf" | "ivf-rabitq", "nlist", "nprobe", "recall"}`` (and ``"rescore"`` for codes).
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    kind = index_type_for(n, policy)
    compressed = kind == IVF_RABITQ
    if kind == FLAT:
        index = faiss.IndexFlatIP(dim)
        index.add(vectors)
        return VectorIndex(index, {"type": FLAT})
    nlist = _nlist_for(n, small=n < policy.ann_min_rows)
    quantizer = faiss.IndexFlatIP(dim)
    if compressed:
        index = faiss.IndexIVFRaBitQFastScan(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(seed)
    sample = vectors[np.sort(rng.choice(n, size=min(n, 64 * nlist), replace=False))]
    index.cp.seed = seed
    index.train(sample)
    index.add(vectors)
    if compressed:
        built = VectorIndex(
            index, {"type": IVF_RABITQ, "nlist": nlist, "int8": True}, vectors, int8_rows.quantize(vectors)
        )
    else:
        index.make_direct_map()  # row -> vector, for exact filtered search and merging
        built = VectorIndex(index, {"type": IVF, "nlist": nlist})

    def search(queries: np.ndarray, k: int, nprobe: int, rescore: int | None) -> tuple[np.ndarray, int]:
        if rescore is not None:
            built.info["rescore"] = rescore
        candidates = rescoring.candidates(built, k, policy) if compressed else 0
        return _ivf_search(built, queries, k, nprobe, None, policy)[1], candidates

    tuned = ivf_tuning.tune(search, vectors, nlist, compressed, policy, rng)
    index.nprobe = tuned.nprobe
    built.info.update(tuned.info())
    return built


def _nlist_for(n: int, small: bool = False) -> int:
    """About ``sqrt(n)`` lists, a power of two between 64 and 4,096; a ``small`` segment (compressed
    below ``ann_min_rows``) gets fewer, one per 256 rows and at least one, as each list needs rows to train."""
    lists = int(min(4096, max(64, 2 ** round(np.log2(np.sqrt(max(n, 1)))))))
    return max(1, min(lists, n // 256)) if small else lists


def exact_scores(built: VectorIndex, rows: np.ndarray, query: np.ndarray, read_rows: bool = True) -> np.ndarray:
    """``(len(rows),)`` exact inner products of the segment's ``rows`` with ``query`` ``(dim,)``, read in
    row order (what ``search(estimates=True)`` leaves to its caller for the hits it keeps)."""
    order = np.argsort(rows, kind="stable")
    scores = np.empty(len(rows), dtype=np.float32)
    scores[order] = reconstruct(built, np.asarray(rows)[order], read_rows) @ query
    return scores


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run FAISS on one OpenMP thread in this thread, then restore the count.

    A single query gains little from a thread team, and loses much when the
    machine is busy: the team's barrier waits for a descheduled thread
    (docs/benchmarks.md). OpenMP's thread count is a per-thread
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
    built: VectorIndex,
    queries: np.ndarray,
    k: int,
    allowed: np.ndarray | None,
    n_allowed: int,
    policy: IndexPolicy,
    recall_k: int = 10,
    estimates: bool = False,
    share: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` inner products among the rows ``allowed`` lets through.

    Args:
        queries: ``(q, dim)`` float32.
        allowed: Boolean mask over rows, or ``None`` for every row.
        n_allowed: How many rows ``allowed`` lets through.
        recall_k: How deep the caller needs recall (``ivf_tuning.probed_lists``): the documents a user asked
            for, not the chunks fetched to find them nor a hybrid search's fusion depth (default 10).
        estimates: Let compressed codes with int8 rows return the int8 ranking's scores, for the
            caller to make exact (``exact_scores``) for the hits it keeps.
        share: Of the rows a search spans, the share this index holds, where the caller fetches about that
            share of its top ``recall_k`` from it (``ivf_tuning.probed_lists``); 1.0 for a full-depth search.

    Returns:
        ``(scores, rows)`` of shape ``(q, k)``; empty slots have row -1.
        Compressed codes' scores are the exact inner products of the rescored rows, unless ``estimates``.
    """
    with _one_thread():
        return _search(built, queries, k, allowed, n_allowed, policy, recall_k, estimates, share)


def _search(built, queries, k, allowed, n_allowed, policy, recall_k, estimates, share):
    index = built.index
    k = max(1, min(k, n_allowed))
    if allowed is not None and not isinstance(index, faiss.IndexFlat) and n_allowed <= policy.exact_max_rows:
        rows = np.flatnonzero(allowed)
        if built.int8 is not None and estimates:  # int8 ranks the rows let through, as it ranks codes' candidates
            return rescoring.rescore(built, queries, np.broadcast_to(rows, (len(queries), len(rows))), k, True)
        scores, positions = faiss.knn(queries, reconstruct(built, rows), k, metric=faiss.METRIC_INNER_PRODUCT)
        return scores, np.where(positions >= 0, rows[np.maximum(positions, 0)], -1)
    bitmap = None if allowed is None else np.packbits(allowed, bitorder="little")
    selector = None if bitmap is None else faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap))
    if not isinstance(index, faiss.IndexIVF):  # every row scanned: float32, or codes then rescoring
        params = None if selector is None else faiss.SearchParameters(sel=selector)
        return (
            index.search(queries, k, params=params)
            if built.rows is None
            else rescoring.rescored(built, queries, k, params, policy, recall_k, estimates)
        )
    nprobe = ivf_tuning.probed_lists(index.nprobe, recall_k, index.nlist, share)
    if allowed is not None:  # a sparse filter empties most probed lists: probe more, in proportion
        nprobe = int(min(index.nlist, np.ceil(nprobe / max(n_allowed / max(index.ntotal, 1), 1e-9))))
    scores, rows = _ivf_search(built, queries, k, nprobe, selector, policy, recall_k, estimates)
    if _short(rows, k) and nprobe < index.nlist:  # probed lists ran dry
        scores, rows = _ivf_search(built, queries, k, index.nlist, selector, policy, recall_k, estimates)
    return scores, rows  # ``bitmap`` stays alive until here


def _ivf_search(
    built: VectorIndex,
    queries: np.ndarray,
    k: int,
    nprobe: int,
    selector,
    policy: IndexPolicy,
    recall_k: int = 10,
    estimates: bool = False,
):
    """Top ``k`` of an IVF over ``nprobe`` lists; compressed codes pass their best candidates to rescoring."""
    params = faiss.SearchParametersIVF(nprobe=nprobe)
    if selector is not None:
        params.sel = selector
    if built.rows is None:
        return built.index.search(queries, k, params=params)
    return rescoring.rescored(built, queries, k, params, policy, recall_k, estimates)


def _short(rows: np.ndarray, k: int) -> bool:
    """Whether some query's row of ``rows`` ``(q, k)`` has fewer than ``k`` hits."""
    return bool(((rows >= 0).sum(axis=1) < k).any())
