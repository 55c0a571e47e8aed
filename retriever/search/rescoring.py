"""Rescoring the candidates compressed codes pass on: int8 rows rank them, float32 rows score the best.

1-bit codes rank a segment's rows roughly; their best candidates (``candidates``:
at least 100) are ranked again by the segment's int8 copies of its rows
(``int8_rows``), and the best of those (twice the hits asked for, and
``EXACT_SLACK`` more) are read in float32 for their exact inner products. A
caller that gathers many segments' hits asks for ``estimates`` instead: the
int8 ranking's own scores, to be made exact by ``vector_index.exact_scores`` for only the
hits it keeps (a search over fourteen segments of ten million chunks reads
twenty float32 rows rather than two hundred). Segments written before int8
copies existed rescore every candidate from float32. ``built`` is a
segment's ``vector_index.VectorIndex`` with codes, ``policy`` its ``IndexPolicy``.
"""

from __future__ import annotations

import numpy as np

from retriever.search import int8_rows
from retriever.storage.paging import gather_rows

DEEP_CANDIDATES = 3  # candidates rescored per hit past the 10th
EXACT_SLACK = 4  # candidates past twice the hits asked for that int8 ranks best and float32 scores


def candidates(built, k: int, policy, recall_k: int = 10) -> int:
    """How many candidates compressed codes pass to rescoring for ``k`` hits, at least 100: the segment's
    tuned factor (``policy.rescore`` where none was recorded) for each of the hits recall is wanted for
    (``recall_k``, at least 10: the factor was tuned on the top 10), and ``DEEP_CANDIDATES`` for each hit
    past them (a hybrid search fuses 100 a side and shows 10, so the hits past 10 need fewer)."""
    per_hit = int(built.info.get("rescore", policy.rescore))
    wanted = min(k, max(recall_k, 10))
    return max(100, per_hit * wanted + DEEP_CANDIDATES * (k - wanted))


def rescored(
    built, queries: np.ndarray, k: int, params, policy, recall_k: int = 10, estimates: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` of the candidates compressed codes rank first (searched with ``params``), rescored."""
    _, found = built.index.search(queries, min(candidates(built, k, policy, recall_k), built.ntotal), params=params)
    return rescore(built, queries, found, k, estimates)


def rescore(
    built, queries: np.ndarray, found: np.ndarray, k: int, estimates: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of each query's candidates ``found`` (``(q, c)`` rows, -1 for none).

    Returns:
        ``(scores, rows)`` of shape ``(q, k)``, row -1 where fewer: exact inner products, or with
        ``estimates`` (and int8 rows) the int8 ranking's own.
    """
    scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    rows = np.full((len(queries), k), -1, dtype=np.int64)
    for i, query in enumerate(queries):
        ids = found[i][found[i] >= 0]
        if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():  # a filter's rows are ascending already
            ids = np.unique(ids)  # ascending rows: a gather reads pages in order
        if built.int8 is not None:
            estimated = int8_rows.scores(built.int8, ids, query)
            keep = np.argsort(-estimated, kind="stable")[: k if estimates else 2 * k + EXACT_SLACK]
            if estimates:
                scores[i, : len(keep)], rows[i, : len(keep)] = estimated[keep], ids[keep]
                continue
            ids = np.sort(ids[keep])
        exact = gather_rows(built.rows, ids) @ query
        best = np.argsort(-exact, kind="stable")[:k]
        scores[i, : len(best)], rows[i, : len(best)] = exact[best], ids[best]
    return scores, rows
