"""From labelled examples to a trained tagger: features, cross-validation, the final fit.

An example that names a document takes that document's stored vectors
(pooled, see ``features``) and stored text; a free-text example is embedded
with the collection's model. TF-IDF's vocabulary and IDF come from the
collection's documents (a seeded sample of ``TFIDF_SAMPLE`` at most) and the
free-text examples: no labels are involved in that.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from retriever.errors import BadInputError
from retriever.tagging.classifier import EMBEDDING, METHODS, TFIDF, Tagger, TfidfFeatures, fit_logistic
from retriever.tagging.evaluation import TagEvaluation, cross_validate
from retriever.tagging.examples import Example
from retriever.tagging.features import live_rows, segment_texts, segment_vectors, text_vectors
from retriever.unicode_policy import printable

AUTO = "auto"
TFIDF_SAMPLE = 20_000  # documents TF-IDF's vocabulary and IDF are fitted on, at most


def check_method(method: str) -> None:
    if method not in (AUTO, *METHODS):
        raise BadInputError(f"unknown tagging method {method!r}; choose auto, {', '.join(METHODS)}")


def fit_tfidf(collection: Any, examples: Sequence[Example]) -> TfidfFeatures:
    """TF-IDF over a seeded sample of the collection's documents and the free-text examples."""
    view = collection.reader.current()
    parts = list(live_rows(view))
    total = sum(len(rows) for _, rows, _ in parts)
    rng = np.random.default_rng(0)
    chosen = np.sort(rng.choice(total, size=min(total, TFIDF_SAMPLE), replace=False)) if total else []
    texts, offset = [], 0
    for segment, rows, keys in parts:
        picked = [i - offset for i in chosen if offset <= i < offset + len(rows)]
        offset += len(rows)
        if picked:
            stored = collection.catalog.by_keys([int(keys[i]) for i in picked])
            titles = [stored[int(keys[i])].title if int(keys[i]) in stored else "" for i in picked]
            texts += segment_texts(segment, rows[picked], titles)
    texts += [f"{e.title}\n{e.text}" for e in examples if e.text is not None]
    return TfidfFeatures.fit(texts)


def example_features(
    collection: Any, examples: Sequence[Example], methods: Sequence[str], tfidf: TfidfFeatures | None = None
) -> dict[str, Any]:
    """``{method: (len(examples), d) rows}`` for the examples, in order.

    Raises:
        BadInputError: An example names a document the collection does not hold.
    """
    ids = [e.doc_id for e in examples if e.doc_id is not None]
    stored = collection.catalog.lookup(ids)
    missing = [e for e in examples if e.doc_id is not None and e.doc_id not in stored]
    if missing:
        shown = ", ".join(f"{printable(e.doc_id, 60)} ({e.where})" for e in missing[:3])
        raise BadInputError(f"{len(missing)} example(s) name documents not in the collection: {shown}")
    view = collection.reader.current()
    located = {}
    for doc_id in ids:
        found = view.find(stored[doc_id].key)
        if found is None:
            raise BadInputError(f"document {printable(doc_id, 60)} was deleted while the examples were read")
        located[doc_id] = found
    out: dict[str, Any] = {}
    if EMBEDDING in methods:
        free = [(e.title, e.text) for e in examples if e.text is not None]
        free_vectors = iter(text_vectors(free, collection.chunker, collection.embedder)) if free else iter(())
        rows = []
        for e in examples:
            if e.doc_id is None:
                rows.append(next(free_vectors))
            else:
                part, row = located[e.doc_id]
                rows.append(segment_vectors(view.parts[part].segment, np.asarray([row]))[0])
        out[EMBEDDING] = np.stack(rows).astype(np.float32)
    if TFIDF in methods:
        tfidf = tfidf or fit_tfidf(collection, examples)
        texts = []
        for e in examples:
            if e.doc_id is None:
                texts.append(f"{e.title}\n{e.text}")
            else:
                part, row = located[e.doc_id]
                texts += segment_texts(view.parts[part].segment, [row], [stored[e.doc_id].title])
        out[TFIDF] = tfidf.transform(texts)
        out["tfidf_features"] = tfidf
    return out


def evaluate(collection: Any, examples: Sequence[Example], folds: int | None = None) -> TagEvaluation:
    """Cross-validate both methods on ``examples`` (see ``evaluation``)."""
    features = example_features(collection, examples, METHODS)
    features.pop("tfidf_features")
    return cross_validate(features, [e.label for e in examples], folds)


def train(
    collection: Any, field: str, examples: Sequence[Example], method: str = AUTO, min_probability: float = 0.0
) -> tuple[Tagger, TagEvaluation | None]:
    """Fit the tagger of ``field`` on all ``examples``.

    Args:
        collection: The ``Collection`` whose documents (and model) the examples use.
        field: The metadata field the tagger writes.
        examples: Checked examples (``examples.check_examples``).
        method: ``"auto"`` (cross-validate both, take the better), ``"embedding"`` or ``"tfidf"``.
        min_probability: Below it the label is left out.

    Returns:
        ``(tagger, evaluation)``; the evaluation is ``None`` unless ``method`` is ``"auto"``.
    """
    check_method(method)
    labels = [e.label for e in examples]
    evaluation = None
    if method == AUTO:
        features = example_features(collection, examples, METHODS)
        tfidf = features.pop("tfidf_features")
        evaluation = cross_validate(features, labels)
        method = evaluation.chosen
    else:
        features = example_features(collection, examples, [method])
        tfidf = features.pop("tfidf_features", None)
    classes, coef, intercept = fit_logistic(features[method], labels)
    counts: dict[str, int] = {}
    for label in labels:
        counts[str(label)] = counts.get(str(label), 0) + 1
    identity = collection.model
    model = {"name": identity["name"], "sha256": identity["sha256"]}
    tagger = Tagger(
        field, method, classes, coef, intercept, model, min_probability, counts, tfidf if method == TFIDF else None
    )
    return tagger, evaluation
