"""``Collection``'s tagging verbs: learn a metadata field from labelled examples and label every document.

``TaggingVerbs`` is mixed into ``retriever.collection.Collection``; it uses the
collection's ``root`` and its reads, and ``retriever.tagging`` does the work.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable, Union

from retriever import validation
from retriever.errors import BadInputError
from retriever.tagging import applying as tag_applying
from retriever.tagging import fitting as tag_fitting
from retriever.tagging.applying import TagReport
from retriever.tagging.evaluation import TagEvaluation
from retriever.tagging.examples import Example, check_examples
from retriever.tagging.store import load_taggers

Examples = Union[str, os.PathLike, Iterable[Union[Example, dict[str, Any]]]]  # a file, or labelled records


class TaggingVerbs:
    """``tag``, ``evaluate_tags``, ``stale_tags`` and ``taggers`` of a ``Collection``."""

    def tag(
        self,
        field: str,
        examples: Examples,
        *,
        method: str = tag_fitting.AUTO,
        min_probability: float = 0.0,
        dry_run: bool = False,
        progress: bool = False,
    ) -> TagReport:
        """Learn ``field`` from a few labelled examples and label every document, in one generation.

        A logistic regression over the documents' stored vectors (each
        document's chunk vectors pooled into one; nothing is re-encoded) or
        over TF-IDF; ``auto`` cross-validates both on the examples and takes
        the better. Every document gets ``field`` and ``<field>_probability``
        in its metadata, so ``where={field: label}`` filters by it; the tagger
        is kept in the collection and labels documents added later, at commit.

        Args:
            field: The metadata field to write.
            examples: An examples file (``.jsonl`` or ``.csv``) or records with
                ``label`` and ``id`` (a document here) or ``text``
                (``retriever.tagging.examples``).
            method: ``"auto"`` (default), ``"embedding"`` or ``"tfidf"``.
            min_probability: Leave ``field`` out below this probability (default 0.0).
            dry_run: Only count what each label would get; write nothing.
            progress: Show a progress bar.

        Returns:
            The ``TagReport``: label counts, documents written, the evaluation behind ``auto``.

        Raises:
            BadInputError: A bad field, method, probability or example (an id not
                in the collection, one label only).
            CollectionLockedError: Another process held the write lock too long.
        """
        started = time.perf_counter()
        checked = self._tag_examples(examples)
        validation.check_tag_args(field, method, min_probability)
        tagger, evaluation = tag_fitting.train(self, field, checked, method, min_probability)
        report = tag_applying.apply_tagger(self, tagger, checked, dry_run=dry_run, progress=progress)
        report.evaluation = evaluation
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def evaluate_tags(self, examples: Examples, *, folds: int | None = None) -> TagEvaluation:
        """Cross-validate the frozen-embedding tagger against TF-IDF on ``examples``; writes nothing.

        Args:
            examples: As for ``tag``.
            folds: Stratified folds (default: 5, or fewer when a label has fewer examples).

        Returns:
            Accuracy, macro-F1 and per-label figures of both, and the method ``tag`` would use.
        """
        if folds is not None and (isinstance(folds, bool) or not isinstance(folds, int) or folds < 2):
            raise BadInputError(f"folds must be an integer of at least 2, got {folds!r}")
        return tag_fitting.evaluate(self, self._tag_examples(examples), folds)

    def stale_tags(self, field: str) -> list[str]:
        """Ids of documents the tagger of ``field`` has not labelled (added while it could not), sorted.

        Raises:
            BadInputError: The collection has no tagger for ``field``.
        """
        validation.check_tag_args(field, tag_fitting.AUTO, 0.0)
        return tag_applying.stale_documents(self, field)

    def taggers(self) -> dict[str, dict[str, Any]]:
        """The collection's taggers by field: method, labels, model, examples per label, threshold, training time."""
        return {
            name: {
                "method": t.method,
                "labels": t.classes,
                "model": t.model,
                "examples": t.examples,
                "min_probability": t.min_probability,
                "probability_field": t.probability_field,
                "trained_at": t.trained_at,
            }
            for name, t in load_taggers(self.root).items()
        }

    @staticmethod
    def _tag_examples(examples: Examples) -> list[Example]:
        if isinstance(examples, (str, os.PathLike)):
            from retriever.tagging.examples import read_examples

            return read_examples(examples)
        if isinstance(examples, (bytes, dict)) or not hasattr(examples, "__iter__"):
            raise BadInputError(f"examples must be a file path or a list of records, got {type(examples).__name__}")
        return check_examples(examples)
