"""Choosing a collection's hybrid settings from judgments: every candidate scored on every judged query.

A candidate is a fusion (convex with a weight from ``ALPHAS``, or rrf) with
feedback on or off. Each judged query is searched once per candidate, in
hybrid mode as the collection's users search, and scored by nDCG@10
(trec_eval's); the choice is the candidate with the best mean over the
queries it may look at, the current settings winning ties.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

from retriever.evaluation import evaluate_queries
from retriever.judgments.records import JudgedSet

ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # convex weights of the dense side tried
DEPTH = 100  # hits per search (nDCG@10 reads ten; recall-minded callers may read more)

Scores = dict["Setting", dict[str, float]]  # setting -> query key -> nDCG@10


@dataclass(frozen=True)
class Setting:
    """One hybrid setting: ``fusion`` (``"convex"`` or ``"rrf"``), ``alpha`` (convex only) and ``feedback``."""

    fusion: str
    alpha: float
    feedback: bool

    @classmethod
    def of(cls, settings: dict) -> "Setting":
        """The setting of ``{"fusion", "alpha", "feedback"}`` (``Collection.search_settings()``)."""
        return cls(settings["fusion"], round(float(settings["alpha"]), 4), bool(settings["feedback"]))

    def to_dict(self) -> dict:
        return asdict(self)


def candidates(current: Setting) -> list[Setting]:
    """The settings tried, ``current`` first (it wins ties): convex at each of ``ALPHAS`` and rrf, each with
    feedback on and off."""
    tried = [Setting("convex", alpha, feedback) for alpha in ALPHAS for feedback in (True, False)]
    tried += [Setting("rrf", current.alpha, feedback) for feedback in (True, False)]
    return [current, *(setting for setting in tried if setting != current)]


def score_settings(
    collection, judged: JudgedSet, settings: Sequence[Setting], *, progress: bool = False, label: str = "settings"
) -> Scores:
    """nDCG@10 of each judged query under each setting, by real hybrid searches of ``collection`` (each query
    embedded once, by the collection's model, and searched with its text and that vector).

    Args:
        collection (retriever.Collection): The collection searched (its model as it is).
        judged: Queries and judgments; queries without an answering document score 0.
        settings: The settings to score.
        progress: A progress bar on stderr.
        label: The bar's name.

    Returns:
        ``{setting: {query key: nDCG@10}}`` for every setting and query.
    """
    from tqdm.auto import tqdm

    runs: dict[Setting, dict[str, list[str]]] = {setting: {} for setting in settings}
    keys = list(judged.queries)
    vectors = collection.embed([judged.queries[key] for key in keys]) if keys else None  # each query once
    for row, key in enumerate(tqdm(keys, desc=label, unit="query", disable=not progress)):
        for setting in settings:
            hits = collection.search(
                judged.queries[key],
                vector=vectors[row],
                k=DEPTH,
                mode="hybrid",
                evidence="none",
                fusion=setting.fusion,
                alpha=setting.alpha,
                feedback=setting.feedback,
            )
            runs[setting][key] = [hit.id for hit in hits]
    return {
        setting: {key: scores["ndcg@10"] for key, scores in evaluate_queries(run, judged.qrels).items()}
        for setting, run in runs.items()
    }


def mean_over(scores: dict[str, float], keys: Iterable[str]) -> float:
    """The mean of ``scores`` over ``keys`` (0.0 for none)."""
    values = [scores[key] for key in keys]
    return sum(values) / len(values) if values else 0.0


def best_setting(scores: Scores, keys: Sequence[str]) -> Setting:
    """The setting of ``scores`` with the best mean nDCG@10 over ``keys``; the first listed wins ties."""
    best, best_mean = None, -1.0
    for setting, per_query in scores.items():
        mean = mean_over(per_query, keys)
        if mean > best_mean + 1e-12:
            best, best_mean = setting, mean
    assert best is not None
    return best
