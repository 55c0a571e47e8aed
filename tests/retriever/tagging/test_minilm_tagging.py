"""The packaged MiniLM as a frozen feature extractor: a few examples tag what the model understands."""

from __future__ import annotations

import pytest

from retriever import Collection

GOOD = ["the delivery was fast and the packing was neat", "excellent product, works exactly as described"]
BAD = ["arrived a week late and the box was crushed", "stopped working after two days, waste of money"]
LESSON = [{"text": t, "label": "good"} for t in GOOD] + [{"text": t, "label": "bad"} for t in BAD]


@pytest.fixture()
def reviews(tmp_path, minilm):
    with Collection.create(tmp_path / "reviews", minilm) as col:
        col.add(
            [
                {"id": "courier", "text": "the courier turned up on time and everything was intact"},
                {"id": "broke", "text": "it broke almost immediately"},
            ]
        )
        yield col


def test_the_lessons_four_sentences_label_a_breakage_bad(reviews):
    report = reviews.tag("review", LESSON, method="embedding")
    assert report.labels and reviews.get("broke").metadata["review"] == "bad"
    assert reviews.get("broke").metadata["review_probability"] > 0.6


@pytest.mark.xfail(
    strict=True,
    reason="all-MiniLM-L6-v2 places this sentence nearer 'arrived a week late and the "
    "box was crushed' (cosine 0.46) than either good example (0.41, 0.03): four examples cannot "
    "teach a linear probe delivery sentiment over delivery topic",
)
def test_the_lessons_four_sentences_label_a_punctual_courier_good(reviews):
    reviews.tag("review", LESSON, method="embedding")
    assert reviews.get("courier").metadata["review"] == "good"


def test_topics_from_four_examples_each_beat_words_alone(tmp_path, minilm):
    topics = {
        "cooking": [
            "simmer the onions in butter until soft",
            "bake the bread at two hundred degrees",
            "season the soup with salt and pepper",
            "whisk the eggs with sugar for the cake",
        ],
        "sport": [
            "the striker scored twice in the second half",
            "the tennis final went to five sets",
            "the marathon runner broke the record",
            "the team won the league on the last day",
        ],
    }
    unseen = {
        "roast the chicken with garlic and lemon": "cooking",
        "knead the dough and let it rise overnight": "cooking",
        "the goalkeeper saved a penalty in extra time": "sport",
        "she swam the final lap in record time": "sport",
    }
    with Collection.create(tmp_path / "col", minilm) as col:
        col.add(
            [{"id": f"{t}{i}", "text": x} for t, texts in topics.items() for i, x in enumerate(texts)]
            + [{"id": f"u{i}", "text": x} for i, x in enumerate(unseen)]
        )
        examples = [{"id": f"{t}{i}", "label": t} for t in topics for i in range(4)]
        evaluation = col.evaluate_tags(examples)
        assert evaluation.folds == 4 and evaluation.chosen == "embedding"
        assert evaluation.scores["embedding"].accuracy > evaluation.scores["tfidf"].accuracy
        report = col.tag("topic", examples)
        assert report.method == "embedding" and report.evaluation is not None
        assert [col.get(f"u{i}").metadata["topic"] for i in range(4)] == list(unseen.values())
