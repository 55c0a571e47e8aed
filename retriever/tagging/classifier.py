"""The tagger itself: a logistic regression over frozen document vectors, or over TF-IDF.

Fitting uses scikit-learn; a trained tagger is plain arrays (``coef``,
``intercept``, and for TF-IDF the vocabulary and IDF), so it is stored as
JSON and predicts with NumPy alone. Probabilities are scikit-learn's: a
softmax over the classes' scores, or a sigmoid for two classes.

Settings (the same for both methods, so the comparison is fair): ``C = 10``
on unit-length rows, classes weighted inversely to their example counts.
TF-IDF is fitted on the collection's own text (sublinear term frequency,
terms in at least two documents, 50,000 terms at most), so it knows the
collection's words even when the examples are few.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from retriever.errors import CorruptCollectionError
from retriever.tagging.examples import Label

EMBEDDING, TFIDF = "embedding", "tfidf"
METHODS = (EMBEDDING, TFIDF)
C = 10.0
TFIDF_SETTINGS: dict[str, Any] = {"lowercase": True, "sublinear_tf": True, "min_df": 2, "max_features": 50_000}


@dataclass
class TfidfFeatures:
    """TF-IDF rows over a fixed vocabulary, L2-normalised.

    Attributes:
        vocabulary: term -> column.
        idf: ``(terms,)`` inverse document frequencies.
    """

    vocabulary: dict[str, int]
    idf: np.ndarray

    @classmethod
    def fit(cls, texts: Sequence[str]) -> "TfidfFeatures":
        """Vocabulary and IDF of ``texts`` (``min_df`` falls to 1 for fewer than 10 texts)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        settings = dict(TFIDF_SETTINGS, min_df=TFIDF_SETTINGS["min_df"] if len(texts) >= 10 else 1)
        try:
            vectorizer = TfidfVectorizer(**settings).fit(texts)
        except ValueError:  # no word at all (only punctuation or digits of one character)
            return cls({}, np.zeros(0, dtype=np.float64))
        vocabulary = {term: int(column) for term, column in vectorizer.vocabulary_.items()}
        return cls(vocabulary, np.asarray(vectorizer.idf_, dtype=np.float64))

    def transform(self, texts: Sequence[str]) -> Any:
        """``(len(texts), terms)`` SciPy CSR float64 rows of unit norm (empty rows stay zero)."""
        from scipy import sparse  # loaded by tagging alone: a search never needs it
        from sklearn.feature_extraction.text import TfidfVectorizer

        if not self.vocabulary:
            return sparse.csr_matrix((len(texts), 1))
        vectorizer = TfidfVectorizer(**TFIDF_SETTINGS, vocabulary=self.vocabulary)
        vectorizer.idf_ = self.idf
        return vectorizer.transform(texts)

    def to_dict(self) -> dict[str, Any]:
        return {"settings": TFIDF_SETTINGS, "vocabulary": self.vocabulary, "idf": self.idf.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TfidfFeatures":
        vocabulary = {str(term): int(column) for term, column in data["vocabulary"].items()}
        idf = np.asarray(data["idf"], dtype=np.float64)
        if len(idf) != len(vocabulary) or sorted(vocabulary.values()) != list(range(len(idf))):
            raise ValueError("the TF-IDF vocabulary and IDF do not match")
        return cls(vocabulary, idf)


def fit_logistic(features: Any, labels: Sequence[Label]) -> tuple[list[Label], np.ndarray, np.ndarray]:
    """Fit the logistic regression.

    Args:
        features: ``(n, d)`` dense or sparse rows.
        labels: ``n`` labels, at least two distinct.

    Returns:
        ``(classes, coef, intercept)``: ``coef`` is ``(1, d)`` for two classes,
        ``(classes, d)`` otherwise.
    """
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, class_weight="balanced", max_iter=5000)
    target = np.asarray(labels, dtype=object if isinstance(labels[0], str) else np.int64)
    model.fit(features, target)
    classes = [label.item() if hasattr(label, "item") else label for label in model.classes_]
    return classes, np.asarray(model.coef_, dtype=np.float64), np.asarray(model.intercept_, dtype=np.float64)


def probabilities(features: Any, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """``(n, classes)`` class probabilities of a fitted logistic regression (as scikit-learn computes them)."""
    scores = np.asarray(features @ coef.T, dtype=np.float64) + intercept
    if coef.shape[0] == 1:
        positive = 1.0 / (1.0 + np.exp(-scores[:, 0]))
        return np.stack([1.0 - positive, positive], axis=1)
    scores -= scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=1, keepdims=True)


@dataclass
class Tagger:
    """A trained tagger for one metadata field.

    Attributes:
        field: The metadata field it writes (the label); ``probability_field`` holds its probability.
        method: ``"embedding"`` (the collection's stored vectors) or ``"tfidf"``.
        classes: The labels, in ``coef``'s row order.
        coef, intercept: The logistic regression.
        model: ``{"name", "sha256"}`` of the encoder whose vectors it was trained on.
        min_probability: Below this the label is left out (the probability is still written).
        examples: How many examples it learned from, per label.
        tfidf: The TF-IDF features (``"tfidf"`` only).
        trained_at: ISO time of training.
    """

    field: str
    method: str
    classes: list[Label]
    coef: np.ndarray
    intercept: np.ndarray
    model: dict[str, str]
    min_probability: float = 0.0
    examples: dict[str, int] = field(default_factory=dict)
    tfidf: TfidfFeatures | None = None
    trained_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))

    @property
    def probability_field(self) -> str:
        return f"{self.field}_probability"

    def predict(self, features: Any) -> tuple[list[Label], np.ndarray]:
        """``(labels, probabilities)`` of the most likely class of each row of ``features``."""
        probs = probabilities(features, self.coef, self.intercept)
        best = probs.argmax(axis=1) if len(probs) else np.zeros(0, dtype=np.int64)
        return [self.classes[i] for i in best], probs[np.arange(len(best)), best]

    def fields(self, metadata: dict[str, Any], label: Label, probability: float) -> dict[str, Any]:
        """``metadata`` with this tagger's label (unless below ``min_probability``) and probability."""
        out = {k: v for k, v in metadata.items() if k not in (self.field, self.probability_field)}
        probability = round(float(probability), 4)
        if probability >= self.min_probability:
            out[self.field] = label
        out[self.probability_field] = probability
        return out

    def owned_by_user(self, metadata: dict[str, Any]) -> bool:
        """Whether ``metadata`` holds the field without a probability: a value the user wrote, never replaced."""
        return self.field in metadata and self.probability_field not in metadata

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "method": self.method,
            "classes": self.classes,
            "coef": self.coef.tolist(),
            "intercept": self.intercept.tolist(),
            "model": self.model,
            "min_probability": self.min_probability,
            "examples": self.examples,
            "tfidf": self.tfidf.to_dict() if self.tfidf is not None else None,
            "trained_at": self.trained_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> "Tagger":
        """The tagger stored as ``data``.

        Raises:
            CorruptCollectionError: ``data`` is not a consistent tagger (names ``where``).
        """
        try:
            tagger = cls(
                field=str(data["field"]),
                method=data["method"],
                classes=list(data["classes"]),
                coef=np.asarray(data["coef"], dtype=np.float64),
                intercept=np.asarray(data["intercept"], dtype=np.float64),
                model={"name": str(data["model"]["name"]), "sha256": str(data["model"]["sha256"])},
                min_probability=float(data["min_probability"]),
                examples={str(k): int(v) for k, v in data["examples"].items()},
                tfidf=TfidfFeatures.from_dict(data["tfidf"]) if data.get("tfidf") else None,
                trained_at=str(data["trained_at"]),
            )
            rows = 1 if len(tagger.classes) == 2 else len(tagger.classes)
            width = len(tagger.tfidf.idf) if tagger.tfidf is not None else tagger.coef.shape[-1]
            if (
                tagger.method not in METHODS
                or (tagger.method == TFIDF) != (tagger.tfidf is not None)
                or len(tagger.classes) < 2
                or tagger.coef.shape != (rows, max(width, 1) if tagger.tfidf is not None else width)
                or tagger.intercept.shape != (rows,)
            ):
                raise ValueError("its method, classes and weights do not fit together")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptCollectionError(f"tagger {where} is unreadable ({type(exc).__name__}: {exc})") from None
        return tagger
