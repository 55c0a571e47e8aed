"""A collection's BM25 analysis across languages: each document in its own, a query in each one searched.

A collection whose manifest has ``bm25.languages`` (every collection made
since languages are told apart) stores each document's language in its
metadata as ``lang`` and analyses it with that language's ``Analyzer``
(``languages.language_analyzer``). Index terms of English are the English
analyser's, exactly as before; a term of another language is prefixed with
its code and a colon (``"de:haus"``; a word token never holds a colon), so
the terms of two languages never meet: a German stem counts only German
documents in its document frequency, and a query analysed in German matches
only German documents. Document count and average length stay those of the
whole collection. A collection without ``bm25.languages`` is English only.

A query is analysed in the language it is said to be in, or else in every
language the collection's segments hold (``view_languages``), the terms of
each together: each document is scored for the query read in its language,
and a collection holding English alone analyses and scores as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections import deque
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from retriever.errors import CorruptCollectionError
from retriever.search.bm25 import Analyzer
from retriever.search.languages import ENGLISH, LANGUAGES, language_analyzer
from retriever.storage.segment import Segment
from retriever.storage.view import View

#: Separates a language code from the term of a language other than English.
SEPARATOR = ":"
#: ``bm25.languages`` of a new collection's manifest: documents' languages detected, English by default.
DEFAULT_LANGUAGE_SETTINGS = {"default": ENGLISH, "detect": True}

_written: contextvars.ContextVar["_Pending | None"] = contextvars.ContextVar("written_languages", default=None)


class MultilingualAnalyzer:
    """The BM25 analysis of one collection: every document and query in its language.

    It is the ``TermAnalyzer`` its segments are written with (``__call__``
    and ``positions`` take the language of the document being written,
    ``writing``), and what a search analyses its query with (``query_terms``)
    and finds the query's words in a hit's text with (``term_spans``).

    Args:
        english: The English analyser (the manifest's ``stemmer`` and ``stopwords``).
        languages: The manifest's ``bm25.languages``, ``{"default": code, "detect": bool}``, or
            ``None`` for a collection analysed in English only (as every collection was before).

    Attributes:
        multilingual: Whether documents are analysed in their languages (``languages`` given).
        default_language: The language of a document too short, or too unsure, to detect (``"en"``
            for an English-only collection).
        detect: Whether a document's language is detected when its caller does not give it.

    Raises:
        CorruptCollectionError: ``languages`` is not of that shape.
    """

    def __init__(self, english: Analyzer, languages: dict[str, Any] | None = None) -> None:
        if languages is not None and not (
            isinstance(languages, dict)
            and isinstance(languages.get("default"), str)
            and languages["default"] in LANGUAGES
            and isinstance(languages.get("detect"), bool)
        ):
            raise CorruptCollectionError(f"the manifest's bm25.languages is malformed: {str(languages)[:200]}")
        self.english = english
        self.multilingual = languages is not None
        self.default_language = languages["default"] if languages else ENGLISH
        self.detect = bool(languages and languages["detect"])
        self._analyzers: dict[str, Analyzer] = {ENGLISH: english}
        self._lock = threading.Lock()

    def analyzer(self, code: str) -> Analyzer:
        """The analyser of language ``code`` (one of ``LANGUAGES``), made on first use."""
        found = self._analyzers.get(code)
        if found is None:
            with self._lock:
                found = self._analyzers.get(code) or language_analyzer(code, self.english)
                self._analyzers[code] = found
        return found

    def language_of(self, metadata: dict[str, Any] | None) -> str:
        """The language a document is analysed in, from its metadata's ``lang`` (``"de"``, ``"DE"``,
        ``"de-AT"``): the default language where it has none or names one BM25 does not analyse (a
        collection that detects no languages adds none), and English always in an English-only
        collection, whatever its metadata say."""
        if not self.multilingual:
            return ENGLISH
        code = (metadata or {}).get("lang")
        if isinstance(code, str):  # "de", and the forms people write: "DE", "de-AT", "de_AT"
            code = code.strip().lower().replace("_", "-").split("-")[0]
        return code if isinstance(code, str) and code in LANGUAGES else self.default_language

    def terms(self, text: str, code: str) -> list[str]:
        """The index terms of ``text`` read in language ``code``, prefixed as that language's are."""
        terms = self.analyzer(code)(text)
        return terms if code == ENGLISH else [f"{code}{SEPARATOR}{term}" for term in terms]

    def query_terms(self, query: str, codes: Sequence[str]) -> list[str]:
        """The terms of ``query`` read in each language of ``codes`` in turn (repeats kept: they weigh)."""
        return [term for code in codes for term in self.terms(query, code)]

    def term_spans(self, text: str, terms: set[str], code: str) -> list[tuple[int, int, str]]:
        """``(start, end, term)`` of every word of ``text`` (written in ``code``) that analyses to one of
        ``terms`` (prefixed index terms, as ``terms`` gives them); the other languages' terms are left out."""
        if code == ENGLISH:
            return self.english.term_spans(text, {term for term in terms if SEPARATOR not in term})
        prefix = f"{code}{SEPARATOR}"
        own = {term[len(prefix) :] for term in terms if term.startswith(prefix)}
        if not own:
            return []
        return [(start, end, prefix + term) for start, end, term in self.analyzer(code).term_spans(text, own)]

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text``, the title (or else the text) of a document being ``writing``; English otherwise."""
        return self.terms(text, self._written_language(text, title=True))

    def positions(self, text: str) -> tuple[np.ndarray, list[str]]:
        """``(offsets, terms)`` of the text of a document being ``writing`` (English otherwise), as
        ``Analyzer.positions`` gives them, its terms prefixed as its language's are."""
        code = self._written_language(text, title=False)
        offsets, terms = self.analyzer(code).positions(text)
        return offsets, terms if code == ENGLISH else [f"{code}{SEPARATOR}{term}" for term in terms]

    @contextlib.contextmanager
    def writing(self, documents: Iterable[Any]) -> Iterator[None]:
        """Analyse the titles and texts of ``documents`` (``Document``\\ s whose metadata hold their
        ``lang``) in their languages while the block runs, in this thread or task (a segment is built
        from texts alone, in the documents' order)."""
        if not self.multilingual:
            yield
            return
        token = _written.set(_Pending(documents, self.language_of))
        try:
            yield
        finally:
            _written.reset(token)

    def _written_language(self, text: str, title: bool) -> str:
        pending = _written.get()
        return ENGLISH if pending is None else pending.language(text, title)


class _Pending:
    """The languages of the documents being written, looked up by their text, or title: a text (or title)
    written twice in two languages gives them in the order written, the last one from then on."""

    def __init__(self, documents: Iterable[Any], language_of) -> None:
        self.texts: dict[str, deque[str]] = {}
        self.titles: dict[str, deque[str]] = {}
        for doc in documents:
            code = language_of(doc.metadata)
            self.texts.setdefault(doc.text, deque()).append(code)
            if doc.title:
                self.titles.setdefault(doc.title, deque()).append(code)

    def language(self, text: str, title: bool) -> str:
        """The language of the title (``title``) or text ``text`` next written; a title not among the
        documents' is looked up among their texts, without taking its turn."""
        codes = self.titles.get(text) if title else self.texts.get(text)
        if not codes:
            codes = self.texts.get(text) if title else None
            return codes[0] if codes else ENGLISH
        return codes.popleft() if len(codes) > 1 else codes[0]


_segment_languages: "weakref.WeakKeyDictionary[Segment, frozenset[str]]" = weakref.WeakKeyDictionary()
_segment_languages_lock = threading.Lock()


def view_languages(view: View) -> list[str]:
    """The languages whose terms the view's segments hold, English first, then by code (each segment's
    read from its vocabulary once; its deleted documents' count too)."""
    found: set[str] = set()
    for part in view.parts:
        found |= segment_languages(part.segment)
    return sorted(found, key=lambda code: (code != ENGLISH, code))


def segment_languages(segment: Segment) -> frozenset[str]:
    """The languages whose terms ``segment`` holds (``"en"`` for unprefixed terms)."""
    with _segment_languages_lock:
        known = _segment_languages.get(segment)
    if known is not None:
        return known
    terms = segment.terms
    prefixed = [term for term in terms if SEPARATOR in term]
    codes = {term.partition(SEPARATOR)[0] for term in prefixed} & LANGUAGES
    if len(prefixed) < len(terms):
        codes.add(ENGLISH)
    known = frozenset(codes)
    with _segment_languages_lock:
        _segment_languages[segment] = known
    return known
