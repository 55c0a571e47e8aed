"""``Collection``'s evaluation verb: the collection measured on its judgments, or on a judgment file.

``EvaluationVerbs`` is mixed into ``retriever.collection.Collection``; ``retriever.judgments.scoring`` does the
work, and ``retriever.judgments.trial`` makes the scratch copy that another model is measured on.
"""

from __future__ import annotations

import os
from typing import Any

from retriever import validation
from retriever.judgments.scoring import Evaluation, answered_queries, evaluation_options, judged_from, measure
from retriever.search.options import SearchOptions


class EvaluationVerbs:
    """``evaluate`` of a ``Collection``."""

    def evaluate(
        self,
        judgments: Any = None,
        *,
        queries: Any = None,
        options: SearchOptions | None = None,
        model: str | os.PathLike | Any = None,
        per_query: bool = False,
        progress: bool = False,
        **search_fields: Any,
    ) -> Evaluation:
        """Measure how well the collection ranks the documents judged to answer each judged query.

        Every judged query is searched for 100 documents (no evidence), and the rankings are scored by
        trec_eval: nDCG@10, MRR@10, Recall@100 and MAP@100 (``retriever.evaluation.METRICS``), averaged over the
        queries. A query whose judgments are all grade 0 has nothing to find and is left out (counted in
        ``Evaluation.unanswered``); a judged document the collection no longer holds counts as one not found.

        Args:
            judgments: ``None`` (default): the collection's own (``judged()``); or a judgment file (JSON Lines,
                or a BEIR qrels TSV with ``queries``), a list of ``Judgment`` or dicts ``{"query", "id",
                "grade"}``, or a ``JudgedSet``: measured on, not stored.
            queries: For a qrels TSV: its BEIR ``queries.jsonl`` (or ``{query id: text}``).
            options: How to search, as ``Collection.search`` takes it (its ``k`` and ``evidence`` replaced).
            model: Another model (a name, a directory or an ``Embedder``): measured on a scratch copy of the
                collection re-embedded with it (``retriever.judgments.trial.scratch_copy``); the collection
                itself does not change. The model must split text into the same tokens as the collection's.
            per_query: Fill ``Evaluation.per_query`` with each query's figures.
            progress: Progress bars on stderr.
            **search_fields: ``mode``, ``fusion``, ``alpha``, ``feedback``, ``where``, ``lang``, ``exact`` as
                ``Collection.search`` takes them, instead of ``options``; those not given are the collection's own.

        Returns:
            The ``Evaluation``: the metrics, the queries and judgments measured on, the settings searched with.

        Raises:
            BadInputError: No judgments (or none with a grade above 0), a bad judgment row, a bad or unknown
                search option, ``k`` or ``evidence`` given.
            ModelMismatchError: ``model`` splits text otherwise than the collection's model.
        """
        judged = judged_from(self.judged() if judgments is None else judgments, queries)
        search_options = evaluation_options(options, search_fields)
        if model is None:
            return measure(self, judged, search_options, per_query=per_query, progress=progress)
        from retriever.encoding.embedder import Embedder
        from retriever.judgments.trial import scratch_copy

        answered_queries(judged)  # nothing to measure is refused before a copy is made
        embedder = model if validation.is_embedder(model) else Embedder(model)
        with scratch_copy(self, embedder, progress=progress) as copy:
            return measure(copy, judged, search_options, per_query=per_query, progress=progress)
