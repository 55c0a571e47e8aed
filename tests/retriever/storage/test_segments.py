"""The collection as segments: commits, deletions, merging, approximate indexes and the in-memory query path."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import event

from retriever import BadInputError, Collection
from retriever.search.bm25_matrix import BM25Index
from retriever.search.ranking import dense_rankings
from retriever.search.vector_index import IndexPolicy
from retriever.storage.merging import MergePolicy
from retriever.storage.segment import SEGMENTS_DIR

WORDS = "tea rivers flow into the sea mountains rise above clouds snow covers peaks coffee beans roast".split()


def text(i: int, n: int = 12) -> str:
    return " ".join(WORDS[(i * 7 + j * (i % 5 + 1)) % len(WORDS)] for j in range(n)) + f" item{i}"


def docs(start: int, n: int, **extra) -> list[dict]:
    return [
        {"id": f"d{i:04d}", "title": f"T{i % 9}", "text": text(i), "metadata": {"g": i % 4, **extra}}
        for i in range(start, start + n)
    ]


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(77).normal(size=(8, dim))
    x = centres[rng.integers(0, 8, n)] + 0.5 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


class Ranking:
    """Scores in order, and the ids ranked clearly above the last score (ties may fall either way).

    Equal when the scores agree to 1e-4 (vectors may differ in the last bits
    with how the encoder batched them) and the clearly ranked ids are the same.
    """

    def __init__(self, col: Collection, query: str, mode: str, k: int = 20, **kw):
        hits = [(h.score, h.id) for h in col.search(query, k=k, mode=mode, **kw)]
        self.scores = [score for score, _ in hits]
        last = hits[-1][0] if hits else 0.0
        self.ids = sorted(i for score, i in hits if score > last + 1e-3)

    def __eq__(self, other) -> bool:
        return self.scores == pytest.approx(other.scores, abs=1e-4) and self.ids == other.ids

    def __repr__(self) -> str:
        return f"Ranking({self.scores}, {self.ids})"


ranking = Ranking


@pytest.fixture(scope="module")
def tiny_embedder(tiny_model_dir):
    """The tiny model in fp32 on torch, so that ``Ranking``'s 1e-4 holds: collections embedded in different
    batches then differ in the last bits only, where a bf16 backend that ``auto`` may pick differs by ~1e-4."""
    from retriever import Embedder

    return Embedder(tiny_model_dir, backend="torch-fp32")


@pytest.fixture
def layered(tmp_path, tiny_embedder):
    """Three commits, replacements and deletions: several segments with deletion files."""
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(factor=50, small_factor=50))
    col.add(docs(0, 40))
    col.add(docs(40, 40))
    col.upsert([{**d, "text": d["text"] + " replaced"} for d in docs(10, 15)])
    col.delete([f"d{i:04d}" for i in range(50, 60)])
    yield col
    col.close()


def fresh_copy(col: Collection, path, embedder) -> Collection:
    """The live documents of ``col`` written in one commit into a new collection."""
    fresh = Collection.create(path, embedder)
    fresh.add([col.get(doc_id) for doc_id in col.ids()])
    return fresh


def test_commits_write_segments_and_deletion_files(layered):
    state = layered.catalog.state()
    assert len(state.segments) == 3
    assert [ref.deletions > 0 for ref in state.segments] == [True, True, False]
    assert len(layered) == 70
    folders = sorted(p.name for p in (layered.root / SEGMENTS_DIR).iterdir())
    assert folders == [ref.name for ref in state.segments]


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_results_equal_a_fresh_single_segment_build(layered, tmp_path, tiny_embedder, mode):
    fresh = fresh_copy(layered, tmp_path / "fresh", tiny_embedder)
    assert len(fresh.catalog.state().segments) == 1
    for query in ("tea rivers", "snow peaks replaced", "coffee beans roast item42"):
        assert ranking(layered, query, mode) == ranking(fresh, query, mode)
        assert ranking(layered, query, mode, where={"g": 1}) == ranking(fresh, query, mode, where={"g": 1})


def test_bm25_scores_use_collection_wide_statistics(layered):
    """Per-segment BM25 equals one index built from the live documents alone (pinned against bm25s elsewhere)."""
    live = {doc_id: layered.get(doc_id) for doc_id in layered.ids()}
    reference = BM25Index.empty().updated([], [(i, layered.analyzer(f"{d.title}\n{d.text}")) for i, d in live.items()])
    query = "tea rivers replaced item33"
    expected = dict(reference.top(layered.analyzer(query), 100))
    got = {h.id: h.score for h in layered.search(query, k=100, mode="bm25")}
    assert set(got) == set(expected) and len(got) > 20
    np.testing.assert_allclose([got[i] for i in sorted(got)], [expected[i] for i in sorted(got)], rtol=1e-5)


def test_compact_merges_into_one_segment_and_drops_deleted_rows(tmp_path, tiny_embedder):
    no_merges = MergePolicy(factor=50, small_factor=50)  # four segments until compact
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=no_merges)
    for start in range(0, 400, 100):
        col.add(docs(start, 100))
    col.delete([f"d{i:04d}" for i in range(0, 400, 2)])
    before = {m: ranking(col, "tea snow item7", m) for m in ("dense", "bm25", "hybrid")}
    result = col.compact()
    assert result["segments_before"] == 4 and result["segments_after"] == 1
    assert len(col.catalog.state().segments) == 1
    assert col.reader.current().parts[0].n_live_docs == col.reader.current().parts[0].segment.n_docs == 200
    assert {m: ranking(col, "tea snow item7", m) for m in before} == before
    fresh = fresh_copy(col, tmp_path / "fresh", tiny_embedder)
    fresh.compact()  # vacuum its catalog too: both then hold exactly what is live
    assert col.info()["size_bytes"] <= 1.1 * fresh.info()["size_bytes"]


def test_compact_packs_segments_into_the_fewest_under_the_largest_segment_size(tmp_path, tiny_embedder):
    """A merge's memory grows with its chunks, so ``compact`` writes no segment above ``max_segment_chunks``:
    the segments are packed first fit, largest first; one kept alone is rewritten only for its deleted rows."""
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(factor=50, small_factor=50))
    for start, n in ((0, 100), (100, 100), (200, 100), (300, 60), (360, 30)):
        col.add(docs(start, n))
    assert [p.n_live_chunks for p in col.reader.current().parts] == [100, 100, 100, 60, 30]
    before = {m: ranking(col, "tea snow item7", m) for m in ("dense", "bm25", "hybrid")}
    result = col.compact(max_segment_chunks=200)
    assert (result["segments_before"], result["segments_after"]) == (5, 2)
    assert sorted(p.n_live_chunks for p in col.reader.current().parts) == [190, 200]  # 100+100 | 100+60+30
    assert {m: ranking(col, "tea snow item7", m) for m in before} == before
    names = [p.ref.name for p in col.reader.current().parts]
    col.compact(max_segment_chunks=200)  # each fills its group alone and holds no deleted row: kept as it is
    assert [p.ref.name for p in col.reader.current().parts] == names

    col.delete([f"d{i:04d}" for i in range(10)])  # from the first commits' segment, which now holds 190 live
    clean = [p.ref.name for p in col.reader.current().parts if p.n_live_docs == p.segment.n_docs]
    assert len(clean) == 1
    assert col.compact(max_segment_chunks=200)["segments_after"] == 2  # 190 + 190 would pass 200
    parts = col.reader.current().parts
    assert clean[0] in [p.ref.name for p in parts] and set(names).isdisjoint(
        set([p.ref.name for p in parts]) - set(clean)
    )
    assert all(p.n_live_docs == p.segment.n_docs for p in parts) and sum(p.n_live_chunks for p in parts) == 380
    assert col.compact()["segments_after"] == 1  # the default, a million chunks, holds them all
    with pytest.raises(BadInputError, match="max_segment_chunks"):
        col.compact(max_segment_chunks=0)


def test_compact_switches_index_codes_without_reembedding(tmp_path, tiny_embedder):
    """``compact(index_codes=)`` records the codes in the manifest and rebuilds the one segment with them;
    on data this small every row is a rescoring candidate, so rankings stay exact."""
    col = Collection.create(tmp_path / "col", tiny_embedder)
    col.add(docs(0, 90))
    before = {m: ranking(col, "tea snow item7", m) for m in ("dense", "hybrid")}
    flat = col.reader.current().parts[0].segment
    vectors = flat.index.index.reconstruct_n(0, flat.n_chunks)
    assert col.compact(index_codes="always")["segments_after"] == 1
    segment = col.reader.current().parts[0].segment
    assert segment.index_type == "ivf-rabitq" and (segment.folder / "vectors.npy").is_file()
    assert np.array_equal(segment.index.rows, vectors)  # the same vectors, now beside codes
    assert {m: ranking(col, "tea snow item7", m) for m in before} == before
    assert col.check().ok
    col.add(docs(90, 10))  # a new commit's segment is compressed too
    assert {p.segment.index_type for p in col.reader.current().parts} == {"ivf-rabitq"}
    compressed = ranking(col, "tea snow item7", "dense")
    col.close()
    with Collection.open(tmp_path / "col") as again:
        assert again.index_policy.codes == "always"
        again.compact(index_codes="float32")
        assert [p.segment.index_type for p in again.reader.current().parts] == ["flat"]
        assert ranking(again, "tea snow item7", "dense") == compressed
        with pytest.raises(BadInputError, match="index codes"):
            again.compact(index_codes="bits")


def test_tiered_merge_after_commits(tmp_path, tiny_embedder):
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(factor=3, floor_chunks=4))
    for start in range(0, 60, 6):
        col.add(docs(start, 6))
    sizes = [p.n_live_chunks for p in col.reader.current().parts]
    assert len(sizes) < 10, sizes  # ten commits did not leave ten segments
    assert sum(sizes) == col.catalog.counts()[1]
    assert len(col) == 60 and {h.id for h in col.search("tea", k=60, mode="bm25")} <= set(col.ids())
    on_disk = sorted(p.name for p in (col.root / SEGMENTS_DIR).iterdir())
    assert on_disk == [ref.name for ref in col.catalog.state().segments]


def test_small_segments_merge_at_the_small_fan_in(tmp_path, tiny_embedder):
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(small_factor=3))
    counts = []
    for start in range(0, 20, 5):
        col.add(docs(start, 5))
        counts.append(len(col.reader.current().parts))
    assert counts == [1, 2, 1, 2]  # the third small segment merged the three
    assert sorted(col.ids()) == sorted(d["id"] for d in docs(0, 20))
    col.close()


@pytest.mark.parametrize(
    "cap, size, commits, sizes",
    [
        (200, 20, 9, [20, 160]),  # a tier whose full merge may pass the cap (64 to 256 here): two merge once they fit
        (100, 40, 4, [40, 40, 80]),  # four of a tier too large together: the two smallest merge
    ],
)
def test_segments_near_the_merge_cap_merge_in_fewer_at_once(cap, size, commits, sizes, tmp_path, tiny_embedder):
    """Without it, the first left 20, 80 and 80 (four of 80 would pass the cap), the second four of 40."""
    policy = MergePolicy(factor=4, floor_chunks=1, max_commit_merge_chunks=cap)
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=policy)
    for start in range(0, commits * size, size):
        col.add(docs(start, size))
    assert sorted(p.n_live_chunks for p in col.reader.current().parts) == sizes
    assert sorted(col.ids()) == sorted(d["id"] for d in docs(0, commits * size))
    col.close()


@pytest.mark.parametrize("codes, kind", [("compressed", "ivf-rabitq"), ("float32", "ivf")])
def test_a_large_merged_segment_gets_ivf_and_filters_still_return_k(codes, kind, tmp_path, tiny_embedder):
    dim = tiny_embedder.dim
    policy = IndexPolicy(ann_min_rows=1500, codes=codes)
    col = Collection.create(tmp_path / "col", tiny_embedder, index_policy=policy)
    vectors = unit_rows(2400, dim, 1)
    for start in range(0, 2400, 800):
        col.add(docs(start, 800), vectors=vectors[start : start + 800])
    col.delete([f"d{i:04d}" for i in range(0, 2400, 3)])
    col.compact()
    (segment_info,) = [s["index"] for s in col.info()["segments"]]
    assert segment_info["type"] == kind and segment_info["recall"] >= 0.97
    described = col.reader.current().summary()
    assert described.startswith("1 segment: IVF") and ("1-bit codes" in described) == (codes == "compressed")
    queries = unit_rows(30, dim, 2)
    overlap = []
    for q in queries:
        approx = [h.id for h in col.search(vector=q, k=10)]
        exact = [h.id for h in col.search(vector=q, k=10, exact=True)]
        assert len(approx) == len(exact) == 10
        overlap.append(len(set(approx) & set(exact)) / 10)
        filtered = col.search(vector=q, k=10, where={"g": 2})
        assert len(filtered) == 10 and all(h.metadata["g"] == 2 for h in filtered)
    assert np.mean(overlap) >= 0.95
    assert all(int(h.id[1:]) % 3 for h in col.search(vector=queries[0], k=200))  # deleted rows never come back


def test_a_commit_below_the_ivf_size_holds_codes_in_few_lists_searched_as_exact_search_finds(tmp_path, tiny_embedder):
    dim = tiny_embedder.dim
    policy = IndexPolicy(ann_min_rows=5000, codes_min_rows=500)
    col = Collection.create(tmp_path / "col", tiny_embedder, index_policy=policy)
    vectors = unit_rows(1200, dim, 5)
    col.add(docs(0, 1200), vectors=vectors)
    col.delete([f"d{i:04d}" for i in range(0, 1200, 4)])
    col.close()
    col = Collection.open(tmp_path / "col")  # read back: codes and rescoring rows
    (segment_info,) = [s["index"] for s in col.info()["segments"]]
    assert segment_info["type"] == "ivf-rabitq" and segment_info["nlist"] == 1200 // 256
    assert segment_info["recall"] >= 0.97
    assert col.reader.current().summary().startswith(f"1 segment: IVF4 1-bit codes nprobe {segment_info['nprobe']}")
    overlap = []
    for q in unit_rows(30, dim, 6):
        approx = [h.id for h in col.search(vector=q, k=10)]
        exact = [h.id for h in col.search(vector=q, k=10, exact=True)]
        assert len(approx) == 10 and all(int(i[1:]) % 4 for i in approx)  # deleted rows never come back
        overlap.append(len(set(approx) & set(exact)) / 10)
        filtered = col.search(vector=q, k=10, where={"g": 2})
        assert len(filtered) == 10 and all(h.metadata["g"] == 2 for h in filtered)
    assert np.mean(overlap) >= 0.95
    col.close()


def test_bring_your_own_vectors(tmp_path, tiny_embedder, tiny_model_dir):
    dim = tiny_embedder.dim
    path = tmp_path / "col"
    Collection.create(path, tiny_embedder).close()
    col = Collection.open(path)  # no model given: vectors alone never load one
    vectors = unit_rows(50, dim, 3) * 3.0  # not unit length: normalised on the way in
    report = col.add(docs(0, 50), vectors=vectors)
    assert report.chunks == 50 and len(col) == 50
    assert col.chunk_spans("d0007") == [(0, len(text(7)))]
    hits = col.search(vector=vectors[7], k=3)
    assert hits[0].id == "d0007" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].text == text(7)
    assert col.models.loaded == []
    assert col.search(vector=list(map(float, vectors[9])), k=1, where={"g": 1})[0].id == "d0009"
    with pytest.raises(BadInputError, match="shape"):
        col.add(docs(100, 2), vectors=np.ones((2, dim + 1)))
    with pytest.raises(BadInputError, match="shape"):
        col.add(docs(100, 2), vectors=np.ones((3, dim)))
    with pytest.raises(BadInputError, match="NaN"):
        col.add(docs(100, 2), vectors=np.full((2, dim), np.nan))
    with pytest.raises(BadInputError, match="zero"):
        col.upsert(docs(100, 2), vectors=np.zeros((2, dim)))
    with pytest.raises(BadInputError, match="shape"):
        col.search(vector=np.ones(dim + 2))
    with pytest.raises(BadInputError, match="bm25"):
        col.search(vector=vectors[0], mode="bm25")
    assert len(col) == 50
    hybrid = col.search("tea item7", vector=vectors[7], k=3)  # text and vector: hybrid
    assert hybrid[0].id == "d0007"


def test_query_path_asks_the_catalog_once(layered):
    statements = []

    def trace(dbapi_connection, _record):  # SQLite's own log: statements sent past SQLAlchemy count too
        dbapi_connection.set_trace_callback(
            lambda sql: statements.append(sql) if sql.lstrip().upper().startswith("SELECT") else None
        )

    layered.catalog.engine.dispose()
    event.listen(layered.catalog.engine, "connect", trace)
    layered.search("tea", k=5)  # views loaded
    try:
        for mode in ("dense", "bm25", "hybrid"):
            statements.clear()
            assert layered.search("tea rivers", k=5, mode=mode)
            assert len(statements) == 1, statements  # the hits' display fields
            statements.clear()
            assert layered.search("tea rivers", k=5, mode=mode, where={"g": 2})
            assert len(statements) == 2, statements  # and the filter's keys
    finally:
        event.remove(layered.catalog.engine, "connect", trace)


def test_metadata_only_change_is_seen_at_once_by_another_reader(layered, tiny_embedder):
    reader = Collection.open(layered.root, tiny_embedder)
    assert {h.id for h in reader.search("tea", k=100, where={"g": 9})} == set()
    doc = layered.get("d0003")
    layered.upsert([{"id": doc.id, "title": doc.title, "text": doc.text, "metadata": {"g": 9}}])
    hits = reader.search("tea", k=100, where={"g": 9})
    assert [h.id for h in hits] == ["d0003"] and hits[0].metadata == {"g": 9}
    reader.close()


def test_embedding_happens_outside_the_write_lock(tmp_path, tiny_embedder, monkeypatch):
    col = Collection.create(tmp_path / "col", tiny_embedder)
    held = []
    embed = tiny_embedder.embed_token_ids

    def watching(token_ids, **kwargs):
        held.append(col.writer.is_locked)
        return embed(token_ids, **kwargs)

    monkeypatch.setattr(tiny_embedder, "embed_token_ids", watching)
    col.add(docs(0, 5))
    col.upsert([{**d, "text": d["text"] + " again"} for d in docs(0, 3)])
    assert held == [False, False]


def test_unreferenced_files_are_removed_by_the_next_writer(layered):
    stray = layered.root / SEGMENTS_DIR / "s999999"
    stray.mkdir()
    (stray / "vectors.faiss").write_bytes(b"half")
    first = layered.catalog.state().segments[0]
    (layered.root / SEGMENTS_DIR / first.name / "deleted.999.npy").write_bytes(b"x")
    layered.add(docs(500, 2))
    assert not stray.exists()
    assert not (layered.root / SEGMENTS_DIR / first.name / "deleted.999.npy").exists()


def test_delete_refuses_a_bare_string(layered):
    with pytest.raises(BadInputError, match="list"):
        layered.delete("d0001")
    assert "d0001" in layered


def test_prepared_segments_commit_together_like_an_upsert(tmp_path, tiny_embedder):
    col = Collection.create(tmp_path / "col", tiny_embedder)
    col.add(docs(0, 10))
    first = col.prepare(docs(5, 10))  # 5..9 are stored as they are; 10..14 are new
    second = col.prepare([{**d, "text": d["text"] + " v2"} for d in docs(12, 4)])  # 12..15, later wins
    assert len(col) == 10 and "d0014" not in {h.id for h in col.search("tea", k=50, mode="bm25")}
    report = col.commit_prepared([first, second])
    assert sorted(report.added) == [f"d{i:04d}" for i in range(10, 16)]
    assert sorted(report.unchanged) == [f"d{i:04d}" for i in range(5, 10)]
    assert report.updated == [] and report.chunks == 6
    assert not first.exists() and not second.exists()
    assert col.get("d0013").text.endswith(" v2") and not col.get("d0011").text.endswith(" v2")
    expected = Collection.create(tmp_path / "expected", tiny_embedder)
    expected.add(docs(0, 10))
    expected.upsert(docs(10, 2) + [{**d, "text": d["text"] + " v2"} for d in docs(12, 4)])
    for mode in ("dense", "bm25", "hybrid"):
        assert ranking(col, "tea item13 v2", mode) == ranking(expected, "tea item13 v2", mode)
    with pytest.raises(BadInputError, match="gone"):
        col.commit_prepared([first])
    with pytest.raises(BadInputError, match="not a staged segment"):
        col.commit_prepared([tmp_path])


def test_a_staged_segment_of_a_dead_process_is_removed_by_the_next_writer(tmp_path, tiny_embedder):
    import socket
    import subprocess
    import sys

    col = Collection.create(tmp_path / "col", tiny_embedder)
    staged = col.prepare(docs(0, 3))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = staged.with_name(f".staged-{socket.gethostname()}-{dead.stdout.strip()}-0123abcd")
    staged.rename(orphan)
    alive = col.prepare(docs(3, 3))  # this process lives: its staged segment stays
    col.add(docs(10, 1))
    assert not orphan.exists() and alive.exists()
    assert col.commit_prepared([alive]).added == ["d0003", "d0004", "d0005"]


# -- searches ranked as a batch (servers) ---------------------------------------------
QUERIES = [text(i, n) for i, n in ((3, 4), (17, 12), (44, 2), (61, 8), (75, 6), (12, 10))]


def test_many_query_vectors_rank_as_each_alone(layered):
    """One index search per segment for several queries gives each query's own ranking, widening included."""
    view = layered.reader.current()
    vectors = layered.embed(QUERIES)
    for k in (1, 7, 500):  # 500: more than there are chunks, so every query widens to all of them
        together = dense_rankings(view, vectors, k, None, False, layered.index_policy)
        alone = [
            dense_rankings(view, vectors[i : i + 1], k, None, False, layered.index_policy)[0]
            for i in range(len(QUERIES))
        ]
        assert [ranked for ranked, _ in together] == [ranked for ranked, _ in alone]
        assert [where for _, where in together] == [where for _, where in alone]
        assert len({tuple(key for key, _ in ranked) for ranked, _ in together}) > 1  # the queries differ


def test_one_document_of_many_near_chunks_does_not_crowd_out_the_rest(tmp_path, tiny_embedder):
    """Most documents are one chunk long, so a search fetches few chunks per wanted document; where one
    long document holds every chunk near the query, the search widens until it has ``k`` documents."""
    col = Collection.create(tmp_path / "col", tiny_embedder)
    long_text = " ".join(text(3, 12) for _ in range(120))
    col.add([{"id": "long", "text": long_text}] + [{"id": f"s{i:03d}", "text": text(i, 6)} for i in range(60)])
    n_chunks = col.info()["chunks"]
    assert n_chunks - 60 >= 30  # the long document alone has more chunks than a first fetch of 5 documents
    wide = [h.id for h in col.search(text(3, 12), k=60, mode="dense")]
    narrow = [h.id for h in col.search(text(3, 12), k=5, mode="dense")]
    assert narrow[0] == "long" and len(narrow) == len(set(narrow)) == 5
    assert narrow == wide[:5]


def test_a_search_batch_keeps_views_and_depths_apart(layered):
    old_view = layered.reader.current()
    nearest = layered.search(QUERIES[0], k=1, mode="dense")[0].id
    layered.delete([nearest])  # the first query's best hit: its top 5 must change
    new_view = layered.reader.current()
    assert new_view is not old_view
    vectors = layered.embed(QUERIES[:3])
    items = [
        (old_view, vectors[0:1], 5, 5),
        (new_view, vectors[0:1], 5, 5),
        (new_view, vectors[1:2], 100, 10),
        (old_view, vectors[2:3], 100, 100),
    ]
    got = layered.searcher.rank_batch(items)
    assert got == [
        dense_rankings(view, vector, depth, None, False, layered.index_policy, shown)[0]
        for view, vector, depth, shown in items
    ]
    assert got[0] != got[1]  # the deletion shows in the newer view only


def test_batched_searches_from_many_threads_get_the_hits_each_gets_alone(layered):
    import threading

    cases = [(query, mode, k) for query in QUERIES for mode, k in (("dense", 5), ("hybrid", 10), ("bm25", 3))]
    expected = [[(h.id, h.score, h.text) for h in layered.search(q, k=k, mode=m)] for q, m, k in cases]
    layered.batch_searches(max_wait_s=0.05)
    got: list = [None] * len(cases)
    start = threading.Barrier(len(cases))

    def search(i: int) -> None:
        query, mode, k = cases[i]
        start.wait()
        got[i] = [(h.id, h.score, h.text) for h in layered.search(query, k=k, mode=mode)]

    threads = [threading.Thread(target=search, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for mine, alone in zip(got, expected):
        assert [(i, t) for i, _, t in mine] == [(i, t) for i, _, t in alone]
        assert [s for _, s, _ in mine] == pytest.approx([s for _, s, _ in alone], abs=1e-5)
    batches = layered.searcher.batcher.batches
    assert 0 < batches <= sum(mode != "bm25" for _, mode, _ in cases)
    filtered = layered.search(QUERIES[0], k=5, mode="dense", where={"g": 1})  # a filter takes the search's own path
    assert filtered and all(h.metadata["g"] == 1 for h in filtered)
    assert layered.searcher.batcher.batches == batches


@pytest.mark.parametrize("codes_min_rows, small", [(16_384, "flat"), (500, "ivf-rabitq")])
def test_segments_below_the_ivf_size_merge_once_together_they_would_get_full_lists(
    codes_min_rows, small, tmp_path, tiny_embedder
):
    """Commits too large for tier 0 but below the IVF size would otherwise sit as exact segments or IVFs of
    few lists until a tier filled (ten of them); two of them reaching the IVF size merge into an IVF segment
    of full lists at the next commit."""
    dim = tiny_embedder.dim
    policy = IndexPolicy(ann_min_rows=1500, codes_min_rows=codes_min_rows)
    col = Collection.create(
        tmp_path / "col", tiny_embedder, index_policy=policy, merge_policy=MergePolicy(floor_chunks=100)
    )
    vectors = unit_rows(2400, dim, 4)
    kinds = []
    for start in range(0, 2400, 800):
        col.add(docs(start, 800), vectors=vectors[start : start + 800])
        kinds.append(sorted((p.segment.n_chunks, p.segment.index_type) for p in col.reader.current().parts))
    assert kinds == [[(800, small)], [(1600, "ivf-rabitq")], [(800, small), (1600, "ivf-rabitq")]]
    lists = sorted(segment["index"].get("nlist", 0) for segment in col.info()["segments"])
    assert lists == [0 if small == "flat" else 800 // 256, 64]  # the merged segment's lists are full: 64 at least
    assert len(col) == 2400
    col.close()
