"""Switching a collection's model in one generation: every vector re-embedded, nothing else changed."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from retriever import BadInputError, Collection, Embedder, ModelMismatchError, ModelSwitchedError
from retriever.storage.manifest import MANIFEST, Manifest
from retriever.storage.segment import SEGMENTS_DIR

QUERIES = ("green tea after picking", "rivers flow into the sea", "python databases")


def documents(first: int, n: int) -> list[dict]:
    words = "tea coffee rivers mountains snow neural python databases fox clouds sea green".split()
    return [
        {
            "id": f"d{i:03d}",
            "title": f"note {i}",
            "metadata": {"i": i},
            "text": " ".join(words[(i * 7 + j) % len(words)] for j in range(30 + 11 * (i % 5))),
        }
        for i in range(first, first + n)
    ]


def perturbed(model_dir, path, seed: int):
    """A copy of the model at ``model_dir`` with its weights moved a little, saved at ``path``."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    model.save(str(path))
    return path


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory, tiny_model_dir):
    """The tiny model with other weights and the same tokenizer, as ``adapt`` makes one."""
    return perturbed(tiny_model_dir, tmp_path_factory.mktemp("other-model") / "model", seed=1)


@pytest.fixture(scope="module")
def other_embedder(other_model_dir):
    return Embedder(other_model_dir, backend="torch-fp32")


@pytest.fixture()
def collection(tmp_path, tiny_model_dir):
    col = Collection.create(
        tmp_path / "col", Embedder(tiny_model_dir, backend="torch-fp32"), window_tokens=24, overlap_tokens=4
    )
    col.add(documents(0, 30))
    col.add(documents(30, 10))
    col.delete(["d003", "d031"])
    yield col
    col.close()


def ranking(col: Collection, mode: str = "dense") -> list[list[tuple[str, float]]]:
    return [[(h.id, round(h.score, 4)) for h in col.search(q, k=8, mode=mode, evidence="none")] for q in QUERIES]


def scores(col: Collection, query: str) -> dict[str, float]:
    return {h.id: h.score for h in col.search(query, k=100, mode="dense", evidence="none")}


def built_with(tmp_path, embedder, ids) -> Collection:
    """A collection indexed from scratch with ``embedder``, holding ``ids``."""
    col = Collection.create(tmp_path / f"fresh-{len(ids)}", embedder, window_tokens=24, overlap_tokens=4)
    col.add([d for d in documents(0, 60) if d["id"] in ids])
    return col


def test_switch_reembeds_every_document_as_indexing_with_the_model_would(collection, other_embedder, tmp_path):
    bm25_before = ranking(collection, "bm25")
    generation = collection.reader.current().generation
    report = collection.switch_model(other_embedder, progress=False)
    assert report.generation == generation + 1 == collection.reader.current().generation
    assert report.sha256 == other_embedder.weights_sha256 == collection.model["sha256"]
    assert report.chunks == collection.catalog.counts()[1] and len(collection) == 38
    fresh = built_with(tmp_path, other_embedder, set(collection.ids()))
    assert ranking(collection) == ranking(fresh)  # titles in front of chunks, spans: as the chunker made them
    assert ranking(collection, "bm25") == bm25_before
    assert "d003" not in collection and collection.search("tea", k=40, mode="bm25")
    reopened = Collection.open(collection.root)
    assert reopened.model["sha256"] == reopened.embedder.weights_sha256 == other_embedder.weights_sha256  # by name
    assert reopened.manifest.previous_model["sha256"] not in (None, other_embedder.weights_sha256)
    with pytest.raises(ModelMismatchError):
        Collection.open(collection.root, model=Embedder(collection.manifest.previous_model["name"]))
    assert ranking(Collection.open(collection.root, model=other_embedder)) == ranking(fresh)
    fresh.close()
    reopened.close()


def test_a_reader_opened_before_follows_the_switch_and_old_generations_keep_their_model(collection, other_embedder):
    reader = Collection.open(collection.root)
    old_generation = reader.reader.current().generation
    before = ranking(reader)
    old_sha = reader.model["sha256"]
    collection.switch_model(other_embedder, progress=False)
    assert reader.model["sha256"] == other_embedder.weights_sha256  # HEAD moved: the manifest was read again
    assert ranking(collection) != before
    for query in QUERIES:  # (the reader loaded the new model by name: another backend, scores within bf16's reach)
        found, expected = scores(reader, query), scores(collection, query)
        assert found.keys() == expected.keys() and all(abs(found[i] - expected[i]) < 3e-3 for i in found)
    assert reader.models.model_at(old_generation)["sha256"] == old_sha  # a search still on that view
    reader.close()


def test_writes_made_while_it_embedded_are_carried_into_the_new_generation(
    collection, other_embedder, tmp_path, monkeypatch
):
    other = Collection.open(collection.root)
    take_lock = collection.writer.locked

    @contextlib.contextmanager
    def meanwhile():  # another process writes after the first pass, before the switch takes the lock
        other.add(documents(40, 5))
        other.delete(["d000", "d032"])
        with take_lock():
            yield

    monkeypatch.setattr(collection.writer, "locked", meanwhile)
    collection.switch_model(other_embedder, progress=False)
    assert {"d040", "d044"} <= set(collection.ids()) and not {"d000", "d032"} & set(collection.ids())
    fresh = built_with(tmp_path, other_embedder, set(collection.ids()))
    assert ranking(collection) == ranking(fresh)
    assert sorted(p.name for p in (collection.root / SEGMENTS_DIR).iterdir()) == sorted(
        p.ref.name for p in collection.reader.current().parts
    )  # nothing staged is left behind
    fresh.close()
    other.close()


def test_documents_embedded_by_the_old_model_are_embedded_again_or_refused(collection, other_embedder, tmp_path):
    other = Collection.open(collection.root)
    folder = other.prepare(documents(50, 2))  # a worker's staged segment, old model
    take_lock = other.writer.locked
    switched = []

    @contextlib.contextmanager
    def switch_first():
        if not switched:
            switched.append(collection.switch_model(other_embedder, progress=False))
        with take_lock():
            yield

    other.writer.locked = switch_first
    with pytest.raises(ModelSwitchedError, match="switched"):
        other.commit_prepared([folder])
    assert "d050" not in other
    report = other.upsert(documents(52, 2))  # embedded by the old model, refused, embedded again by the new
    assert report.added == ["d052", "d053"] and switched
    fresh = built_with(tmp_path, other_embedder, set(collection.ids()))
    for query in QUERIES:  # (the new model loaded by name: another backend, scores within bf16's reach)
        found, expected = scores(collection, query), scores(fresh, query)
        assert found.keys() == expected.keys() and all(abs(found[i] - expected[i]) < 3e-3 for i in found)
    fresh.close()
    other.close()


def test_a_switch_that_fails_before_its_publish_leaves_the_old_model(collection, other_embedder, monkeypatch):
    before, manifest = ranking(collection), (collection.root / MANIFEST).read_text()
    segments = sorted(p.name for p in (collection.root / SEGMENTS_DIR).iterdir())

    def lost(*args, **kwargs):
        raise OSError("connection lost")

    monkeypatch.setattr(collection.catalog, "publish", lost)
    with pytest.raises(OSError):
        collection.switch_model(other_embedder, progress=False)
    monkeypatch.undo()
    assert (collection.root / MANIFEST).read_text() == manifest
    assert sorted(p.name for p in (collection.root / SEGMENTS_DIR).iterdir()) == segments
    assert ranking(collection) == before


def test_a_switch_killed_after_recording_the_model_is_taken_back(collection, other_embedder):
    """The manifest names the new model from the next generation on; that generation never came."""
    before, generation = ranking(collection), collection.reader.current().generation
    collection.manifest.switched(other_embedder.identity(), generation + 1).save(collection.root)
    reader = Collection.open(collection.root, model=collection.embedder)  # checked against the model in force
    assert reader.model["sha256"] != other_embedder.weights_sha256 and ranking(reader) == before
    with reader.writer.locked():  # the next writer
        pass
    manifest = Manifest.load(collection.root)
    assert manifest.model["sha256"] == reader.model["sha256"] and manifest.model_since == 0
    assert manifest.previous_model is None
    reader.close()


def test_models_that_chunk_otherwise_are_refused(collection, tiny_model_dir, tmp_path):
    respelt = perturbed(tiny_model_dir, tmp_path / "respelt", seed=2)
    tokenizer = json.loads((respelt / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["tee"] = vocab.pop("tea")  # one word of the vocabulary spelt otherwise
    (respelt / "tokenizer.json").write_text(json.dumps(tokenizer))
    (respelt / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    before = ranking(collection)
    with pytest.raises(ModelMismatchError, match="other tokens"):
        collection.switch_model(Embedder(respelt, backend="torch-fp32"), progress=False)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model.max_seq_length = 16
    model.save(str(tmp_path / "short"))
    short = Embedder(tmp_path / "short", backend="torch-fp32")
    with pytest.raises(ModelMismatchError, match="fewer than the collection's chunks"):
        collection.switch_model(short, progress=False)
    assert ranking(collection) == before


def test_documents_with_the_callers_vectors_longer_than_the_window_are_named(collection, other_embedder):
    long = {"id": "given", "text": " ".join(["rivers flow into the sea"] * 40)}
    collection.add([long], vectors=np.ones((1, collection.model["dim"]), dtype=np.float32))
    before = ranking(collection)
    with pytest.raises(BadInputError, match="'given' has a chunk of"):
        collection.switch_model(other_embedder, progress=False)
    assert ranking(collection) == before and collection.model["sha256"] != other_embedder.weights_sha256


def test_an_interrupt_after_the_publish_landed_keeps_the_switch(collection, other_embedder, tmp_path, monkeypatch):
    publish = collection.catalog.publish

    def landed_then_interrupted(*args, **kwargs):
        publish(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(collection.catalog, "publish", landed_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        collection.switch_model(other_embedder, progress=False)
    monkeypatch.undo()
    assert collection.model["sha256"] == other_embedder.weights_sha256
    fresh = built_with(tmp_path, other_embedder, set(collection.ids()))
    with Collection.open(collection.root, model=other_embedder) as reopened:  # the new segments were kept
        report = reopened.check()
        assert ranking(reopened) == ranking(fresh) and not report.damaged and not report.unverified
    fresh.close()
