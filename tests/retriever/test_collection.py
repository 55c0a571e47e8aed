"""Collection: the facade over manifest, catalog and FAISS index (tiny model unless stated)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from retriever import BadInputError, Collection, CollectionNotFoundError, Document, Embedder, ModelMismatchError
from retriever.search.feedback import expanded_query
from retriever.search.fusion import DEFAULT_ALPHA, FEEDBACK_ALPHA, HYBRID_DEPTH
from retriever.search.options import SearchOptions
from retriever.storage.manifest import DEFAULT_CATALOG, MANIFEST
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.segment_format import deletion_file

WORDS = "tea rivers flow into the sea mountains rise above clouds snow covers peaks coffee beans".split()


def words(n: int, offset: int = 0) -> str:
    return " ".join(WORDS[(i + offset) % len(WORDS)] for i in range(n))


def live_keys(col: Collection) -> set[int]:
    """Keys of the live documents in the committed generation's segments."""
    view = col.reader.current()
    keys = set()
    for part in view.parts:
        rows = range(part.segment.n_docs) if part.live_docs is None else part.live_docs.nonzero()[0]
        keys.update(int(part.segment.keys[r]) for r in rows)
    return keys


def assert_consistent(col: Collection) -> None:
    """Catalog, segments and files on disk agree on the committed generation."""
    state = col.catalog.state()
    view = col.reader.current()
    assert view.generation == state.generation
    assert live_keys(col) == set(col.catalog.all_keys().tolist())
    n_docs, n_chunks = col.catalog.counts()
    assert sum(p.n_live_docs for p in view.parts) == n_docs
    assert sum(p.n_live_chunks for p in view.parts) == n_chunks
    on_disk = {p.name: sorted(f.name for f in p.glob("deleted.*")) for p in (col.root / SEGMENTS_DIR).iterdir()}
    expected = {
        ref.name: [deletion_file(ref.deletions), deletion_file(ref.deletions) + ".crc32"] if ref.deletions else []
        for ref in state.segments
    }
    assert on_disk == expected
    for part in view.parts:
        assert part.segment.index.ntotal == part.segment.n_chunks


def snapshot(col: Collection):
    return (
        col.catalog.state().generation,
        col.catalog.counts(),
        {i: (d.text, d.title, d.metadata) for i in col.ids() for d in [col.get(i)]},
        live_keys(col),
    )


def min_max(hits) -> dict[str, float]:
    """Hit scores scaled to [0, 1] by id (all 1.0 when they are equal)."""
    scores = {h.id: h.score for h in hits}
    low, high = min(scores.values(), default=0.0), max(scores.values(), default=0.0)
    return {i: 1.0 if high == low else (s - low) / (high - low) for i, s in scores.items()}


def expected_fusion(
    col: Collection, query: str, fusion: str = "convex", alpha: float = DEFAULT_ALPHA, vector=None
) -> dict[str, float]:
    """The fused score of every document, from the dense and the bm25 rankings of ``query`` as searched alone.

    Convex: ``alpha * minmax(dense) + (1 - alpha) * minmax(bm25)``, a side that
    misses a document giving it 0; rrf: ``sum of 1 / (60 + rank)``, ranks from 1.
    The dense side searches ``vector`` when given, else ``query``.
    """
    dense = col.search(query if vector is None else None, k=HYBRID_DEPTH, mode="dense", vector=vector)
    sparse = col.search(query, k=HYBRID_DEPTH, mode="bm25")
    ids = {h.id for h in dense} | {h.id for h in sparse}
    if fusion == "rrf":
        ranks = [{h.id: r for r, h in enumerate(side, start=1)} for side in (dense, sparse)]
        return {i: sum(1.0 / (60 + side[i]) for side in ranks if i in side) for i in ids}
    d, b = min_max(dense), min_max(sparse)
    return {i: alpha * d.get(i, 0.0) + (1 - alpha) * b.get(i, 0.0) for i in ids}


def assert_fused(hits, expected: dict[str, float], k: int, tolerance: float = 1e-12) -> None:
    """``hits`` are the ``k`` best of ``expected``, by descending score, each with its expected score."""
    assert len(hits) == min(k, len(expected))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.id], abs=tolerance), hit.id
    shown = {h.id for h in hits}
    assert all(score <= hits[-1].score + tolerance for i, score in expected.items() if i not in shown)


@pytest.fixture
def col(tmp_path, tiny_embedder):
    collection = Collection.create(tmp_path / "col", tiny_embedder)
    yield collection
    collection.close()


# -- create / open -------------------------------------------------------------
def test_create_with_defaults_then_open_round_trip(tmp_path, tiny_model_dir, tiny_embedder):
    path = tmp_path / "col"
    created = Collection.create(path, tiny_model_dir)  # default window and overlap
    chunking = created.manifest.chunking
    assert chunking["window_tokens"] == tiny_embedder.max_tokens - 2
    assert 0 <= chunking["overlap_tokens"] < chunking["window_tokens"] // 2
    created.add([{"id": "a", "title": "Tea", "text": "green tea is steamed", "metadata": {"lang": "en"}}])
    created.close()
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["model"]["sha256"] == tiny_embedder.weights_sha256
    assert manifest["model"]["dim"] == tiny_embedder.dim

    reopened = Collection.open(path)  # the model is loaded from the manifest
    assert len(reopened) == 1
    assert reopened.get("a") == Document("a", "green tea is steamed", "Tea", {"lang": "en"})
    assert [h.id for h in reopened.search("green tea")] == ["a"]
    assert reopened.embedder.weights_sha256 == tiny_embedder.weights_sha256
    assert reopened.manifest.uuid == created.manifest.uuid
    reopened.close()
    with Collection.open(path, tiny_embedder) as again:
        assert list(again.ids()) == ["a"]


def test_open_or_create(tmp_path, tiny_embedder):
    path = tmp_path / "col"
    first = Collection.open_or_create(path, tiny_embedder)
    first.add({"id": "a", "text": "tea"})
    second = Collection.open_or_create(path, tiny_embedder)
    assert second.manifest.uuid == first.manifest.uuid
    assert list(second.ids()) == ["a"]


def test_create_over_a_partial_create_succeeds(tmp_path, tiny_embedder):
    path = tmp_path / "col"
    (path / SEGMENTS_DIR / "s000001").mkdir(parents=True)
    (path / DEFAULT_CATALOG).write_text("half-written")
    (path / SEGMENTS_DIR / "s000001" / "vectors.faiss").write_text("junk")
    col = Collection.create(path, tiny_embedder)
    col.add({"id": "a", "text": "tea"})
    assert len(Collection.open(path, tiny_embedder)) == 1


def test_open_missing_or_foreign_directory_raises(tmp_path):
    with pytest.raises(CollectionNotFoundError, match="does not exist"):
        Collection.open(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CollectionNotFoundError, match=MANIFEST):
        Collection.open(tmp_path / "empty")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("hello")
    with pytest.raises(CollectionNotFoundError):
        Collection.open(other)
    (other / MANIFEST).write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(CollectionNotFoundError, match="not a semsearch collection"):
        Collection.open(other)
    assert issubclass(CollectionNotFoundError, BadInputError)


def test_create_refuses_foreign_or_existing_directory(tmp_path, tiny_embedder):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(BadInputError, match="not empty"):
        Collection.create(foreign, tiny_embedder)
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(BadInputError, match="file"):
        Collection.create(a_file, tiny_embedder)

    existing = Collection.create(tmp_path / "col", tiny_embedder)
    existing.add({"id": "a", "text": "tea"})
    with pytest.raises(BadInputError, match="already exists"):
        Collection.create(tmp_path / "col", tiny_embedder)
    assert list(Collection.open(tmp_path / "col", tiny_embedder).ids()) == ["a"]

    (tmp_path / "empty").mkdir()
    Collection.create(tmp_path / "empty", tiny_embedder)  # an empty directory is fine


def test_create_checks_chunk_settings(tmp_path, tiny_embedder):
    with pytest.raises(BadInputError, match="exceeds"):
        Collection.create(tmp_path / "a", tiny_embedder, window_tokens=tiny_embedder.max_tokens)
    with pytest.raises(BadInputError, match="overlap"):
        Collection.create(tmp_path / "b", tiny_embedder, window_tokens=20, overlap_tokens=10)
    col = Collection.create(tmp_path / "c", tiny_embedder, window_tokens=20, overlap_tokens=4, title_prefix=False)
    assert col.manifest.chunking == {"window_tokens": 20, "overlap_tokens": 4, "title_prefix": False}
    assert Collection.open(tmp_path / "c", tiny_embedder).chunker.settings() == col.manifest.chunking


# -- model identity ------------------------------------------------------------
def test_open_with_a_different_model_raises_and_leaves_collection_usable(
    tmp_path, tiny_embedder, perturbed_embedder, minilm, tiny_copy_dir
):
    path = tmp_path / "col"
    Collection.create(path, tiny_embedder).add({"id": "a", "text": "green tea"})
    manifest_before = (path / MANIFEST).read_bytes()
    with pytest.raises(ModelMismatchError, match="different model"):
        Collection.open(path, perturbed_embedder)  # same dim, other weights
    with pytest.raises(ModelMismatchError):
        Collection.open(path, minilm)
    assert (path / MANIFEST).read_bytes() == manifest_before
    # the same weights elsewhere are the same model
    col = Collection.open(path, tiny_copy_dir)
    col.add({"id": "b", "text": "coffee beans"})
    assert {h.id for h in col.search("tea", k=5)} == {"a", "b"}


def test_model_changed_in_place_is_detected_on_first_use(tmp_path, tiny_model_dir, perturbed_model_dir):
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    path = tmp_path / "col"
    Collection.create(path, model_dir).add({"id": "a", "text": "tea"})
    shutil.rmtree(model_dir)
    shutil.copytree(perturbed_model_dir, model_dir)  # retrained in place
    col = Collection.open(path)
    with pytest.raises(ModelMismatchError):
        col.search("tea")


# -- add / get / upsert / delete -----------------------------------------------
def test_add_then_get(col):
    report = col.add(
        [
            {"id": "b", "text": "coffee beans are roasted", "title": "Coffee", "metadata": {"year": 2020}},
            Document("a", "green tea is steamed", "Tea", {"lang": "en", "nested": {"x": [1, 2]}}),
        ]
    )
    assert sorted(report.added) == ["a", "b"] and report.updated == report.unchanged == []
    assert report.chunks == 2
    assert len(col) == 2
    assert list(col.ids()) == ["a", "b"]
    assert col.get("a") == Document("a", "green tea is steamed", "Tea", {"lang": "en", "nested": {"x": [1, 2]}})
    assert col.get("b").metadata == {"year": 2020}
    assert col.get("missing") is None
    assert "a" in col and "missing" not in col
    assert_consistent(col)


def test_add_existing_id_raises_and_changes_nothing(col):
    col.add({"id": "a", "text": "green tea"})
    before = snapshot(col)
    with pytest.raises(BadInputError, match="upsert"):
        col.add([{"id": "new", "text": "rivers"}, {"id": "a", "text": "something else"}])
    assert snapshot(col) == before


def test_upsert_replaces_old_chunks(col):
    col.add({"id": "long", "text": words(400)})
    col.add({"id": "other", "text": words(30, 3)})
    assert len(col.chunk_spans("long")) > 2
    assert_consistent(col)
    generation = col.catalog.state().generation
    old_key = col.catalog.lookup(["long"])["long"].key

    report = col.upsert({"id": "long", "text": "snow covers peaks"})
    assert report.updated == ["long"] and report.added == [] and report.chunks == 1
    assert col.catalog.state().generation == generation + 1
    assert col.catalog.counts() == (2, 2)
    assert col.chunk_spans("long") == [(0, len("snow covers peaks"))]
    assert old_key not in live_keys(col)
    assert_consistent(col)
    hits = col.search("snow covers peaks", k=2)
    assert sorted(h.id for h in hits) == ["long", "other"]
    assert next(h for h in hits if h.id == "long").text == "snow covers peaks"


def test_upsert_unchanged_content_does_no_work(col):
    doc = {"id": "a", "text": "green tea", "title": "Tea", "metadata": {"lang": "en", "n": 1}}
    col.upsert(doc)
    generation = col.catalog.state().generation
    files = {p: p.stat().st_mtime_ns for p in col.root.joinpath(SEGMENTS_DIR).rglob("*")}
    report = col.upsert({"id": "a", "text": "green tea", "title": "Tea", "metadata": {"n": 1, "lang": "en"}})
    assert report.unchanged == ["a"] and report.added == report.updated == [] and report.chunks == 0
    assert col.catalog.state().generation == generation
    assert {p: p.stat().st_mtime_ns for p in col.root.joinpath(SEGMENTS_DIR).rglob("*")} == files

    mixed = col.upsert([doc, {"id": "b", "text": "coffee"}])
    assert mixed.unchanged == ["a"] and mixed.added == ["b"]
    assert col.catalog.state().generation == generation + 1
    # metadata or title alone is a change
    assert col.upsert({**doc, "metadata": {"lang": "de", "n": 1}}).updated == ["a"]
    assert col.upsert({**doc, "metadata": {"lang": "de", "n": 1}, "title": "Tee"}).updated == ["a"]
    assert col.get("a").title == "Tee" and col.get("a").metadata["lang"] == "de"
    assert_consistent(col)


def test_delete_is_seen_at_once_by_another_reader(col, tiny_embedder):
    col.add([{"id": f"d{i}", "text": words(5 + i)} for i in range(6)])
    reader = Collection.open(col.root, tiny_embedder)
    assert "d3" in {h.id for h in reader.search("tea rivers", k=10)}  # reader loaded its index

    report = col.delete(["d3", "unknown", "d3"])
    assert report.deleted == ["d3"]
    for view in (col, reader):
        ids = {h.id for h in view.search("tea rivers", k=10)}
        assert ids == {f"d{i}" for i in range(6)} - {"d3"}
        assert view.get("d3") is None
        assert len(view) == 5
    assert_consistent(col)

    col.add({"id": "late", "text": "coffee beans"})
    assert "late" in {h.id for h in reader.search("coffee", k=10)}
    generation = col.catalog.state().generation
    assert col.delete(["unknown"]).deleted == []
    assert col.delete([]).deleted == []
    assert col.catalog.state().generation == generation
    with pytest.raises(BadInputError):
        col.delete([3])
    reader.close()


def test_delete_everything_then_search(col):
    col.add([{"id": "a", "text": "tea"}, {"id": "b", "text": words(200)}])
    col.delete(["a", "b"])
    assert len(col) == 0
    assert col.search("tea") == []
    assert_consistent(col)


# -- search --------------------------------------------------------------------
def test_search_returns_one_hit_per_document_with_offsets(tmp_path, tiny_embedder):
    col = Collection.create(tmp_path / "col", tiny_embedder, window_tokens=16, overlap_tokens=4)
    docs = [{"id": f"doc{i}", "title": f"T{i}", "text": words(40 + 13 * i, i), "metadata": {"i": i}} for i in range(6)]
    col.add(docs)
    assert col.catalog.counts()[1] > 3 * len(docs)
    hits = col.search(words(8), k=10, feedback=False)  # hybrid, convex with the default alpha, fused once
    assert len(hits) == len(docs)
    assert_fused(hits, expected_fusion(col, words(8)), k=10)
    assert len({h.id for h in hits}) == len(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for hit in hits:
        doc = col.get(hit.id)
        assert doc.text[hit.start : hit.end] == hit.text
        assert hit.title == doc.title and hit.metadata == doc.metadata
        assert set(hit.to_dict()) == {
            "id",
            "score",
            "title",
            "text",
            "start",
            "end",
            "metadata",
            "evidence",
            "location",
        }
        for sentence in hit.evidence:
            assert doc.text[sentence.start : sentence.end] == sentence.text
            assert sentence.start < hit.end and sentence.end > hit.start  # whole sentences that overlap the chunk
    assert len(col.search(words(8), k=3)) == 3
    top = col.search(words(8), k=1, feedback=False)[0]
    assert top.id == hits[0].id and top.score == pytest.approx(hits[0].score)


def test_search_options_given_as_one_value_search_as_the_keywords(tmp_path, tiny_embedder):
    col = Collection.create(tmp_path / "col", tiny_embedder, window_tokens=16, overlap_tokens=4)
    col.add([{"id": f"doc{i}", "text": words(20 + 9 * i, 3 * i), "metadata": {"n": i}} for i in range(8)])
    query = "tea rivers flow into the sea"
    fields = {"k": 4, "where": {"n": {"$gte": 2}}, "fusion": "rrf", "evidence": "none", "feedback": False}
    assert col.search(query, options=SearchOptions(**fields)) == col.search(query, **fields)
    assert col.search(query, options=SearchOptions(k=3)) == col.search(query, k=3)
    with pytest.raises(BadInputError, match="give k in options or as keywords, not both"):
        col.search(query, k=3, options=SearchOptions(k=3))
    with pytest.raises(BadInputError, match="options must be a SearchOptions"):
        col.search(query, options={"k": 3})
    col.close()


@pytest.mark.parametrize("fusion, alpha", [("convex", 0.6), ("convex", 0.25), ("convex", 1.0), ("rrf", 0.6)])
def test_hybrid_scores_are_the_fusion_of_the_dense_and_bm25_rankings(tmp_path, tiny_embedder, fusion, alpha):
    col = Collection.create(tmp_path / "col", tiny_embedder, window_tokens=16, overlap_tokens=4)
    col.add([{"id": f"doc{i}", "text": words(20 + 9 * i, 3 * i)} for i in range(8)])
    col.add([{"id": "nothing-in-common", "text": "zebra quantum violin"}, {"id": "tea", "text": "tea"}])
    query = "tea rivers flow into the sea"
    assert "nothing-in-common" not in {h.id for h in col.search(query, k=20, mode="bm25")}
    expected = expected_fusion(col, query, fusion, alpha)
    assert "nothing-in-common" in expected  # found by the dense side alone
    for k in (3, 20):
        assert_fused(col.search(query, k=k, fusion=fusion, alpha=alpha, feedback=False), expected, k)
    col.close()


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_hybrid_with_feedback_fuses_bm25_with_the_dense_side_of_the_expanded_query(tmp_path, tiny_embedder, fusion):
    """The documents either side found are scored again with the query moved toward the first fusion's best documents."""
    col = Collection.create(tmp_path / "col", tiny_embedder, window_tokens=16, overlap_tokens=4)
    col.add([{"id": f"doc{i}", "text": words(20 + 9 * i, 3 * i)} for i in range(8)])
    query = "tea rivers flow into the sea"
    vector = col.embed(query)[0]
    first = expected_fusion(col, query, fusion, FEEDBACK_ALPHA)
    top = [col.catalog.lookup([i])[i].key for i in sorted(first, key=lambda i: -first[i])]
    expanded = expanded_query(col.reader.current(), vector.reshape(1, -1), top, {})
    assert not np.allclose(expanded[0], vector)
    expected = expected_fusion(col, query, fusion, vector=expanded[0])
    assert_fused(
        col.search(query, k=5, fusion=fusion), expected, 5, tolerance=1e-5
    )  # the vector given normalised again
    if fusion == "convex":  # (ranks alone may stay as they were)
        assert col.search(query, k=5, fusion=fusion) != col.search(query, k=5, fusion=fusion, feedback=False)
    col.close()


def test_filtered_search_returns_k_hits_even_when_matches_are_least_similar(col):
    query = "tea rivers flow into the sea"
    common = [{"id": f"c{i:03d}", "text": query, "metadata": {"group": "common"}} for i in range(185)]
    rare = [
        {"id": f"r{i:02d}", "text": words(150 + 7 * i, 5), "metadata": {"group": "rare", "i": i}} for i in range(15)
    ]
    col.add(common + rare)
    assert len(col) == 200
    assert col.catalog.counts()[1] > 200  # the rare documents have several chunks

    unfiltered = col.search(query, k=10, mode="dense")
    assert all(h.id.startswith("c") for h in unfiltered)
    rare_best = col.search(query, k=15, where={"group": "rare"}, mode="dense")
    assert max(h.score for h in rare_best) < min(h.score for h in unfiltered)

    hits = col.search(query, k=10, where={"group": "rare"}, mode="dense")
    assert len(hits) == 10
    assert len({h.id for h in hits}) == 10
    assert all(h.metadata["group"] == "rare" for h in hits)
    for hit in hits:
        assert col.get(hit.id).text[hit.start : hit.end] == hit.text

    everything = col.search(query, k=50, where={"group": "rare"}, mode="dense")
    assert sorted(h.id for h in everything) == sorted(d["id"] for d in rare)
    assert len(col.search(query, k=3, where={"i": {"$gte": 12}}, mode="dense")) == 3
    assert col.search(query, k=10, where={"group": "none"}, mode="dense") == []


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_filters_apply_to_every_mode_and_k_is_exact(col, mode):
    query = "tea rivers flow into the sea"
    col.add([{"id": f"c{i:03d}", "text": query, "metadata": {"group": "common"}} for i in range(60)])
    col.add(
        [
            {"id": f"r{i:02d}", "text": f"tea number {i} " + words(40, i), "metadata": {"group": "rare"}}
            for i in range(15)
        ]
    )
    hits = col.search(query, k=10, where={"group": "rare"}, mode=mode)
    assert len(hits) == 10 and len({h.id for h in hits}) == 10
    assert all(h.metadata["group"] == "rare" for h in hits)
    for hit in hits:
        assert col.get(hit.id).text[hit.start : hit.end] == hit.text
    assert len(col.search(query, k=50, where={"group": "rare"}, mode=mode)) == 15
    assert col.search(query, k=10, where={"group": "none"}, mode=mode) == []


@pytest.mark.parametrize(
    "query, k", [("", 5), ("   \n", 5), (None, 5), ("tea", 0), ("tea", -1), ("tea", True), ("tea", 2.5)]
)
def test_search_rejects_bad_arguments(col, query, k):
    col.add({"id": "a", "text": "tea"})
    with pytest.raises(BadInputError):
        col.search(query, k=k)


def test_search_empty_collection(col):
    assert col.search("tea") == []
    assert col.search("tea", where={"lang": "en"}) == []


# -- catalogs, info ------------------------------------------------------------
def test_catalog_in_a_separate_sqlite_file(tmp_path, tiny_embedder):
    (tmp_path / "db").mkdir()
    db = tmp_path / "db" / "catalog.db"
    url = f"sqlite:///{db}"
    path = tmp_path / "col"
    col = Collection.create(path, tiny_embedder, catalog_url=url)
    col.add([{"id": "a", "text": "tea", "metadata": {"lang": "en"}}, {"id": "b", "text": words(9)}])
    assert db.is_file()
    assert not (path / DEFAULT_CATALOG).exists()
    assert str(db) in col.info()["catalog"]
    col.close()

    reopened = Collection.open(path, tiny_embedder)
    assert reopened.manifest.catalog_url == url
    assert len(reopened) == 2
    assert [h.id for h in reopened.search("tea", where={"lang": "en"})] == ["a"]
    assert_consistent(reopened)

    # a second collection must not take over (and empty) the first one's catalog
    with pytest.raises(BadInputError, match="already belongs"):
        Collection.create(tmp_path / "col2", tiny_embedder, catalog_url=url)
    again = Collection.open(path, tiny_embedder)
    assert len(again) == 2 and {h.id for h in again.search("tea")} == {"a", "b"}


def test_info_reports_counts_model_and_size(col, tiny_embedder):
    empty = col.info()
    assert empty["documents"] == 0 and empty["chunks"] == 0
    assert empty["model"] == tiny_embedder.name
    assert empty["model_sha256"] == tiny_embedder.weights_sha256
    assert empty["dim"] == tiny_embedder.dim
    assert empty["size_bytes"] > 0
    col.add([{"id": f"d{i}", "text": words(20 + 40 * i)} for i in range(10)])
    info = col.info()
    n_chunks = col.catalog.counts()[1]
    assert info["documents"] == 10
    assert info["chunks"] == n_chunks > 10
    assert info["size_bytes"] > empty["size_bytes"]
    assert info["generation"] == empty["generation"] + 1
    assert info["chunking"] == col.manifest.chunking
    assert info["path"] == str(col.root.resolve())


# -- long documents ------------------------------------------------------------
def test_long_document_gets_covering_chunks(col, tiny_embedder):
    text = words(500)
    report = col.add({"id": "long", "text": text, "title": "Long"})
    spans = col.chunk_spans("long")
    window = col.manifest.chunking["window_tokens"]
    assert report.chunks == len(spans) >= 500 // window + 1
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (_, a_end), (b_start, _) in zip(spans, spans[1:]):
        assert b_start < a_end  # overlapping, no gap
    for start, end in spans:
        assert tiny_embedder.count_tokens(["Long\n" + text[start:end]])[0] <= tiny_embedder.max_tokens


PASTA = [
    "Fresh pasta is made from flour and eggs kneaded into a smooth dough.",
    "The dough rests under a cloth for half an hour before it is rolled out thinly.",
    "Cooks in Bologna cut the sheets into wide ribbons called tagliatelle.",
    "A ragu simmers for hours with onions, carrots, celery, minced beef and a splash of milk.",
    "Salt the boiling water generously, because pasta absorbs flavour while it cooks.",
    "Drain the noodles while they are still firm to the bite, al dente as Italians say.",
    "Toss them in the pan with the sauce and a ladle of starchy cooking water.",
    "Grated parmesan and a few basil leaves finish the plate.",
    "Dried durum wheat pasta keeps for months in the pantry.",
    "Filled shapes such as ravioli and tortellini hide ricotta, spinach or meat inside.",
]
VOLCANO = (
    "Far from any kitchen, a volcano erupted on the island last night. Molten lava poured down "
    "its slopes, ash clouds rose kilometres into the sky and villagers were evacuated as "
    "magma kept flowing from the crater."
)


def test_query_matching_only_the_tail_of_a_long_document(tmp_path, minilm):
    col = Collection.create(tmp_path / "col", minilm)
    pasta = " ".join(PASTA[i % len(PASTA)] for i in range(40))
    text = pasta + "\n\n" + VOLCANO
    col.add(
        [
            {"id": "long", "title": "Notes", "text": text},
            {"id": "market", "text": "Stock markets fell sharply as investors sold bank shares."},
            {"id": "puppy", "text": "Training a puppy takes patience, treats and short daily sessions."},
            {"id": "plants", "text": "Photosynthesis turns sunlight, water and carbon dioxide into sugar."},
        ]
    )
    n_long_chunks = len(col.chunk_spans("long"))
    assert n_long_chunks >= 3
    hits = col.search("lava flowing from an erupting volcano", k=2)
    top = hits[0]
    assert top.id == "long"
    assert top.start > len(pasta) // 2, "the hit should show the tail chunk"
    assert top.end == len(text)
    assert text[top.start : top.end] == top.text
    assert "volcano erupted" in top.text


def test_word_longer_than_the_window_is_indexed(tmp_path, minilm):
    col = Collection.create(tmp_path / "col", minilm, window_tokens=16, overlap_tokens=4)
    word = ("pneumonoultramicroscopicsilicovolcanoconiosis" * 3)[:96]
    text = f"The diagnosis read {word} in the report."
    report = col.add({"id": "w", "text": text})
    assert report.chunks >= 2
    covered = set()
    for start, end in col.chunk_spans("w"):
        covered.update(range(start, end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


# -- bad documents -------------------------------------------------------------
BAD_DOCUMENTS = {
    "empty text": {"id": "x", "text": ""},
    "blank text": {"id": "x", "text": "  \n "},
    "text without tokens": {"id": "x", "text": "\u200b\u200b"},
    "missing text": {"id": "x"},
    "text not a string": {"id": "x", "text": 42},
    "missing id": {"text": "tea"},
    "empty id": {"id": "  ", "text": "tea"},
    "id not a string": {"id": 7, "text": "tea"},
    "title not a string": {"id": "x", "text": "tea", "title": ["t"]},
    "metadata not JSON": {"id": "x", "text": "tea", "metadata": {"when": object()}},
    "metadata NaN": {"id": "x", "text": "tea", "metadata": {"score": float("nan")}},
    "metadata a string": {"id": "x", "text": "tea", "metadata": "lang=en"},
    "metadata a list": {"id": "x", "text": "tea", "metadata": ["lang", "en"]},
    "unknown field": {"id": "x", "text": "tea", "lang": "en"},
    "not a mapping": "just a string",
}


@pytest.fixture(scope="module")
def populated(tiny_embedder, tmp_path_factory):
    col = Collection.create(tmp_path_factory.mktemp("bad") / "col", tiny_embedder)
    col.add([{"id": "keep", "text": "green tea", "metadata": {"lang": "en", "score": 0.5}}])
    yield col
    col.close()


@pytest.mark.parametrize("method", ["add", "upsert"])
@pytest.mark.parametrize("bad", list(BAD_DOCUMENTS.values()), ids=list(BAD_DOCUMENTS))
def test_bad_document_raises_and_changes_nothing(populated, method, bad):
    col = populated
    before = snapshot(col)
    batch = [{"id": "fresh", "text": "coffee beans"}, bad]
    if method == "upsert":
        batch.insert(0, {"id": "keep", "text": "replaced text"})
    with pytest.raises(BadInputError):
        getattr(col, method)(batch)
    assert snapshot(col) == before
    assert col.get("fresh") is None
    # filters still work (a NaN stored in the catalog would break every one of them)
    assert [h.id for h in col.search("tea", where={"score": {"$gt": 0.1}})] == ["keep"]


@pytest.mark.parametrize("method", ["add", "upsert"])
def test_duplicate_id_within_a_batch_raises(populated, method):
    before = snapshot(populated)
    with pytest.raises(BadInputError, match="twice"):
        getattr(populated, method)([{"id": "d", "text": "tea"}, {"id": "d", "text": "coffee"}])
    assert snapshot(populated) == before


def test_collection_is_usable_after_a_rejected_batch(col):
    col.add({"id": "keep", "text": "green tea"})
    with pytest.raises(BadInputError):
        col.upsert([{"id": "keep", "text": "new text"}, {"id": "x", "text": "\u200b"}])
    assert col.get("keep").text == "green tea"
    col.upsert([{"id": "keep", "text": "new text"}, {"id": "x", "text": "coffee", "metadata": {"n": 1}}])
    assert col.get("keep").text == "new text"
    assert [h.id for h in col.search("coffee", where={"n": 1})] == ["x"]
    assert_consistent(col)


def test_collection_embed_uses_the_collection_model(col, tiny_embedder):
    np.testing.assert_allclose(col.embed(["tea", "rivers"]), tiny_embedder.embed(["tea", "rivers"]), atol=1e-6)
    assert isinstance(col.embedder, Embedder)


def test_metadata_only_change_reembeds_nothing(col):
    col.add(
        [
            {"id": "a", "title": "Tea", "text": "green tea is steamed", "metadata": {"region": "en"}},
            {"id": "b", "text": "coffee beans are roasted", "metadata": {"region": "en"}},
        ]
    )
    generation = col.catalog.state().generation
    segments_before = col.catalog.state().segments
    keys_before = live_keys(col)
    report = col.upsert([{"id": "a", "title": "Tea", "text": "green tea is steamed", "metadata": {"region": "de"}}])
    assert (report.updated, report.chunks) == (["a"], 0)
    # the generation moves, so every reader sees the new metadata at once; no segment changes
    assert col.catalog.state().generation == generation + 1
    assert col.catalog.state().segments == segments_before
    assert live_keys(col) == keys_before
    assert col.get("a").metadata == {"region": "de"}
    assert [h.id for h in col.search("tea", k=5, where={"region": "de"})] == ["a"]
    assert col.upsert(
        [{"id": "a", "title": "Tea", "text": "green tea is steamed", "metadata": {"region": "de"}}]
    ).unchanged == ["a"]
    # mixed batch: one metadata-only change and one text change commit together
    report = col.upsert(
        [
            {"id": "a", "title": "Tea", "text": "green tea is steamed", "metadata": {"region": "fr"}},
            {"id": "b", "text": "coffee beans are roasted slowly", "metadata": {"region": "en"}},
        ]
    )
    assert sorted(report.updated) == ["a", "b"] and report.chunks == 1
    assert col.get("a").metadata == {"region": "fr"} and col.get("b").text.endswith("slowly")
    assert_consistent(col)
