"""Tagging: label a few documents, and every document gets the label as filterable metadata.

A logistic regression over the collection's frozen embeddings (each
document's chunk vectors pooled into one: ``features``), measured against
the cheap baseline, TF-IDF with the same regression (``evaluation``), is
fitted on a handful of labelled examples (``examples``, ``fitting``), stored
in the collection (``store``), applied to every document in one generation
(``applying``) and to new documents at commit time (``on_commit``).
``Collection.tag``, ``evaluate_tags`` and ``stale_tags`` are the verbs.
"""

from retriever.tagging.applying import TagReport
from retriever.tagging.classifier import EMBEDDING, METHODS, TFIDF, Tagger
from retriever.tagging.evaluation import MethodScore, TagEvaluation
from retriever.tagging.examples import Example, check_examples, read_examples
from retriever.tagging.fitting import AUTO

__all__ = [
    "AUTO",
    "EMBEDDING",
    "TFIDF",
    "METHODS",
    "Example",
    "MethodScore",
    "TagEvaluation",
    "TagReport",
    "Tagger",
    "check_examples",
    "read_examples",
]
