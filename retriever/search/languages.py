"""The languages BM25 analyses: ISO 639-1 codes, and each language's stemmer and stop words.

English is analysed as it always was (``bm25.Analyzer``'s defaults: Porter
stems, Lucene's 33 English stop words; a collection's manifest names them).
Every other language in ``LANGUAGES`` gets lower-cased word tokens, less its
stop words where a list exists (``STOP_LISTS``: the Snowball project's lists,
which Lucene's analyzers of those languages also use, as the ``bm25s``
package ships them), stemmed by its Snowball stemmer where PyStemmer has one
(``SNOWBALL``). The other languages that language identification knows
(``language_detection``) are analysed as lower-cased word tokens alone.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import Any

from retriever.errors import BadInputError
from retriever.search.bm25 import Analyzer

ENGLISH = "en"
#: ISO 639-1 code -> PyStemmer's Snowball algorithm (English is Porter's, as the manifest says).
SNOWBALL = {
    "ar": "arabic",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "eo": "esperanto",
    "es": "spanish",
    "et": "estonian",
    "eu": "basque",
    "fa": "persian",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "nb": "norwegian",
    "ne": "nepali",
    "nl": "dutch",
    "nn": "norwegian",
    "no": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
#: The other ISO 639-1 languages language identification knows: word tokens, no stemmer.
UNSTEMMED = frozenset(
    "af am an as az ba be bg bn br bs cy dz fo fy gd gl gu ha he hr ht ig is ja jv ka kk km kn ko ku ky la lb lg "
    "ln lo lv mg mk ml mn mr ms mt my oc om or pa ps qu rw sa se si sk sl sn so sq sw te tg th tk tl tt ug uk ur "
    "uz vi vo wa xh yo zh zu".split()
)
#: Every code a document's or a query's ``lang`` may be.
LANGUAGES = frozenset(SNOWBALL) | UNSTEMMED | {ENGLISH}
#: ISO 639-1 code -> the name of its stop-word list in ``bm25s/stopwords.py``.
STOP_LISTS = {
    "da": "STOPWORDS_DANISH",
    "de": "STOPWORDS_GERMAN",
    "es": "STOPWORDS_SPANISH",
    "fr": "STOPWORDS_FRENCH",
    "it": "STOPWORDS_ITALIAN",
    "ko": "STOPWORDS_KOREAN",
    "nb": "STOPWORDS_NORWEGIAN",
    "nl": "STOPWORDS_DUTCH",
    "nn": "STOPWORDS_NORWEGIAN",
    "no": "STOPWORDS_NORWEGIAN",
    "pt": "STOPWORDS_PORTUGUESE",
    "ru": "STOPWORDS_RUSSIAN",
    "sv": "STOPWORDS_SWEDISH",
    "tr": "STOPWORDS_TURKISH",
    "zh": "STOPWORDS_CHINESE",
}


def check_language(code: Any, what: str = "lang") -> str:
    """``code`` itself when it is one of ``LANGUAGES``.

    Raises:
        BadInputError: It is not a string, or not a code BM25 analyses; the message names ``what``.
    """
    if isinstance(code, str) and code in LANGUAGES:
        return code
    shown = repr(code) if len(repr(code)) <= 40 else repr(code)[:37] + "..."
    lowered = code.lower() if isinstance(code, str) else None
    hint = f" (codes are lower-case: {lowered!r})" if lowered in LANGUAGES else ""
    raise BadInputError(
        f"{what} must be an ISO 639-1 language code BM25 analyses, such as 'en', 'de' or 'fr', got {shown}{hint}; "
        f"the codes: {', '.join(sorted(LANGUAGES))}"
    )


def language_analyzer(code: str, english: Analyzer) -> Analyzer:
    """The analyser of documents and queries in language ``code`` (one of ``LANGUAGES``).

    Args:
        code: The language.
        english: The collection's English analyser (returned for ``"en"``).
    """
    if code == ENGLISH:
        return english
    return Analyzer(SNOWBALL.get(code), stop_words(code) or None)


def stop_words(code: str) -> frozenset[str]:
    """The stop words of language ``code`` other than English (empty where no list exists), lower-case."""
    name = STOP_LISTS.get(code)
    return frozenset(_bm25s_stop_lists()[name]) if name else frozenset()


@functools.cache
def _bm25s_stop_lists() -> dict[str, tuple[str, ...]]:
    """The stop-word tuples of ``bm25s/stopwords.py`` by name, read as data: importing ``bm25s`` loads
    scipy, which a command-line search need not load, and the file is plain literals."""
    spec = importlib.util.find_spec("bm25s")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the stop words of languages other than English come with the package bm25s")
    source = Path(list(spec.submodule_search_locations)[0]) / "stopwords.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    return {
        target.id: tuple(ast.literal_eval(node.value))
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.startswith("STOPWORDS_")
    }
