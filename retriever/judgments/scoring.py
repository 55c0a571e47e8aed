"""A collection measured on judgments: every judged query searched, its ranking scored by trec_eval.

``Collection.evaluate`` (``retriever.collection_evaluating``) resolves what to measure on and how to search,
and ``measure`` does the work: each query is searched for ``DEPTH`` (100) documents, without evidence, and
``retriever.evaluation.evaluate_queries`` scores the rankings against the judgments (graded as given; a
judged document the collection no longer holds counts as a relevant document not found, as in trec_eval).

A query whose judgments are all grade 0 ("does not answer") has nothing to find: it is left out of the
figures, and ``Evaluation.unanswered`` counts such queries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Iterable

from retriever.errors import BadInputError
from retriever.evaluation import DEPTH, METRICS, Qrels, Run, evaluate_queries
from retriever.judgments.records import JudgedSet, judgment_from
from retriever.search.options import SearchOptions

#: The searches' own settings besides the mode, in the order ``Evaluation.settings`` lists them.
SEARCH_SETTINGS = ("fusion", "alpha", "feedback")
#: Options an evaluation fixes itself: every query ranks ``DEPTH`` documents, and evidence is not computed.
FIXED_OPTIONS = ("k", "evidence")


@dataclass
class Evaluation:
    """What a measurement found.

    Attributes:
        metrics: ``{metric: mean}`` for each of ``retriever.evaluation.METRICS`` (``"ndcg@10"``, ``"mrr@10"``,
            ``"recall@100"``, ``"map@100"``), averaged over the queries measured.
        queries: The queries measured (those with at least one document judged to answer them, grade 1 or more).
        judgments: The judgments of those queries (grade 0 included).
        settings: How the collection was searched: ``mode``, ``fusion``, ``alpha``, ``feedback`` (the values in
            force, the collection's own where the caller set none) and ``model`` (its name); ``where``, ``lang``
            and ``exact`` too when set.
        per_query: ``{query_key: {"query": text, metric: value, ...}}`` when asked for, else ``None``; the mean
            of a metric over it is ``metrics``' figure.
        unanswered: Judged queries left out because no judgment of theirs has a grade above 0.
    """

    metrics: dict[str, float]
    queries: int
    judgments: int
    settings: dict[str, Any]
    per_query: dict[str, dict[str, Any]] | None = None
    unanswered: int = 0

    def to_dict(self) -> dict[str, Any]:
        """``{"metrics", "queries", "judgments", "settings", "per_query", "unanswered"}`` (JSON-ready)."""
        return {
            "metrics": dict(self.metrics),
            "queries": self.queries,
            "judgments": self.judgments,
            "settings": dict(self.settings),
            "per_query": None if self.per_query is None else {key: dict(row) for key, row in self.per_query.items()},
            "unanswered": self.unanswered,
        }


def judged_from(source: Any, queries: Any = None) -> JudgedSet:
    """The ``JudgedSet`` of ``source``: a ``JudgedSet`` as it is, a judgment file, or judgment records.

    Args:
        source: A ``JudgedSet``; a path to a JSON Lines or BEIR qrels TSV file (``retriever.judgments.files``);
            or an iterable of ``Judgment`` or dicts ``{"query", "id", "grade"}`` (grade optional: 1).
        queries: For a qrels TSV: its BEIR ``queries.jsonl`` (or ``{query id: text}``).

    Raises:
        BadInputError: A bad row (``FILE:LINE: reason`` or ``judgments[i]: reason``), an unreadable file, a TSV
            without ``queries``, or ``queries`` given with anything but a file.
    """
    if isinstance(source, JudgedSet):
        if queries is not None:
            raise BadInputError("queries names the query texts of a qrels file; a JudgedSet holds its own")
        return source
    if isinstance(source, (str, os.PathLike)):
        from retriever.judgments.files import read_judgments

        return JudgedSet.of(read_judgments(source, queries))
    if isinstance(source, (bytes, bytearray, dict)) or not hasattr(source, "__iter__"):
        raise BadInputError(f"judgments must be a file path or a list of judgments, got {type(source).__name__}")
    if queries is not None:
        raise BadInputError("queries names the query texts of a qrels file; a list of judgments holds its own")
    checked = []
    for position, record in enumerate(source):
        try:
            checked.append(judgment_from(record))
        except BadInputError as exc:
            raise BadInputError(f"judgments[{position}]: {exc}") from None
    return JudgedSet.of(checked)


def evaluation_options(options: SearchOptions | None, search_fields: dict[str, Any]) -> SearchOptions:
    """The ``SearchOptions`` an evaluation searches with: ``options`` or ``search_fields``, ``DEPTH`` hits a query
    and no evidence. Fields not given (or given as ``None``) stay unset: the collection's own settings fill them
    when it searches.

    Raises:
        BadInputError: Both ``options`` and ``search_fields`` given, an unknown field, ``k`` or ``evidence``
            given (an evaluation fixes them), or a bad value.
    """
    search_fields = {name: value for name, value in search_fields.items() if value is not None}
    fixed = [name for name in FIXED_OPTIONS if name in search_fields]
    if fixed:
        raise BadInputError(f"evaluate fixes {' and '.join(fixed)} itself (k={DEPTH}, evidence none): leave it out")
    known = {field.name for field in fields(SearchOptions)}
    unknown = sorted(set(search_fields) - known)
    if unknown:
        raise BadInputError(f"unknown search option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if options is None:
        return SearchOptions(k=DEPTH, evidence="none", **search_fields)
    if not isinstance(options, SearchOptions):
        raise BadInputError(f"options must be a SearchOptions, got {type(options).__name__}")
    if search_fields:
        raise BadInputError(f"give {', '.join(sorted(search_fields))} in options or as keywords, not both")
    return replace(options, k=DEPTH, evidence="none")


def settings_in_force(collection: Any, options: SearchOptions) -> dict[str, Any]:
    """How ``collection`` searches with ``options`` (``settled``: none of ``SEARCH_SETTINGS`` unset): the mode,
    ``fusion``, ``alpha``, ``feedback`` and the model's name; ``where``, ``lang``, ``exact`` when set."""
    settings: dict[str, Any] = {"mode": options.mode}
    settings.update({name: getattr(options, name) for name in SEARCH_SETTINGS})
    settings["model"] = collection.model["name"]
    if options.where is not None:
        settings["where"] = options.where
    if options.lang is not None:
        settings["lang"] = options.lang
    if options.exact:
        settings["exact"] = True
    return settings


def measure(
    collection: Any, judged: JudgedSet, options: SearchOptions, *, per_query: bool = False, progress: bool = False
) -> Evaluation:
    """Search every query of ``judged`` that has an answer in ``collection`` with ``options`` and score the rankings.

    Args:
        collection: An open ``Collection`` (or anything with its ``search`` and ``model``).
        judged: The judgments.
        options: The searches' options (``evaluation_options``: ``DEPTH`` hits, no evidence).
        per_query: Fill ``Evaluation.per_query``.
        progress: A progress bar over the queries on stderr.

    Raises:
        BadInputError: ``judged`` holds no judgments, or no query with a document judged to answer it.
    """
    answered = answered_queries(judged)
    texts = {key: judged.queries[key] for key in answered}
    options = options.settled(collection.search_settings())  # one setting for every query, as reported
    run = rank_queries(lambda text: [hit.id for hit in collection.search(text, options=options)], texts, progress)
    return scored(run, answered, texts, settings_in_force(collection, options), per_query, len(judged.qrels))


def answered_queries(judged: JudgedSet) -> Qrels:
    """The qrels of the queries of ``judged`` with at least one judgment above grade 0 (those measured).

    Raises:
        BadInputError: ``judged`` holds no judgments, or no query with a document judged to answer it.
    """
    if not judged.qrels:
        raise BadInputError("no judgments to measure on: judge some documents first (Collection.judge)")
    answered = {key: qrel for key, qrel in judged.qrels.items() if any(grade > 0 for grade in qrel.values())}
    if not answered:
        raise BadInputError(
            f"none of the {len(judged.qrels)} judged queries has a document judged to answer it (grade 1 or more): "
            "nothing to measure"
        )
    return answered


def rank_queries(search: Callable[[str], Iterable[str]], texts: dict[str, str], progress: bool = False) -> Run:
    """``{query key: document ids, best first}`` of ``search`` for each query text of ``texts``."""
    from tqdm.auto import tqdm

    return {
        key: list(search(text))
        for key, text in tqdm(texts.items(), desc="queries", unit="q", disable=not progress, leave=False)
    }


def scored(
    run: Run, qrels: Qrels, texts: dict[str, str], settings: dict[str, Any], per_query: bool, judged_queries: int
) -> Evaluation:
    """The ``Evaluation`` of ``run`` against ``qrels`` (every query of which has an answer); ``judged_queries``
    counts the judged queries before those without an answer were left out."""
    scores = evaluate_queries(run, qrels)
    n = len(qrels)
    metrics = {metric: sum(row[metric] for row in scores.values()) / n for metric in METRICS}
    rows = {key: {"query": texts[key], **scores[key]} for key in qrels} if per_query else None
    judgments = sum(len(qrel) for qrel in qrels.values())
    return Evaluation(metrics, n, judgments, settings, rows, judged_queries - n)
