"""The evidence of hits: the sentences of each passage that match the query best.

Two ways to score a sentence:

- ``terms``: BM25 of the query's terms within the sentence, as Lucene's
  unified highlighter scores passages (the collection's idf; term
  frequency saturated with ``k1 = 1.2``, length normalised by ``b = 0.75``
  against a pivot of 87 characters). Costs microseconds. The query is read
  in each hit's language (``multilingual``), so the words of the hit that
  analyse as a query word does in that language are the ones found.
- ``semantic``: the sentence embedded with the collection's model, scored
  by cosine to the query vector. Costs an encoder pass over the sentences
  (a few milliseconds each on a CPU), so it is bounded per search.

Modes (``EVIDENCE_MODES``): ``"auto"`` scores by terms and turns to the model
only for passages that hold none of the query's terms (a match on meaning
alone), at most ``AUTO_MODEL_SENTENCES`` sentences per search, and only for
a query given as text (a vector may come from another model); ``"terms"``
never runs the model; ``"semantic"`` scores every sentence with the model
(at most ``MAX_MODEL_SENTENCES`` per search, best hits first); ``"none"``
finds no evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from retriever.documents import Evidence, TermMatch
from retriever.search.bm25 import Analyzer
from retriever.search.languages import ENGLISH
from retriever.search.multilingual import MultilingualAnalyzer
from retriever.search.sentences import MAX_SENTENCE_CHARS, sentence_spans

EVIDENCE_MODES = ("auto", "terms", "semantic", "none")
DEFAULT_EVIDENCE = "terms"  # auto adds the model where no term matches: tens of ms at the 95th percentile
MAX_SENTENCES = 2  # evidence sentences per hit
AUTO_MODEL_SENTENCES = 24
MAX_MODEL_SENTENCES = 512
_K1, _B, _PIVOT = 1.2, 0.75, 87.0
_SECOND_TERMS = 0.5  # a second sentence by terms needs half the best one's score
_SECOND_SEMANTIC = 0.05  # a second sentence by meaning must be within this cosine of the best


@dataclass(frozen=True)
class Passage:
    """A hit's chunk and the text around it.

    Attributes:
        text: The chunk with up to ``MAX_SENTENCE_CHARS`` of its document on
            each side, so that a sentence the chunk cuts is found whole.
        offset: Character offset of ``text`` in the document.
        start: Offset of the chunk in the document (default: ``offset``).
        end: Offset one past the chunk's end (default: the end of ``text``).
    """

    text: str
    offset: int
    start: int | None = None
    end: int | None = None

    @classmethod
    def around(cls, window: str, window_offset: int, start: int, end: int) -> "Passage":
        """The chunk ``[start, end)`` (document offsets) inside ``window``, which starts at ``window_offset``."""
        lo = max(0, start - window_offset - MAX_SENTENCE_CHARS)
        hi = min(len(window), end - window_offset + MAX_SENTENCE_CHARS)
        return cls(window[lo:hi], window_offset + lo, start, end)

    def sentences(self) -> list[tuple[int, int]]:
        """Spans in ``text`` of the sentences that overlap the chunk."""
        lo = (self.offset if self.start is None else self.start) - self.offset
        hi = len(self.text) if self.end is None else self.end - self.offset
        return [(s, e) for s, e in sentence_spans(self.text) if s < hi and e > lo]


class EvidenceFinder:
    """Finds the evidence of a search's passages.

    Args:
        analyzer: The collection's BM25 analysis (finds query terms as the index does); an ``Analyzer``
            alone reads every passage as English.
        idf: ``(terms) -> {term: idf}`` over the collection.
        embed: ``(texts) -> (n, dim)`` unit vectors from the collection's model.
    """

    def __init__(
        self,
        analyzer: Analyzer | MultilingualAnalyzer,
        idf: Callable[[Sequence[str]], dict[str, float]],
        embed: Callable[[list[str]], np.ndarray],
    ) -> None:
        self.analyzer = analyzer if isinstance(analyzer, MultilingualAnalyzer) else MultilingualAnalyzer(analyzer)
        self.idf = idf
        self.embed = embed

    def find(
        self,
        passages: Sequence[Passage],
        query: str | None,
        query_vector: Callable[[], np.ndarray | None],
        mode: str = DEFAULT_EVIDENCE,
        languages: Sequence[str] | None = None,
    ) -> list[tuple[Evidence, ...]]:
        """Evidence per passage, in order, best sentence first (empty where none matches).

        Args:
            passages: The hits' passages.
            query: The query text, or ``None`` for a search by vector (no terms).
            query_vector: Returns the query's ``(dim,)`` or ``(1, dim)`` unit
                vector, or ``None``; called only when a sentence needs the model.
            mode: One of ``EVIDENCE_MODES``.
            languages: The language of each passage's document (``MultilingualAnalyzer.language_of``),
                the query's terms read in it; default English for every passage.
        """
        if mode == "none" or not passages:
            return [() for _ in passages]
        languages = list(languages) if languages is not None else [ENGLISH] * len(passages)
        terms_in = {code: set(self.analyzer.terms(query, code)) if query else set() for code in set(languages)}
        terms = set().union(*terms_in.values())
        if not terms and (mode == "terms" or (mode == "auto" and not query)):  # nothing to match, nor a model to run
            return [() for _ in passages]
        weights = self.idf(sorted(terms)) if terms else {}
        sentences = [p.sentences() for p in passages]
        found: list[tuple[Evidence, ...]] = [() for _ in passages]
        need_model: list[int] = []
        for i, (passage, spans, code) in enumerate(zip(passages, sentences, languages)):
            if mode != "semantic":
                found[i] = self._by_terms(passage, spans, (terms_in[code], code), weights)
            if mode == "semantic" or (mode == "auto" and not found[i] and query):
                need_model.append(i)
        if need_model:
            budget = MAX_MODEL_SENTENCES if mode == "semantic" else AUTO_MODEL_SENTENCES
            read = [(terms_in[code], code) for code in languages]
            self._by_model(passages, sentences, need_model, read, query_vector, budget, found)
        return found

    def _by_terms(
        self, passage: Passage, spans: list[tuple[int, int]], read: tuple[set[str], str], weights: dict[str, float]
    ) -> tuple[Evidence, ...]:
        """The passage's best sentences by BM25 of the query terms in them; ``read`` is ``(the query's terms
        read in the passage's language, that language)``."""
        terms, code = read
        if not terms or not spans:
            return ()
        lo, hi = spans[0][0], spans[-1][1]  # the sentences that overlap the chunk, no more
        matches = [(s + lo, e + lo, t) for s, e, t in self.analyzer.term_spans(passage.text[lo:hi], terms, code)]
        if not matches:
            return ()
        scored = []
        for start, end in spans:
            inside = [m for m in matches if start <= m[0] and m[1] <= end]
            if not inside:
                continue
            frequency: dict[str, int] = {}
            for _, _, term in inside:
                frequency[term] = frequency.get(term, 0) + 1
            norm = _K1 * (1 - _B + _B * (end - start) / _PIVOT)
            score = sum(weights.get(t, 1.0) * f * (_K1 + 1) / (f + norm) for t, f in frequency.items())
            scored.append((score, start, end, inside))
        if not scored:
            return ()
        scored.sort(key=lambda item: -item[0])
        best = scored[0][0]
        kept = [item for item in scored[:MAX_SENTENCES] if item[0] >= _SECOND_TERMS * best]
        return tuple(self._evidence(passage, start, end, score, "terms", inside) for score, start, end, inside in kept)

    def _by_model(
        self,
        passages: Sequence[Passage],
        sentences: list[list[tuple[int, int]]],
        which: list[int],
        read: list[tuple[set[str], str]],
        query_vector: Callable[[], np.ndarray | None],
        budget: int,
        found: list[tuple[Evidence, ...]],
    ) -> None:
        """Score the sentences of passages ``which`` (best hits first, within ``budget``) by cosine to the query;
        ``read`` is per passage ``(the query's terms in its language, that language)``, for the words shown."""
        chosen, texts = [], []
        for i in which:
            spans = sentences[i]
            if not spans or len(texts) + len(spans) > budget:
                continue
            chosen.append(i)
            texts.extend(passages[i].text[s:e] for s, e in spans)
        vector = query_vector() if chosen else None
        if vector is None:
            return
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        scores = self.embed(texts) @ vector
        at = 0
        for i in chosen:
            spans = sentences[i]
            mine = scores[at : at + len(spans)]
            at += len(spans)
            order = np.argsort(-mine, kind="stable")[:MAX_SENTENCES]
            best = float(mine[order[0]])
            kept = [j for j in order.tolist() if float(mine[j]) >= best - _SECOND_SEMANTIC]
            passage = passages[i]
            terms, code = read[i]
            evidence = []
            for j in kept:
                start, end = spans[j]
                words = self.analyzer.term_spans(passage.text[start:end], terms, code) if terms else []
                inside = [(s + start, e + start, t) for s, e, t in words]
                evidence.append(self._evidence(passage, start, end, float(mine[j]), "semantic", inside))
            found[i] = tuple(evidence)

    @staticmethod
    def _evidence(
        passage: Passage, start: int, end: int, score: float, method: str, inside: list[tuple[int, int, str]]
    ) -> Evidence:
        """An ``Evidence`` in document offsets for the sentence ``passage.text[start:end]``."""
        at = passage.offset
        words = tuple(TermMatch(passage.text[s:e], s + at, e + at) for s, e, _ in inside)
        score = score if math.isfinite(score) else 0.0
        return Evidence(passage.text[start:end], start + at, end + at, round(score, 6), method, words)
