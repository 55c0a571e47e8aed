"""The searcher (Lucene's IndexSearcher): arguments checked once, then ranked and shown.

``Searcher.search`` takes a query (text, vector or both) and its
``SearchOptions``; it runs the dense side (one embedding, one index search per
segment, or a shared scan in a micro-batch for servers), the keyword side
(BM25 with collection-wide statistics) or both (on a large collection side by
side, ``sides``), fused (``fusion``: the options' strategy) after the candidates of both are scored again with
pseudo-relevance feedback (``feedback``), over the view of the committed
generation, and turns the top keys into ``Hit``s with one catalog read for
their display fields. The keyword side reads the query in its given language,
or in each language the view's segments hold (``multilingual``).
"""

from __future__ import annotations

import functools
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from retriever import deadline
from retriever.documents import Hit
from retriever.encoding.batching import MicroBatcher
from retriever.errors import DeadlineExceededError
from retriever.locations import location_at, without_locations
from retriever.search.bm25 import Analyzer
from retriever.search.evidence import EvidenceFinder, Passage
from retriever.search.feedback import expanded_query, rescored
from retriever.search.languages import ENGLISH
from retriever.search.multilingual import MultilingualAnalyzer, view_languages
from retriever.search.options import SearchOptions
from retriever.search.ranking import Ranking, bm25_ranking, dense_rankings, keyword_chunk, term_idf
from retriever.search.sides import CONCURRENT_MIN_DOCS, SideThreads
from retriever.search.vector_index import IndexPolicy
from retriever.storage.catalog import Catalog
from retriever.storage.reader import GenerationReader
from retriever.storage.view import View
from retriever.telemetry import Timings


class Searcher:
    """Searches the collection whose catalog and generations ``catalog`` and ``reader`` hold.

    Args:
        catalog: The collection's catalog (filters and display fields).
        reader: Its committed generation.
        analyzer: The BM25 analysis the segments were indexed with (an ``Analyzer`` alone: English only).
        bm25: ``{"k1", "b"}`` of the collection.
        index_policy: When a segment's approximate index is used.
        embed: ``(texts, generation) -> (n, dim)`` unit vectors, by the model that embedded
            ``generation`` (queries and the sentences of evidence alike).
        timings: Where the stages of each search are timed (``encode``,
            ``dense``, ``bm25``, ``fusion``, ``display``); default: untimed. ``bm25`` is the wait
            for it where it ran beside the dense side (``sides``).

    Attributes:
        sides: The helper threads that take a large hybrid search's keyword side (``sides.SideThreads``).
    """

    def __init__(
        self,
        catalog: Catalog,
        reader: GenerationReader,
        analyzer: Analyzer | MultilingualAnalyzer,
        bm25: dict[str, Any],
        index_policy: IndexPolicy,
        embed: Callable[[list[str], int], np.ndarray],
        timings: Timings | None = None,
    ) -> None:
        self.catalog = catalog
        self.reader = reader
        self.analyzer = analyzer if isinstance(analyzer, MultilingualAnalyzer) else MultilingualAnalyzer(analyzer)
        self.k1, self.b = float(bm25["k1"]), float(bm25["b"])
        self.index_policy = index_policy
        self.embed = embed
        self.timings = timings or Timings()
        self.batcher: MicroBatcher | None = None
        self.sides = SideThreads()

    def batch_searches(self, max_batch: int, max_wait_s: float) -> None:
        """Meet the dense side of concurrent unfiltered searches in one scan (see ``Collection.batch_searches``)."""
        if self.batcher is None:
            self.batcher = MicroBatcher(self.rank_batch, max_batch, max_wait_s)

    def search(self, query: str | None, vector: np.ndarray | None, options: SearchOptions) -> list[Hit]:
        """Hits for a checked search: ``vector`` is ``(1, dim)`` unit norm or ``None``; ``options.mode`` fits
        them; with ``options.feedback``, hybrid scores both sides' candidates again with ``feedback.expanded_query``."""
        view = self.reader.current()
        allowed = None
        if options.where is not None:
            keys = self.catalog.matching_keys(options.where)
            if not len(keys):
                return []
            allowed = [part.allowed_docs(keys) for part in view.parts]
        mode, k, depth = options.mode, options.k, options.depth
        timed = self.timings.timed
        dense: Ranking = ([], {})
        batched = None
        query_vector = vector
        if mode in ("dense", "hybrid"):
            with timed("encode"):
                query_vector = vector if vector is not None else self.embed([query], view.generation)
        keyword_side = None
        terms = self.query_terms(view, query, options.lang) if query is not None and mode != "dense" else []
        if mode in ("bm25", "hybrid"):
            keyword_side = functools.partial(bm25_ranking, view, terms, depth, allowed, self.k1, self.b)
            if mode == "hybrid" and view.n_live_docs >= CONCURRENT_MIN_DOCS:
                keyword_side = self.sides.start(keyword_side)  # beside the dense side, where a helper is idle
        if mode in ("dense", "hybrid"):
            if self.batcher is not None and allowed is None and not options.exact:
                batched = self.batcher.submit((view, query_vector, depth, k))  # scanned with concurrent searches
            else:
                with timed("dense"):
                    dense = dense_rankings(view, query_vector, depth, allowed, options.exact, self.index_policy, k)[0]
        sparse: Ranking = ([], {})
        if keyword_side is not None:
            with timed("bm25"):
                sparse = keyword_side()
        if batched is not None:
            with timed("dense"):
                dense = _batched_result(batched)
        if mode == "hybrid" and options.feedback and dense[0]:
            with timed("feedback"):
                first = [key for key, _ in options.feedback_strategy().fuse(dense[0], sparse[0])]
                expanded = expanded_query(view, query_vector, first, dense[1])
                dense = rescored(view, expanded, dense, sparse, depth)
        with timed("fusion"):
            one_side = (dense if mode == "dense" else sparse)[0]
            ranked = options.fusion_strategy().fuse(dense[0], sparse[0]) if mode == "hybrid" else one_side
        with timed("display"):
            hits, passages = self.hits(view, ranked[:k], dense[1], sparse[1], terms)
            return self.with_evidence(view, hits, passages, query, query_vector, options.evidence)

    def query_terms(self, view: View, query: str, lang: str | None) -> list[str]:
        """The keyword side's terms of ``query``: read in ``lang``, or else in each language of ``view``
        (``view_languages``; English alone in a collection analysed in English only)."""
        if lang is not None:
            codes = [lang]
        elif self.analyzer.multilingual:
            codes = view_languages(view) or [ENGLISH]
        else:
            codes = [ENGLISH]
        return self.analyzer.query_terms(query, codes)

    def with_evidence(
        self,
        view: View,
        hits: list[Hit],
        passages: list,
        query: str | None,
        query_vector,
        evidence: str,
        idf: Callable[[Sequence[str]], dict[str, float]] | None = None,
    ) -> list[Hit]:
        """``hits`` with the ``evidence`` found in their ``passages`` (the query's vector embedded only if needed).

        ``idf``: ``(terms) -> {term: idf}`` over the whole collection where ``view`` is one shard of it;
        default: over ``view`` (``ranking.term_idf``).
        """
        if evidence == "none" or not hits:
            return hits
        embed = functools.partial(self.embed, generation=view.generation)  # the model of the view searched
        vector_once = functools.cache(lambda: query_vector if query_vector is not None else embed([query]))
        finder = EvidenceFinder(self.analyzer, idf or (lambda terms: term_idf(view, terms)), embed)
        languages = [self.analyzer.language_of(hit.metadata) for hit in hits]
        found = finder.find(passages, query, vector_once, evidence, languages)
        return [replace(hit, evidence=sentences) for hit, sentences in zip(hits, found)]

    def rank_batch(self, items: list[tuple[View, np.ndarray, int, int]]) -> list[Ranking]:
        """Dense rankings of ``(view, query vector (1, dim), depth, hits shown)`` items, each group of one view,
        depth and hits shown at once."""
        groups: dict[tuple[int, int, int], list[int]] = {}
        for position, (view, _, depth, shown) in enumerate(items):
            groups.setdefault((id(view), depth, shown), []).append(position)
        results: list = [None] * len(items)
        for positions in groups.values():
            view, _, depth, shown = items[positions[0]]
            vectors = np.concatenate([items[p][1] for p in positions])
            rankings = dense_rankings(view, vectors, depth, None, False, self.index_policy, shown)
            for position, ranking in zip(positions, rankings):
                results[position] = ranking
        return results

    def hits(
        self,
        view: View,
        ranked: list[tuple[int, float]],
        dense_chunks: dict[int, tuple[int, int]],
        sparse_rows: dict[int, tuple[int, int]],
        query_terms: list[str],
    ) -> tuple[list[Hit], list[Passage]]:
        """Hits for ranked keys, and their chunks in context (``shown``, without the keys)."""
        shown = self.shown(view, ranked, dense_chunks, sparse_rows, query_terms)
        return [hit for _, hit, _ in shown], [passage for _, _, passage in shown]

    def shown(
        self,
        view: View,
        ranked: list[tuple[int, float]],
        dense_chunks: dict[int, tuple[int, int]],
        sparse_rows: dict[int, tuple[int, int]],
        query_terms: list[str],
    ) -> list[tuple[int, Hit, Passage]]:
        """``(key, hit, chunk in context)`` for ranked keys, in order; one catalog read for their display fields.

        Each hit shows its best dense chunk, or (found by keywords alone) the
        chunk holding the most distinct ``query_terms``. Every hit's chunk is
        known before any text is read, so all their texts are read side by side.
        A key deleted since ``view`` was loaded is left out.
        """
        keyword_only = query_terms and any(key not in dense_chunks for key, _ in ranked)
        terms = sorted(set(query_terms)) if keyword_only else []
        chunks = {
            key: dense_chunks[key] if key in dense_chunks else _keyword_chunk(view, sparse_rows[key], terms)
            for key, _ in ranked
        }
        _read_texts_ahead(view, list(chunks.values()))
        display = self.catalog.by_keys([key for key, _ in ranked])
        shown = []
        for key, score in ranked:
            row = display.get(key)
            if row is None:  # deleted since this view was loaded
                continue
            i, chunk = chunks[key]
            segment = view.parts[i].segment
            start, end = (int(x) for x in segment.spans[chunk])
            first, last = segment.context_chunks(chunk)  # the chunks either side, for the sentences this one cuts
            passage = Passage.around(*segment.chunks_text(first, last), start, end)
            text = passage.text[start - passage.offset : end - passage.offset]
            location = location_at(row.meta, start)  # the part of its source the chunk starts in
            hit = Hit(row.id, score, row.title, text, start, end, without_locations(row.meta), location=location)
            shown.append((key, hit, passage))
        return shown


def _keyword_chunk(view: View, part_row: tuple[int, int], terms: list[str]) -> tuple[int, int]:
    """``(part, chunk row)`` of the chunk of document ``(part, row)`` that holds the most distinct ``terms``."""
    i, doc_row = part_row
    return i, keyword_chunk(view.parts[i].segment, doc_row, terms)


def _read_texts_ahead(view: View, chunks: list[tuple[int, int]]) -> None:
    """Start reading the texts of ``(part, chunk row)`` hits and their neighbours, all at once, while the
    catalog is read (``Segment.read_texts_ahead``)."""
    by_part: dict[int, list[int]] = {}
    for i, chunk in chunks:
        by_part.setdefault(i, []).append(chunk)
    for i, rows in by_part.items():
        segment = view.parts[i].segment
        segment.read_texts_ahead([segment.context_chunks(chunk) for chunk in rows])


def _batched_result(future: Future) -> Ranking:
    """The ranking a search batch computed for this search, within this thread's deadline."""
    left = deadline.remaining()
    try:
        return future.result(None if left is None else max(left, 0.0))
    except FutureTimeout:
        future.cancel()
        raise DeadlineExceededError("the search ran past its deadline while waiting for its batch") from None
