"""The tagger's model: NumPy predictions equal scikit-learn's, TF-IDF equals its vectorizer, storage round-trips."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.errors import CorruptCollectionError
from retriever.tagging.classifier import EMBEDDING, TFIDF, Tagger, TfidfFeatures, fit_logistic, probabilities

TEXTS = [
    "the cat sat on the mat",
    "dogs bark loudly at night",
    "the cat purrs softly",
    "a dog runs at night",
    "the mat and the cat",
    "night dogs and a dog",
] * 3


@pytest.mark.parametrize("labels", [["c", "d"] * 9, ["a", "b", "c"] * 6], ids=["two-classes", "three-classes"])
def test_probabilities_equal_scikit_learns(labels):
    from sklearn.linear_model import LogisticRegression

    features = TfidfFeatures.fit(TEXTS).transform(TEXTS)
    classes, coef, intercept = fit_logistic(features, labels)
    reference = LogisticRegression(C=10.0, class_weight="balanced", max_iter=5000).fit(features, labels)
    assert classes == list(reference.classes_)
    np.testing.assert_allclose(probabilities(features, coef, intercept), reference.predict_proba(features), atol=1e-9)


def test_tfidf_features_equal_a_fitted_vectorizer_and_survive_storage():
    from sklearn.feature_extraction.text import TfidfVectorizer

    features = TfidfFeatures.fit(TEXTS)
    reference = TfidfVectorizer(lowercase=True, sublinear_tf=True, min_df=2).fit(TEXTS)
    queries = ["The cat and the DOG", "nothing known here"]
    expected = reference.transform(queries).toarray()
    np.testing.assert_allclose(features.transform(queries).toarray(), expected)
    again = TfidfFeatures.from_dict(features.to_dict())
    np.testing.assert_allclose(again.transform(queries).toarray(), expected)
    assert not features.transform(["nothing known here"]).nnz


def tagger(method=EMBEDDING, **kwargs) -> Tagger:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 8))
    labels = ["a", "b", "c"] * 4
    classes, coef, intercept = fit_logistic(x, labels)
    return Tagger("topic", method, classes, coef, intercept, {"name": "m", "sha256": "0" * 64}, **kwargs)


def test_a_stored_tagger_predicts_the_same():
    original = tagger(min_probability=0.4, examples={"a": 4, "b": 4, "c": 4})
    again = Tagger.from_dict(original.to_dict(), "here")
    x = np.random.default_rng(1).normal(size=(5, 8))
    labels, probs = original.predict(x)
    assert again.predict(x)[0] == labels and np.array_equal(again.predict(x)[1], probs)
    assert set(labels) <= {"a", "b", "c"} and np.all((probs > 1 / 3) & (probs <= 1))


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("coef"),
        lambda d: d.update(method="svm"),
        lambda d: d.update(coef=[[1.0, 2.0]]),
        lambda d: d.update(classes=["only"]),
        lambda d: d.update(method=TFIDF),  # tfidf without its vocabulary
    ],
    ids=["missing", "method", "shape", "one-class", "no-vocabulary"],
)
def test_an_inconsistent_tagger_is_refused(damage):
    data = tagger().to_dict()
    damage(data)
    with pytest.raises(CorruptCollectionError, match="tagger here"):
        Tagger.from_dict(data, "here")


def test_fields_write_label_and_probability_and_respect_the_owner():
    t = tagger(min_probability=0.5)
    assert t.fields({"x": 1}, "a", 0.81234) == {"x": 1, "topic": "a", "topic_probability": 0.8123}
    assert t.fields({"topic": "old", "topic_probability": 0.9}, "b", 0.3) == {"topic_probability": 0.3}
    assert t.owned_by_user({"topic": "mine"}) and not t.owned_by_user({"topic": "a", "topic_probability": 1.0})
