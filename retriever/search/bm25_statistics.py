"""Collection-wide BM25 statistics given from outside a view: a collection split into shards.

``bm25.bm25_top`` scores with the statistics of the live documents of the
parts it is given. A collection split into shards (``retriever.sharding``)
holds its documents in several views, so each shard must score with the
statistics of all of them together, as Elasticsearch's DFS query-then-fetch
does: each shard's ``view_statistics`` for the query's terms are gathered
first and ``summed``, and every shard then scores with the sum
(``ranking.bm25_ranking(..., statistics=...)``). A score is then the one an
unsharded collection of the same live documents gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from retriever.storage.view import View


@dataclass(frozen=True)
class BM25Statistics:
    """The statistics BM25 scores a query with: the live documents' count and summed length, and each of the
    query's terms' live document frequency.

    Attributes:
        n_docs: Live documents.
        total_length: Their summed BM25 length (an integer value, held as a float).
        df: ``{term: live documents holding it}`` for the query's terms (a term absent: 0).
    """

    n_docs: int = 0
    total_length: float = 0.0
    df: dict[str, int] = field(default_factory=dict)

    @property
    def totals(self) -> tuple[int, float]:
        """``(n_docs, total_length)``, as ``bm25.bm25_top`` takes them."""
        return self.n_docs, self.total_length


def view_statistics(view: View, terms: Sequence[str]) -> BM25Statistics:
    """The BM25 statistics of ``view``'s live documents for the query terms ``terms`` (repeats counted once)."""
    distinct = list(dict.fromkeys(terms))
    df = np.zeros(len(distinct), dtype=np.int64)
    for part in view.parts:
        postings = part.segment.postings
        for j, term in enumerate(distinct):
            at = postings.vocabulary.get(term)
            if at is None:
                continue
            rows = postings.rows[int(postings.indptr[at]) : int(postings.indptr[at + 1])]
            df[j] += len(rows) if part.live_docs is None else int(np.count_nonzero(part.live_docs[rows]))
    return BM25Statistics(view.n_live_docs, float(view.live_length), dict(zip(distinct, df.tolist())))


def summed(statistics: Iterable[BM25Statistics]) -> BM25Statistics:
    """The statistics of several disjoint sets of documents together (shards of one collection)."""
    n_docs, total_length, df = 0, 0.0, {}
    for each in statistics:
        n_docs += each.n_docs
        total_length += each.total_length
        for term, count in each.df.items():
            df[term] = df.get(term, 0) + count
    return BM25Statistics(n_docs, total_length, df)
