"""``Collection.tag`` and friends on real collections (SQLite and PostgreSQL catalogs).

Documents carry vectors given by the test, drawn around two directions, so
which label each must get is known without a trained model.
"""

from __future__ import annotations

import numpy as np
import pytest

from retriever import Collection
from retriever.errors import BadInputError, CorruptCollectionError
from retriever.tagging.classifier import Tagger
from retriever.tagging.store import save_tagger, tagger_path

DIM = 32
PER_SIDE = 20


def vectors_around(axis: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(scale=0.3, size=(n, DIM))
    v[:, axis] += 2.0
    return v


def documents(prefix: str, n: int, metadata=None) -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "text": f"{prefix} document number {i}", "metadata": dict(metadata or {})}
        for i in range(n)
    ]


@pytest.fixture()
def col(tmp_path, tiny_embedder, catalog_url):
    collection = Collection.create(tmp_path / "col", tiny_embedder, catalog_url=catalog_url)
    collection.add(
        documents("n", PER_SIDE, {"lang": "en"}) + documents("s", PER_SIDE),
        vectors=np.concatenate([vectors_around(0, PER_SIDE, 1), vectors_around(1, PER_SIDE, 2)]),
    )
    yield collection
    collection.close()


EXAMPLES = [{"id": f"n{i}", "label": "north"} for i in range(3)] + [{"id": f"s{i}", "label": "south"} for i in range(3)]


def test_tag_labels_every_document_in_one_generation(col):
    before = col.catalog.state().generation
    report = col.tag("side", EXAMPLES, method="embedding")
    assert report.generation == before + 1 and col.catalog.state().generation == before + 1
    assert report.labels == {"north": PER_SIDE, "south": PER_SIDE} and report.written == 2 * PER_SIDE
    assert col.get("n7").metadata["side"] == "north" and col.get("s9").metadata["side"] == "south"
    assert col.get("n0").metadata == {"lang": "en", "side": "north", "side_probability": 1.0}  # an example
    assert 0.5 < col.get("n7").metadata["side_probability"] < 1.0
    hits = col.search(vector=vectors_around(0, 1, 9)[0], k=50, where={"side": "south"})
    assert sorted(h.id for h in hits) == sorted(f"s{i}" for i in range(PER_SIDE))
    assert col.metadata_fields()["side"][:2] == ["north", "south"]


def test_indexing_the_same_documents_again_does_no_work_and_keeps_tags(col):
    col.tag("side", EXAMPLES, method="embedding")
    report = col.upsert(documents("n", PER_SIDE, {"lang": "en"}), vectors=vectors_around(0, PER_SIDE, 1))
    assert report.unchanged == [f"n{i}" for i in range(PER_SIDE)]
    assert col.get("n5").metadata["side"] == "north"
    col.upsert([{"id": "n5", "text": "n document number 5", "metadata": {"lang": "fr"}}])  # metadata alone
    assert col.get("n5").metadata == {
        "lang": "fr",
        "side": "north",
        "side_probability": pytest.approx(col.get("n6").metadata["side_probability"], abs=0.2),
    }


def test_new_documents_are_tagged_at_commit_and_owners_values_kept(col):
    col.tag("side", EXAMPLES, method="embedding")
    col.add(
        [
            {"id": "new-n", "text": "fresh"},
            {"id": "new-s", "text": "fresh too"},
            {"id": "mine", "text": "mine", "metadata": {"side": "east"}},
        ],
        vectors=np.concatenate([vectors_around(0, 1, 5), vectors_around(1, 1, 6), vectors_around(0, 1, 7)]),
    )
    assert col.get("new-n").metadata["side"] == "north" and col.get("new-s").metadata["side"] == "south"
    assert col.get("mine").metadata == {"side": "east"}
    assert col.stale_tags("side") == []
    report = col.tag("side", EXAMPLES, method="embedding")  # retagging never replaces the owner's value
    assert report.kept == 1 and col.get("mine").metadata == {"side": "east"}


def test_prepared_segments_are_tagged_when_committed(col):
    col.tag("side", EXAMPLES, method="embedding")
    folder = col.prepare([{"id": "ray-s", "text": "from a worker"}], vectors=vectors_around(1, 1, 8))
    col.commit_prepared([folder])
    assert col.get("ray-s").metadata["side"] == "south"


def test_min_probability_dry_run_and_stale(col):
    report = col.tag("side", EXAMPLES, method="embedding", min_probability=1.0, dry_run=True)
    assert report.dry_run and report.unlabelled == 2 * PER_SIDE - len(EXAMPLES)
    assert "side" not in col.get("n7").metadata and not tagger_path(col.root, "side").exists()
    col.tag("side", EXAMPLES, method="embedding", min_probability=1.0)
    meta = col.get("n7").metadata
    assert "side" not in meta and meta["side_probability"] < 1.0  # below the threshold: empty, probability kept
    assert col.stale_tags("side") == []
    tagger = Tagger.from_dict(_stored(col), "stored")
    tagger.model = {"name": "other", "sha256": "0" * 64}
    save_tagger(col.root, tagger)  # a tagger of another model's vectors tags nothing
    col.add([{"id": "late", "text": "late"}], vectors=vectors_around(0, 1, 3))
    assert "side_probability" not in col.get("late").metadata
    assert len(col.stale_tags("side")) == 2 * PER_SIDE + 1


def _stored(col) -> dict:
    import json

    return json.loads(json.loads(tagger_path(col.root, "side").read_text())["tagger"])


def test_tfidf_method_tags_by_words(col):
    col.upsert(
        [{"id": f"w{i}", "text": f"{word} {word} report {i}"} for i, word in enumerate(["volcano", "glacier"] * 6)],
        vectors=vectors_around(2, 12, 4),
    )
    examples = [{"id": f"w{i}", "label": "hot" if i % 2 == 0 else "cold"} for i in range(4)]
    report = col.tag("climate", examples, method="tfidf")
    assert report.method == "tfidf"
    assert [col.get(f"w{i}").metadata["climate"] for i in range(4, 12)] == ["hot", "cold"] * 4
    col.add([{"id": "later", "text": "a glacier glacier"}], vectors=vectors_around(2, 1, 9))
    assert col.get("later").metadata["climate"] == "cold"


def test_bad_calls_are_errors_and_store_nothing(col):
    with pytest.raises(BadInputError, match="not in the collection: 'ghost'"):
        col.tag("side", EXAMPLES + [{"id": "ghost", "label": "north"}])
    with pytest.raises(BadInputError, match="min_probability"):
        col.tag("side", EXAMPLES, min_probability=1.5)
    with pytest.raises(BadInputError, match="unknown tagging method"):
        col.tag("side", EXAMPLES, method="svm")
    with pytest.raises(BadInputError, match="field must be"):
        col.tag("", EXAMPLES)
    with pytest.raises(BadInputError, match="no tagger for field 'side'"):
        col.stale_tags("side")
    with pytest.raises(BadInputError, match="folds"):
        col.evaluate_tags(EXAMPLES, folds=1)
    assert not (col.root / "taggers").exists() and "side" not in col.get("n1").metadata


def test_a_failed_commit_puts_the_previous_tagger_back(col, monkeypatch):
    col.tag("side", EXAMPLES, method="embedding")
    stored = tagger_path(col.root, "side").read_bytes()
    generation = col.catalog.state().generation

    def refuse(updates):
        raise OSError("disk full")

    monkeypatch.setattr(col.writer, "update_metadata", refuse)
    with pytest.raises(OSError, match="disk full"):
        col.tag("side", [{"id": "n1", "label": "up"}, {"id": "s1", "label": "down"}], method="embedding")
    assert tagger_path(col.root, "side").read_bytes() == stored and col.catalog.state().generation == generation
    assert col.get("n9").metadata["side"] == "north"


def test_a_damaged_tagger_stops_commits_with_its_name(col):
    col.tag("side", EXAMPLES, method="embedding")
    path = tagger_path(col.root, "side")
    path.write_bytes(path.read_bytes().replace(b"north", b"nurth", 1))
    with pytest.raises(CorruptCollectionError, match="damaged"):
        col.add([{"id": "x", "text": "x"}], vectors=vectors_around(0, 1, 1))
    assert "x" not in col and col.get("n3").metadata["side"] == "north"
