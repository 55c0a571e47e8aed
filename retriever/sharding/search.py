"""Search over shards, exactly as one collection of the same documents would answer.

The steps of ``retriever.search.searcher.Searcher.search``, spread over the
shards and merged where the single collection ranks:

1. The query is embedded once (shard 0's model: every shard has the same).
2. BM25's statistics (live document count, summed length, each query term's
   live document frequency) are gathered from every shard first and summed
   (``bm25_statistics``; Elasticsearch's DFS query-then-fetch), and the query
   is read in each language any shard holds.
3. Each shard ranks its dense and its BM25 candidates to the search's depth
   (``options.depth``: ``k``, or the hybrid depth), its filter applied first,
   in a thread of its own; each side's candidates are merged into the global
   top ``depth`` by score.
4. Pseudo-relevance feedback and fusion run once, on the merged rankings: the
   expanded query rescores the merged candidates on their own shards, and
   those rankings are merged again before the fusion that is shown.
5. The top ``k`` become hits on their shards (one catalog read each), and
   their evidence is found with the collection-wide idf.

Keys of the merged rankings are ``(shard, key)``: a document key is unique
within its shard's catalog only. Scores equal those of one collection holding
the same documents where the shards' vector indexes are exact (flat, or
``exact=True``); documents with equal scores may come in another order.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from retriever.documents import Hit
from retriever.search.bm25_statistics import summed, view_statistics
from retriever.search.feedback import FEEDBACK_DOCS, feedback_chunk, moved_toward, rescored
from retriever.search.options import SearchOptions
from retriever.search.ranking import Ranking, bm25_ranking, dense_rankings, term_idf
from retriever.sharding.parallel import in_parallel
from retriever.storage.view import View

ShardKey = tuple[int, int]  # (shard, document key)
#: A ranking merged over shards: ``[((shard, key), score)]`` best first, and per shard its keys' places
#: (``key -> (part, chunk row)`` dense, ``(part, document row)`` BM25), as a ``Ranking`` holds them.
Merged = tuple[list[tuple[ShardKey, float]], list[dict[int, tuple[int, int]]]]


def sharded_search(shards: Sequence, query: str | None, vector: np.ndarray | None, options: SearchOptions) -> list[Hit]:
    """Hits of a checked search over ``shards`` (``Collection``\\ s of one sharded collection), in order.

    Args:
        shards: The shard collections, in shard order.
        query: The query text, or ``None`` with ``vector``.
        vector: ``(1, dim)`` unit query vector, or ``None``.
        options: Settled options (``SearchOptions.settled``).
    """
    views = [shard.reader.current() for shard in shards]
    allowed = [_allowed(shard, view, options.where) for shard, view in zip(shards, views)]
    active = [i for i, mask in enumerate(allowed) if mask is not False]
    if not active:
        return []  # the filter matches no document
    first, mode, depth = shards[0].searcher, options.mode, options.depth
    everything = View(views[0].generation, [part for view in views for part in view.parts])  # statistics only
    query_vector = vector
    if mode in ("dense", "hybrid") and vector is None:
        query_vector = first.embed([query], views[0].generation)
    terms = first.query_terms(everything, query, options.lang) if query is not None and mode != "dense" else []
    statistics = summed(view_statistics(view, terms) for view in views) if mode != "dense" else None

    def ranked_on(i: int) -> tuple[Ranking, Ranking]:
        shard, view, mask = shards[i], views[i], allowed[i] or None
        dense: Ranking = ([], {})
        sparse: Ranking = ([], {})
        if mode in ("dense", "hybrid"):
            policy = shard.searcher.index_policy
            dense = dense_rankings(view, query_vector, depth, mask, options.exact, policy, options.k)[0]
        if mode in ("bm25", "hybrid"):
            sparse = bm25_ranking(view, terms, depth, mask, shard.searcher.k1, shard.searcher.b, statistics)
        return dense, sparse

    sides = dict(zip(active, in_parallel(ranked_on, active)))
    n = len(shards)
    dense = merged({i: sides[i][0] for i in active}, n, depth)
    sparse = merged({i: sides[i][1] for i in active}, n, depth)
    if mode == "hybrid" and options.feedback and dense[0]:
        dense = _with_feedback(views, query_vector, dense, sparse, options)
    one_side = (dense if mode == "dense" else sparse)[0]
    ranked = options.fusion_strategy().fuse(dense[0], sparse[0]) if mode == "hybrid" else one_side
    hits, passages = _shown(shards, views, ranked[: options.k], dense[1], sparse[1], terms)
    return first.with_evidence(
        views[0], hits, passages, query, query_vector, options.evidence, idf=lambda some: term_idf(everything, some)
    )


def _allowed(shard, view: View, where) -> list[np.ndarray] | None | bool:
    """Per part of ``view``, the documents ``where`` lets through; ``None`` without a filter, ``False`` when
    none of the shard's documents match."""
    if where is None:
        return None
    keys = shard.catalog.matching_keys(where)
    if not len(keys):
        return False
    return [part.allowed_docs(keys) for part in view.parts]


def merged(rankings: dict[int, Ranking], n_shards: int, depth: int) -> Merged:
    """The best ``depth`` of per-shard ``rankings`` (``{shard: Ranking}``) by score; equal scores keep shard
    order, then each shard's own."""
    entries = [
        (score, i, position, key) for i, (ranked, _) in rankings.items() for position, (key, score) in enumerate(ranked)
    ]
    entries.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    places: list[dict[int, tuple[int, int]]] = [{} for _ in range(n_shards)]
    ranked = []
    for score, i, _, key in entries[:depth]:
        ranked.append(((i, key), score))
        places[i][key] = rankings[i][1][key]
    return ranked, places


def _with_feedback(views: list[View], query_vector: np.ndarray, dense: Merged, sparse: Merged, options) -> Merged:
    """The merged candidates of both sides rescored by the query moved toward the first fusion's best
    documents (``retriever.search.feedback``), each on its shard, and merged again."""
    first = [shard_key for shard_key, _ in options.feedback_strategy().fuse(dense[0], sparse[0])]
    query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    chunks = [feedback_chunk(views[i], key, dense[1][i], query) for i, key in first[:FEEDBACK_DOCS]]
    expanded = moved_toward(query_vector, [chunk for chunk in chunks if chunk is not None])
    holding = [i for i in range(len(views)) if dense[1][i] or sparse[1][i]]
    again = in_parallel(
        lambda i: rescored(views[i], expanded, ([], dense[1][i]), ([], sparse[1][i]), options.depth), holding
    )
    return merged(dict(zip(holding, again)), len(views), options.depth)


def _shown(shards, views, ranked: list[tuple[ShardKey, float]], dense_places, sparse_places, terms):
    """Hits and their passages for the globally ``ranked`` keys, built on their shards (``Searcher.shown``)."""
    by_shard: dict[int, list[tuple[int, float]]] = {}
    for (i, key), score in ranked:
        by_shard.setdefault(i, []).append((key, score))
    found: dict[ShardKey, tuple] = {}
    for i, some in by_shard.items():
        for key, hit, passage in shards[i].searcher.shown(views[i], some, dense_places[i], sparse_places[i], terms):
            found[(i, key)] = (hit, passage)
    shown = [found[shard_key] for shard_key, _ in ranked if shard_key in found]  # a document deleted meanwhile: out
    return [hit for hit, _ in shown], [passage for _, passage in shown]
