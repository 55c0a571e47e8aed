"""A collection's own hybrid settings: built in until chosen, kept in the manifest, taken up by every reader."""

from __future__ import annotations

import pytest

from retriever import BadInputError, Collection, Document
from retriever.search_settings import BUILT_IN

TOPICS = ["tea leaves brewing", "green tea harvest", "coffee roasting beans", "espresso machine pressure"]


def filled(path, embedder) -> Collection:
    collection = Collection.create(path, embedder)
    collection.add(
        [Document(id=f"d{n}", text=f"{topic} note {n} about {TOPICS[(n + 1) % 4]}") for n, topic in enumerate(TOPICS)]
    )
    return collection


def ranked(collection: Collection, **settings) -> list[tuple[str, float]]:
    return [(hit.id, round(hit.score, 6)) for hit in collection.search("tea brewing", k=4, evidence="none", **settings)]


def test_built_in_until_chosen_then_kept_and_read_by_other_readers(tmp_path, tiny_embedder):
    collection = filled(tmp_path / "c", tiny_embedder)
    assert collection.search_settings() == BUILT_IN
    other = Collection.open(tmp_path / "c", tiny_embedder)  # a second reader, opened before the choice
    assert ranked(other) == ranked(other, fusion="convex", alpha=0.7, feedback=True)

    chosen = collection.choose_search_settings(fusion="rrf", feedback=False)
    assert chosen == {"fusion": "rrf", "alpha": 0.7, "feedback": False}
    assert other.search_settings() == chosen  # read again once the manifest changed
    assert ranked(other) == ranked(other, fusion="rrf", feedback=False)
    assert ranked(other) != ranked(other, fusion="convex", feedback=True)
    assert ranked(other, fusion="convex", alpha=0.7, feedback=True) == ranked(
        collection, fusion="convex", feedback=True
    )
    collection.close()
    other.close()
    assert Collection.open(tmp_path / "c", tiny_embedder).search_settings() == chosen


def test_a_bad_setting_is_refused_and_nothing_changes(tmp_path, tiny_embedder):
    collection = filled(tmp_path / "c", tiny_embedder)
    collection.choose_search_settings(alpha=0.4)
    for bad, words in [
        ({"alpha": 1.5}, "alpha must be"),
        ({"fusion": "max"}, "unknown fusion"),
        ({"feedback": 1}, "feedback must be"),
        ({"depth": 3}, "unknown search setting"),
    ]:
        with pytest.raises(BadInputError, match=words):
            collection.choose_search_settings(**bad)
    assert collection.search_settings()["alpha"] == 0.4


def test_snapshots_and_model_switches_keep_the_settings(tmp_path, tiny_embedder, perturbed_embedder):
    collection = filled(tmp_path / "c", tiny_embedder)
    chosen = collection.choose_search_settings(alpha=0.35, feedback=False)
    collection.snapshot(tmp_path / "snap")
    assert Collection.open(tmp_path / "snap", tiny_embedder).search_settings() == chosen
    collection.switch_model(perturbed_embedder, progress=False)
    assert collection.search_settings() == chosen
