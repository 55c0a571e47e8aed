"""BM25 over whole documents (title and text as one field), Lucene scoring.

The keyword side of a collection. Text is analysed the Lucene way: lower-cased
word tokens, the 33 Lucene English stopwords dropped (bm25s' list), Porter
stemming (PyStemmer). Each segment stores its postings (``retriever.storage.postings.Postings``: per
term, the documents holding it and their term counts); ``bm25_top`` scores a
query over the live documents of every segment with collection-wide
statistics, so a score does not depend on how documents fall into segments.

Scores follow Lucene's BM25: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``
and ``tf / (tf + k1 * (1 - b + b * dl / avgdl))``, summed over query tokens.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from retriever.storage.postings import Postings

DEFAULT_K1 = 0.9
DEFAULT_B = 0.4
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
STEM_CACHE = 200_000  # words whose stems an Analyzer remembers for term_spans
#: Lucene's English stop set (``EnglishAnalyzer``), as bm25s lists it; written out here because
#: importing bm25s loads scipy, which a command-line search need not load.
STOPWORDS_EN = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)


class Analyzer:
    """Text to index terms: lower-case word tokens, stopwords out, Porter stems.

    One language's analysis; ``retriever.search.languages`` makes those of
    other languages than English, ``retriever.search.multilingual`` picks a
    document's.

    Args:
        stemmer: A Snowball algorithm name for PyStemmer (default ``"porter"``),
            or ``None`` for no stemming.
        stopwords: ``"en"`` for Lucene's English list (default), ``None``, or
            the lower-case stop words themselves (a frozenset).
    """

    def __init__(self, stemmer: str | None = "porter", stopwords: str | frozenset[str] | None = "en") -> None:
        import Stemmer

        self.settings = {"stemmer": stemmer, "stopwords": "listed" if isinstance(stopwords, frozenset) else stopwords}
        self._stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        if isinstance(stopwords, frozenset):
            self._stopwords = stopwords
        else:
            self._stopwords = STOPWORDS_EN if stopwords == "en" else frozenset()
        self._stem_of: dict[str, str] = {}  # words seen by term_spans, stemmed (up to STEM_CACHE)
        self._words_of: dict[str, set[str]] = {}  # the same, stem -> its words
        self._stems_lock = threading.Lock()
        # Porter removes or rewrites suffixes only: a stem less its last character begins its word (all
        # 107,836 distinct words of the shared collections and books; Snowball English's "dying" -> "die" not)
        self._stem_begins_word = stemmer == "porter"

    def __call__(self, text: str) -> list[str]:
        tokens = [t for t in _TOKEN.findall(text.lower()) if t not in self._stopwords]
        return self._stemmer.stemWords(tokens) if self._stemmer else tokens

    def term_spans(self, text: str, terms: set[str]) -> list[tuple[int, int, str]]:
        """``(start, end, term)`` of every word of ``text`` that analyses to one of ``terms``; offsets in ``text``.

        With Porter stems, only the words that begin with a term less its last
        character are looked at (``_term_spans_by_prefix``). Otherwise the
        distinct words are found at once and looked up among the words already
        seen to analyse to ``terms`` (unseen words are stemmed and remembered
        first); only those words are then located, as whole tokens.
        """
        lowered = text.lower()
        if len(lowered) != len(text):  # a few characters grow when lower-cased: word by word in the original
            return self._term_spans_by_word(text, terms)
        if self._stem_begins_word and all(len(term) >= 2 for term in terms):
            return self._term_spans_by_prefix(lowered, terms)
        stem_of = self._wanted_words(_distinct_words(lowered), terms)
        if not stem_of:
            return []
        found = []
        for word, stem in stem_of.items():
            at = lowered.find(word)
            while at >= 0:
                end = at + len(word)
                if (at == 0 or not _word_character(lowered[at - 1])) and (
                    end == len(lowered) or not _word_character(lowered[end])
                ):
                    found.append((at, end, stem))
                at = lowered.find(word, end)
        found.sort()
        return found

    def _term_spans_by_prefix(self, lowered: str, terms: set[str]) -> list[tuple[int, int, str]]:
        """``term_spans`` where a word's Porter stem, less its last character, begins the word: only the
        words that begin with a term's prefix can analyse to it, so those are found with ``str.find`` and
        stemmed (remembered as in ``_wanted_words``), not every word of the text (a third of the time)."""
        found: dict[int, tuple[int, int, str]] = {}
        unknown: dict[str, list[tuple[int, int]]] = {}
        stem_of, stopwords = self._stem_of, self._stopwords
        for prefix in {term[:-1] for term in terms}:
            at = lowered.find(prefix)
            while at >= 0:
                if at and _word_character(lowered[at - 1]):  # inside a word
                    at = lowered.find(prefix, at + 1)
                    continue
                end = _WORD_REST.match(lowered, at + len(prefix)).end()
                word = lowered[at:end]
                stem = stem_of.get(word)
                if stem is None:
                    if len(word) > 1 and word not in stopwords:  # a token has two characters or more
                        unknown.setdefault(word, []).append((at, end))
                elif stem in terms:
                    found[at] = (at, end, stem)
                at = lowered.find(prefix, end)
        if unknown:
            for word, stem in self._remember(list(unknown)).items():
                if stem in terms:
                    found.update((at, (at, end, stem)) for at, end in unknown[word])
        return [found[at] for at in sorted(found)]

    def _remember(self, words: list[str]) -> dict[str, str]:
        """Stem ``words`` (none a stopword) and remember them, as ``_wanted_words`` does; ``{word: stem}``."""
        stems = self._stemmer.stemWords(words)
        with self._stems_lock:
            if len(self._stem_of) + len(words) > STEM_CACHE:
                self._forget_stems()
            self._store_stems(words, stems)
        return dict(zip(words, stems))

    def _store_stems(self, words: list[str], stems: list[str]) -> None:
        """Remember each word's stem both ways (``_stem_of``, ``_words_of``); the caller holds the lock."""
        for word, stem in zip(words, stems):
            self._stem_of[word] = stem
            self._words_of.setdefault(stem, set()).add(word)

    def _forget_stems(self) -> None:
        """Empty the remembered stems (when ``STEM_CACHE`` would be passed); the caller holds the lock."""
        self._stem_of.clear()
        self._words_of.clear()

    def _wanted_words(self, words: set[str], terms: set[str]) -> dict[str, str]:
        """``{word: stem}`` of those of ``words`` that analyse to one of ``terms``, by set operations on the
        remembered stems; the unseen words are stemmed at once and remembered (up to ``STEM_CACHE``)."""
        with self._stems_lock:
            new = words.difference(self._stem_of).difference(self._stopwords)  # set.difference(dict): no key copy
            if new:
                if len(self._stem_of) + len(new) > STEM_CACHE:  # start again from this text's words
                    self._forget_stems()
                    new = words.difference(self._stopwords)
                new = list(new)
                self._store_stems(new, self._stemmer.stemWords(new) if self._stemmer else new)
            return {word: term for term in terms for word in self._words_of.get(term, ()) if word in words}

    def _term_spans_by_word(self, text: str, terms: set[str]) -> list[tuple[int, int, str]]:
        words = [(match.start(), match.end(), match.group().lower()) for match in _TOKEN.finditer(text)]
        unique = list({word for _, _, word in words} - self._stopwords)
        stems = self._stemmer.stemWords(unique) if self._stemmer else unique
        wanted = {word: stem for word, stem in zip(unique, stems) if stem in terms}
        return [(start, end, wanted[word]) for start, end, word in words if word in wanted]

    def positions(self, text: str) -> tuple[np.ndarray, list[str]]:
        """Every index term of ``text`` with the character offset of its word.

        The terms are exactly ``self(text)``; offsets are int64 positions in ``text``.
        """
        lowered = text.lower()
        if len(lowered) == len(text):
            words = [(m.start(), m.group()) for m in _TOKEN.finditer(lowered)]
        else:  # a few characters grow when lower-cased: find words in the original instead
            words = [(m.start(), m.group().lower()) for m in _TOKEN.finditer(text)]
            words = [(offset, w) for offset, word in words for w in _TOKEN.findall(word)]
        kept = [(offset, word) for offset, word in words if word not in self._stopwords]
        tokens = [word for _, word in kept]
        terms = self._stemmer.stemWords(tokens) if self._stemmer else tokens
        return np.fromiter((offset for offset, _ in kept), dtype=np.int64, count=len(kept)), terms


_WORD_REST = re.compile(r"\w*")
_ASCII_NON_WORD = bytes(c if c > 127 or chr(c).isalnum() or c == ord("_") else ord(" ") for c in range(256))
_ASCII_SINGLE_CHARACTERS = frozenset(chr(c) for c in range(128) if chr(c).isalnum() or c == ord("_"))


def _distinct_words(lowered: str) -> set[str]:
    """The distinct tokens ``_TOKEN`` finds in ``lowered``, in a third to two thirds of the time: ASCII
    punctuation becomes white space and the text is split in C; only the pieces holding other characters
    go through ``_TOKEN``."""
    spaced = lowered.encode("utf-8").translate(_ASCII_NON_WORD).decode("utf-8")
    words = set(spaced.split())
    words.difference_update(_ASCII_SINGLE_CHARACTERS)  # tokens are two characters or more
    if not lowered.isascii():
        mixed = [word for word in words if not word.isascii()]  # may hold non-word characters such as "±"
        words.difference_update(mixed)
        for piece in mixed:
            words.update(_TOKEN.findall(piece))
    return words


def _word_character(character: str) -> bool:
    """Whether ``character`` is one ``\\w`` matches (a Unicode letter or digit, or ``_``)."""
    return character.isalnum() or character == "_"


#: A segment as ``bm25_top`` takes it: ``(postings, doc_lengths, live, allowed)``.
BM25Part = tuple[Postings, np.ndarray, np.ndarray | None, np.ndarray | None]
#: One segment's postings of a query's terms: ``(rows, tf, term index)``.
QueryPostings = tuple[np.ndarray, np.ndarray, np.ndarray]


def bm25_top(
    parts: Sequence[BM25Part],
    query_terms: Sequence[str],
    k: int,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    *,
    totals: tuple[int, float],
    df: Mapping[str, int] | None = None,
) -> list[tuple[int, int, float]]:
    """BM25 over several segments with collection-wide statistics.

    Document frequencies, the document count and the average length are
    those of the live documents of all ``parts`` together, so scores equal
    those of one index built from the live documents alone.

    Args:
        parts: Per segment ``(postings, doc_lengths, live, allowed)``: ``live``
            masks deleted rows out of the statistics and the results, ``allowed``
            (a filter) out of the results only; either may be ``None``.
        query_terms: The analysed query (repeated terms count again).
        totals: ``(live documents, their summed length)`` over all parts (a
            view keeps them: ``View.n_live_docs``, ``View.live_length``).
        df: Each query term's live document frequency, given from outside (a term absent: 0) with
            ``totals`` to match, where the collection holds more documents than ``parts`` (its shards:
            ``bm25_statistics``); default ``None``: counted over ``parts``.

    Returns:
        Up to ``k`` ``(part index, row, score)`` with score > 0, best first.
    """
    n_docs, total_length = totals
    if n_docs == 0:
        return []
    avgdl = max(total_length / n_docs, 1e-9)
    terms, counts = counted_terms(query_terms)
    gathered, live_df = _live_query_postings(parts, terms)
    if df is not None:
        live_df = np.asarray([df.get(term, 0) for term in terms], dtype=np.int64)
    weight = counts * bm25_idf(n_docs, live_df)
    scores = [
        None if postings_of_query is None else _part_scores(postings_of_query, part[1], weight, k1, b, avgdl)
        for postings_of_query, part in zip(gathered, parts)
    ]
    return _best_of_parts(scores, [part[3] for part in parts], k)


def counted_terms(query_terms: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """An analysed query's distinct terms, in first-seen order, and ``(terms,)`` how often each occurs."""
    counts = Counter(query_terms)
    return list(counts), np.asarray(list(counts.values()), dtype=np.int64)


def posting_scores(
    weight: np.ndarray, term_of: np.ndarray, tf: np.ndarray, lengths: np.ndarray, k1: float, b: float, avgdl: float
) -> np.ndarray:
    """float32 BM25 share of each posting: ``weight[term] * tf / (tf + k1 * (1 - b + b * length / avgdl))``.

    ``weight`` is ``(terms,)`` (idf times the term's count in the query); the
    others are per posting. Every scorer adds these, so their sums agree bit for bit.
    """
    norm = k1 * (1 - b + b * lengths / avgdl)
    return (weight[term_of] * tf / (tf + norm)).astype(np.float32)


def bm25_idf(n_docs: int, df: np.ndarray) -> np.ndarray:
    """Lucene's ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` for each document frequency in ``df``."""
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def _live_query_postings(parts: Sequence[BM25Part], terms: list[str]) -> tuple[list[QueryPostings | None], np.ndarray]:
    """Per part, the live postings of every query term at once, term after term, and the terms' live ``df``.

    Returns:
        ``(gathered, df)``: per part its ``(rows, tf, term index)`` or ``None``
        when no live document holds a term; ``df`` is ``(len(terms),)`` int64
        over all parts.
    """
    gathered: list[QueryPostings | None] = []
    df = np.zeros(len(terms), dtype=np.int64)
    for postings, _, live, _ in parts:
        rows, tf, term_of = _query_postings(postings, terms)
        if live is not None and len(rows):
            keep = live[rows]
            rows, tf, term_of = rows[keep], tf[keep], term_of[keep]
        df += np.bincount(term_of, minlength=len(terms))
        gathered.append((rows, tf, term_of) if len(rows) else None)
    return gathered, df


def _part_scores(
    postings_of_query: QueryPostings, lengths: np.ndarray, weight: np.ndarray, k1: float, b: float, avgdl: float
) -> np.ndarray:
    """BM25 of every row of one part, float32 ``(len(lengths),)``; 0 where no query term occurs.

    ``weight`` is ``(terms,)``: each term's idf times its count in the query.
    """
    rows, tf, term_of = postings_of_query
    scores = np.zeros(len(lengths), dtype=np.float32)
    # unbuffered and in posting order: float32 sums as adding term by term gives
    np.add.at(scores, rows, posting_scores(weight, term_of, tf, lengths[rows], k1, b, avgdl))
    return scores


def _best_of_parts(
    scores: list[np.ndarray | None], allowed: list[np.ndarray | None], k: int
) -> list[tuple[int, int, float]]:
    """The ``k`` best ``(part index, row, score)`` with score > 0 over the parts' ``scores``, ``allowed`` rows only."""
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # score, part, row
    for i, part_scores in enumerate(scores):
        if part_scores is None:
            continue
        if allowed[i] is not None:
            part_scores = np.where(allowed[i], part_scores, 0.0)
        rows = _top_rows(part_scores, np.flatnonzero(part_scores > 0), k)
        found.append((part_scores[rows], np.full(len(rows), i), rows))
    if not found:
        return []
    all_scores, part_of, rows = (np.concatenate(column) for column in zip(*found))
    best = np.argsort(-all_scores, kind="stable")[:k]  # ties keep segment order, then row order
    return list(zip(part_of[best].tolist(), rows[best].tolist(), all_scores[best].tolist()))


def _top_rows(scores: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` of ``rows`` (ascending) with the highest ``scores[rows]``, ascending; ties at the
    ``k``-th score go to the lowest rows, so the choice never depends on how a partition fell."""
    if len(rows) <= k:
        return rows
    values = scores[rows]
    kth = np.partition(values, len(values) - k)[len(values) - k]
    above = rows[values > kth]
    return np.sort(np.concatenate([above, rows[values == kth][: k - len(above)]]))


def _query_postings(postings: Postings, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, tf, term index)`` of every posting of ``terms`` in one segment, grouped by term."""
    spans = []
    for j, term in enumerate(terms):
        t = postings.vocabulary.get(term)
        if t is not None:
            spans.append((j, int(postings.indptr[t]), int(postings.indptr[t + 1])))
    if not spans:
        return postings.rows[:0], postings.tf[:0], np.zeros(0, dtype=np.int64)
    rows = np.concatenate([postings.rows[lo:hi] for _, lo, hi in spans])
    tf = np.concatenate([postings.tf[lo:hi] for _, lo, hi in spans])
    term_of = np.repeat(np.asarray([j for j, _, _ in spans]), [hi - lo for _, lo, hi in spans])
    return rows, tf, term_of
