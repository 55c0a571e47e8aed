"""``SearchOptions``: everything a search takes besides its query, as one checked value.

``Collection.search`` builds it from its keyword arguments (or takes one
given as ``options=``); ``RemoteCollection``, the HTTP ``/search`` route and
the MCP ``search`` tool build the same value, and the ``Searcher`` reads it.
It is checked once, when made (``retriever.validation.check_search_options``),
so a value that exists is a valid one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from retriever import validation
from retriever.errors import BadInputError
from retriever.search.evidence import DEFAULT_EVIDENCE
from retriever.search.fusion import DEFAULT_ALPHA, DEFAULT_FUSION, Fusion, feedback_fusion, fusion_depth, fusion_named
from retriever.search.languages import check_language

SEARCH_MODES: tuple[str, ...] = ("dense", "bm25", "hybrid")
DEFAULT_MODE = "hybrid"


@dataclass(frozen=True)
class SearchOptions:
    """How to search: the number of hits, the filter, the mode and each mode's settings.

    Args:
        k: Number of documents to return (default 10, at most 10,000).
        where: Metadata filter (see ``retriever.filters``), or ``None``.
        mode: ``"dense"``, ``"bm25"`` or ``"hybrid"`` (default).
        fusion: For hybrid: ``"convex"`` or ``"rrf"``; default ``None``: the collection's own setting
            (``Collection.search_settings``; convex unless ``learn`` chose otherwise).
        alpha: Weight of the dense side in the convex combination, in [0, 1]; default ``None``: the
            collection's own (0.7 unless ``learn`` chose otherwise).
        exact: Search every vector exactly, also in approximately indexed segments (default False).
        evidence: ``"terms"`` (default), ``"auto"``, ``"semantic"`` or ``"none"``.
        feedback: For hybrid: pseudo-relevance feedback on the dense side; default ``None``: the
            collection's own (on unless ``learn`` chose otherwise).
        lang: The query's language (an ISO 639-1 code, ``retriever.search.languages.LANGUAGES``): the
            keyword side reads it in that language, and so matches the documents in it; default
            ``None``: read in each language the collection holds (``retriever.search.multilingual``).

    Raises:
        BadInputError: A field is wrong (``k`` out of range, an unknown mode, fusion, evidence or language, ...).
        FilterError: ``where`` is not a valid filter.
    """

    k: int = 10
    where: dict[str, Any] | None = None
    mode: str = DEFAULT_MODE
    fusion: str | None = None
    alpha: float | None = None
    exact: bool = False
    evidence: str = DEFAULT_EVIDENCE
    feedback: bool | None = None
    lang: str | None = None

    def __post_init__(self) -> None:
        validation.check_search_options(self, SEARCH_MODES)
        if self.lang is not None:
            check_language(self.lang, "lang")

    @property
    def depth(self) -> int:
        """Documents each side ranks: ``k``, or at least ``HYBRID_DEPTH`` in hybrid mode (``fusion_depth``)."""
        return fusion_depth(self.k, self.mode)

    def fusion_strategy(self) -> Fusion:
        """The ``Fusion`` that ``fusion`` and ``alpha`` name (the built-in ones where unset)."""
        return fusion_named(self.fusion or DEFAULT_FUSION, DEFAULT_ALPHA if self.alpha is None else self.alpha)

    def feedback_strategy(self) -> Fusion:
        """The first fusion of a hybrid search with ``feedback`` (``fusion.feedback_fusion``)."""
        return feedback_fusion(self.fusion or DEFAULT_FUSION)

    def settled(self, settings: dict[str, Any]) -> SearchOptions:
        """These options with each of ``fusion``, ``alpha`` and ``feedback`` left unset taken from ``settings``
        (a collection's own, ``retriever.search_settings.settings_in``)."""
        unset = {name: settings[name] for name in ("fusion", "alpha", "feedback") if getattr(self, name) is None}
        return replace(self, **unset) if unset else self

    def with_mode(self, mode: str) -> SearchOptions:
        """These options with ``mode`` instead (checked again)."""
        return self if mode == self.mode else replace(self, mode=mode)

    def for_query(self, query: str | None) -> SearchOptions:
        """These options for a search of ``query``: with no query text (a vector alone) the search is dense.

        Raises:
            BadInputError: ``query`` is ``None`` and ``mode`` is ``"bm25"`` (``validation.check_query_mode``).
        """
        validation.check_query_mode(query, self)
        return self if query is not None else self.with_mode("dense")


def options_or_fields(options: SearchOptions | None, **given: Any) -> SearchOptions:
    """``options`` when given, else ``SearchOptions(**given)``: how ``Collection.search`` takes either.

    Raises:
        BadInputError: ``options`` is no ``SearchOptions``, or is given with a field in ``given`` that is
            not its default (the same option twice).
        FilterError: ``options`` is ``None`` and ``given["where"]`` is not a valid filter.
    """
    if options is None:
        return SearchOptions(**given)
    if not isinstance(options, SearchOptions):
        raise BadInputError(f"options must be a SearchOptions, got {type(options).__name__}")
    defaults = {field.name: field.default for field in fields(SearchOptions)}
    twice = [name for name, value in given.items() if not _same(value, defaults[name])]
    if twice:
        raise BadInputError(f"give {', '.join(twice)} in options or as keywords, not both")
    return options


def _same(value: Any, default: Any) -> bool:
    """Whether a keyword was left at its default (``is`` first: a value of any type compares)."""
    return value is default or (type(value) is type(default) and value == default)
