"""Cross-validation picks the method whose features carry the labels, on the same folds."""

from __future__ import annotations

import numpy as np

from retriever.tagging.evaluation import cross_validate


def test_the_informative_features_win_and_figures_are_per_label():
    rng = np.random.default_rng(0)
    labels = ["x"] * 6 + ["y"] * 6
    informative = rng.normal(size=(12, 5)) + np.repeat([[3.0], [-3.0]], 6, axis=0)
    noise = rng.normal(size=(12, 5))
    evaluation = cross_validate({"embedding": noise, "tfidf": informative}, labels)
    assert evaluation.folds == 5 and evaluation.chosen == "tfidf"
    tfidf = evaluation.scores["tfidf"]
    assert tfidf.accuracy == 1.0 and tfidf.macro_f1 == 1.0
    assert evaluation.scores["embedding"].macro_f1 < 1.0
    assert set(tfidf.per_label) == {"x", "y"} and tfidf.per_label["x"]["support"] == 6
    assert "tfidf 1.000" in evaluation.reason


def test_a_single_example_label_cannot_be_cross_validated():
    evaluation = cross_validate({"embedding": np.eye(3), "tfidf": np.eye(3)}, ["a", "a", "b"])
    assert evaluation.folds == 0 and evaluation.scores == {} and evaluation.chosen == "embedding"
    assert "single example" in evaluation.reason


def test_folds_shrink_to_the_smallest_label():
    evaluation = cross_validate({"embedding": np.eye(6)}, ["a", "a", "a", "a", "b", "b"], folds=5)
    assert evaluation.folds == 2
