"""Where an IVF segment searches: ``nprobe`` and the rescoring factor, tuned on query-like probes.

Real queries sit further from their documents than documents sit from each
other, so probes drawn near the data flatter an IVF: an ``nprobe`` tuned on
midpoints of neighbouring rows leaves real queries well short of the recall
target (docs/benchmarks.md). ``probe_queries`` places probes as far off as
real queries sit, and ``tune`` picks the cheapest ``nprobe`` (and, for compressed codes, the
cheapest number of candidates to rescore) that reaches the target on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import faiss
import numpy as np

PROBE_SAMPLE = 200_000  # rows that scale the probes' noise (a 50,000 sample made probes too easy at 1M rows)
PROBES = 400  # probe queries: enough that a recall estimate barely moves from one draw to the next (docs/benchmarks.md)
RESCORE_COST = 60  # codes scanned in the time one candidate is rescored (AVX-512 fast scan, measured)
RESCORE_FACTORS = (1, 2, 4, 8)  # times IndexPolicy.rescore that compressed codes may try
#: Halvings of the gap between the last power-of-two ``nprobe`` short of the goal and the first that
#: reaches it: every list probed costs each search a scan, and the powers of two alone can leave a segment
#: at twice the lists it needs (docs/benchmarks.md).
BISECTIONS = 2
#: The least share of its tuned ``nprobe`` that a part holding part of a search's rows probes (``probed_lists``).
SHARED_NPROBE_FLOOR = 0.75


@dataclass(frozen=True)
class Tuned:
    """What ``tune`` chose: ``nprobe``, the probes' recall@10 there, and the rescoring factor per hit
    (``None`` for float32 lists, which need no rescoring)."""

    nprobe: int
    recall: float
    rescore: int | None
    cost: float

    def info(self) -> dict:
        """The entries a segment records in its index info."""
        out = {"nprobe": self.nprobe, "recall": round(self.recall, 4)}
        return out if self.rescore is None else {**out, "rescore": self.rescore}


Search = Callable[[np.ndarray, int, int, "int | None"], "tuple[np.ndarray, int]"]


def tune(search: Search, vectors: np.ndarray, nlist: int, compressed: bool, policy, rng) -> Tuned:
    """The cheapest ``nprobe`` (and, with ``compressed`` codes, rescoring factor) whose recall@10 on
    ``probe_queries`` beats ``policy.target_recall`` + 0.02; the best recall where none does. ``nprobe``
    doubles until it reaches the goal, then the gap from the last one short of it is halved ``BISECTIONS``
    times.

    Args:
        search: ``search(queries, k, nprobe, rescore)`` -> ``((q, k) rows, candidates rescored per query)``,
            the whole segment search (codes, then rescoring at ``rescore`` a hit; ``None`` and 0 for float32 lists).
        vectors: The segment's ``(n, dim)`` float32 unit rows.
        policy: An ``IndexPolicy`` (``target_recall``, ``rescore``, ``probe_ratio``).

    Compressed codes try factors ``RESCORE_FACTORS`` times ``policy.rescore``;
    the cost of a pair is codes scanned plus ``RESCORE_COST`` per candidate:
    where 1-bit codes rank true neighbours too low, probing more lists cannot
    help and more candidates can.
    """
    n = len(vectors)
    queries = probe_queries(vectors, rng, policy.probe_ratio)
    k = min(10, n)
    _, exact = faiss.knn(queries, vectors, k, metric=faiss.METRIC_INNER_PRODUCT)
    goal = min(1.0, policy.target_recall + 0.02)
    best = None

    def attempt(nprobe: int, rescore: int | None) -> Tuned:
        nonlocal best
        found, candidates = search(queries, k, nprobe, rescore)
        recall = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(exact, found)]))
        tried = Tuned(nprobe, recall, rescore, nprobe * n / nlist + RESCORE_COST * candidates)
        if _better(tried, best, goal):
            best = tried
        return tried

    for factor in RESCORE_FACTORS if compressed else (None,):
        rescore = None if factor is None else policy.rescore * factor
        short, nprobe = 0, 1  # short: the largest nprobe known to miss the goal
        while True:
            tried = attempt(nprobe, rescore)
            if tried.recall >= goal or nprobe >= nlist or (best.recall >= goal and tried.cost >= best.cost):
                break
            short, nprobe = nprobe, min(nlist, nprobe * 2)
        reached = tried.recall >= goal
        for _ in range(BISECTIONS if reached else 0):  # between the last power of two short and the first reaching
            middle = (short + nprobe) // 2
            if middle <= short:
                break
            if attempt(middle, rescore).recall >= goal:
                nprobe = middle
            else:
                short = middle
        if best.recall >= goal and best.nprobe == 1:
            break
    return best


def _better(tried: Tuned, best: Tuned | None, goal: float) -> bool:
    """Reaching ``goal`` first, then the lower cost; below it, the higher recall."""
    if best is None:
        return True
    if (tried.recall >= goal) != (best.recall >= goal):
        return tried.recall >= goal
    return tried.cost < best.cost if tried.recall >= goal else tried.recall > best.recall


def deep_nprobe(nprobe: int, k: int, nlist: int) -> int:
    """Lists to probe for ``k`` hits when ``nprobe`` reaches the recall target for 10: a deeper top ``k``
    reaches further from the query, so ``nprobe`` grows with ``sqrt(k / 10)`` (4 times for 100), at most
    ``nlist``. With the tuned ``nprobe`` alone, recall@100 of compressed codes fell on the visible sets
    (docs/benchmarks.md)."""
    if k <= 10:
        return nprobe
    return int(min(nlist, nprobe * 2 ** int(np.ceil(np.log2(np.sqrt(k / 10))))))


def probe_queries(vectors: np.ndarray, rng, ratio: float, count: int = PROBES) -> np.ndarray:
    """``(count, dim)`` float32 unit probes placed as real queries sit: off the rows, in their regions.

    A query shares a topic with the documents it finds but is never one of
    them; embedded queries sit further from their best document than
    documents sit from their nearest neighbour. Each probe is a random row
    plus noise drawn from the rows' own covariance (so it moves the ways the
    data varies), the noise scaled so that a probe's median best cosine over
    the rows is ``ratio`` times a row's median nearest-neighbour cosine
    (``IndexPolicy.probe_ratio``). Measured on rows of five BEIR corpora
    embedded by all-MiniLM-L6-v2, their real queries sit at 0.76 to 0.78; but
    at a million rows real queries needed more probes and candidates than
    probes at 0.78 did, so the default asks for 0.75.
    Scaled on a sample of at most ``PROBE_SAMPLE`` rows.
    """
    n, dim = vectors.shape
    sample = vectors if n <= PROBE_SAMPLE else vectors[np.sort(rng.choice(n, PROBE_SAMPLE, replace=False))]
    spread = sample[rng.choice(len(sample), min(len(sample), 4096), replace=False)].astype(np.float64)
    values, axes = np.linalg.eigh(np.atleast_2d(np.cov(spread.T)))
    root = ((axes * np.sqrt(np.maximum(values, 0.0))) @ axes.T).astype(np.float32)
    anchors = sample[rng.choice(len(sample), size=count, replace=len(sample) < count)]
    noise = rng.standard_normal((count, dim)).astype(np.float32) @ root
    if len(sample) < 2:
        return _unit(anchors + noise)
    nearest, _ = faiss.knn(anchors, sample, 2, metric=faiss.METRIC_INNER_PRODUCT)
    target = ratio * float(np.median(nearest[:, 1]))
    low, high = 0.0, 8.0
    for _ in range(8):  # the median best cosine falls as the noise grows
        scale = (low + high) / 2
        best, _ = faiss.knn(_unit(anchors + scale * noise), sample, 1, metric=faiss.METRIC_INNER_PRODUCT)
        low, high = (scale, high) if np.median(best[:, 0]) > target else (low, scale)
    return _unit(anchors + high * noise)


def _unit(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12), dtype=np.float32)


def probed_lists(nprobe: int, recall_k: int, nlist: int, share: float = 1.0) -> int:
    """Lists to probe in a part tuned to ``nprobe`` that holds ``share`` of the rows a search spans and fetches
    about its share of the top ``recall_k`` (the caller's judgement; 1.0 for a full-depth search).

    Deeper than 10, ``deep_nprobe``. Otherwise a part's share of the top 10 is its best ``10 * share``
    chunks, nearer the query than the 10 ``nprobe`` is tuned for: it probes ``nprobe * sqrt(share)`` lists
    (``deep_nprobe``'s law, the other way), at least ``SHARED_NPROBE_FLOOR`` of them (recall and time
    at each share are measured in docs/benchmarks.md).
    """
    if recall_k > 10 or share >= 1.0:
        return deep_nprobe(nprobe, recall_k, nlist)
    return max(1, min(nlist, int(np.ceil(nprobe * max(SHARED_NPROBE_FLOOR, float(np.sqrt(share)))))))
