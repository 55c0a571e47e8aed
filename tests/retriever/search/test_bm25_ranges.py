"""BM25 that skips (MaxScore over per-segment term bounds): the exhaustive answer, bit for bit, from fewer postings."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.search.bm25 import bm25_top
from retriever.search.bm25_maxscore import bm25_top_maxscore
from retriever.storage.postings import Postings
from retriever.storage.range_bounds import RangeBounds

VOCABULARY = [f"w{i}" for i in range(3000)]


def zipf_segment(n_docs: int, seed: int, duplicates: int = 0) -> tuple[Postings, np.ndarray]:
    """``(postings, doc_lengths)`` of ``n_docs`` documents of Zipf-distributed words, the last ``duplicates``
    repeating earlier documents word for word (so that scores tie)."""
    rng = np.random.default_rng(seed)
    docs = [rng.zipf(1.3, size=rng.integers(5, 120)) % len(VOCABULARY) for _ in range(n_docs - duplicates)]
    docs += [docs[i] for i in rng.integers(0, len(docs), duplicates)]
    term_ids = np.concatenate(docs).astype(np.int64)
    rows = np.repeat(np.arange(n_docs, dtype=np.int64), [len(d) for d in docs])
    postings = Postings.from_pairs(VOCABULARY, term_ids, rows, None)
    return postings, np.asarray([len(d) for d in docs], dtype=np.float32)


def random_parts(rng, sizes, deleted_share: float, allowed_share: float | None):
    parts = []
    for i, n in enumerate(sizes):
        postings, lengths = zipf_segment(n, seed=int(rng.integers(1 << 30)), duplicates=n // 10)
        live = None if deleted_share == 0 else rng.random(n) >= deleted_share
        allowed = None if allowed_share is None else rng.random(n) < allowed_share
        parts.append((postings, lengths, live, allowed))
    n_live = sum(len(p[1]) if p[2] is None else int(p[2].sum()) for p in parts)
    length = sum(float(p[1].sum() if p[2] is None else p[1][p[2]].sum()) for p in parts)
    return parts, (n_live, length)


@pytest.mark.parametrize("seed", range(12))
def test_skipping_returns_exhaustive_bm25_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.integers(1, 3000, size=rng.integers(1, 4))]
    parts, totals = random_parts(
        rng, sizes, deleted_share=[0, 0.05, 0.6][seed % 3], allowed_share=[None, 0.5, 0.01, None][seed % 4]
    )
    bounds = [
        RangeBounds.build(p, lengths, rows_per_range=int(rng.choice([16, 64, 1024]))) for p, lengths, _, _ in parts
    ]
    for _ in range(15):
        query = [VOCABULARY[int(t)] for t in rng.zipf(1.2, size=rng.integers(1, 30)) % len(VOCABULARY)]
        query += ["not-a-term"] if rng.random() < 0.2 else []
        for k in (1, 10, 100):
            expected = bm25_top(parts, query, k, 0.9, 0.4, totals=totals)
            assert bm25_top_maxscore(parts, bounds, query, k, 0.9, 0.4, totals=totals) == expected


def test_ties_break_by_part_then_row_in_both():
    postings, lengths = zipf_segment(50, seed=3)
    twice = [(postings, lengths, None, None), (postings, lengths, None, None)]  # every score tied across parts
    bounds = [RangeBounds.build(postings, lengths, rows_per_range=8)] * 2
    query = [postings.terms[int(np.argmax(np.diff(postings.indptr)))]]  # the commonest word
    totals = (100, float(2 * lengths.sum()))
    for k in (1, 7, 60):
        top = bm25_top_maxscore(twice, bounds, query, k, 0.9, 0.4, totals=totals)
        assert top == bm25_top(twice, query, k, 0.9, 0.4, totals=totals)
    assert [part for part, _, _ in top[:2]] == [0, 1]  # a tied pair: the first segment's row first


def test_documents_holding_only_weak_terms_are_never_scored():
    postings, lengths = zipf_segment(20_000, seed=5)
    part = [(postings, lengths, None, None)]
    bounds = [RangeBounds.build(postings, lengths, rows_per_range=256)]
    df = np.diff(postings.indptr)
    common = [int(t) for t in np.argsort(-df, kind="stable")[:3]]
    rare = [int(t) for t in np.argsort(df, kind="stable") if 5 <= df[t] <= 20][:2]
    query = [postings.terms[t] for t in (*common, *rare)]  # three common words, two rare ones
    totals = (20_000, float(lengths.sum()))
    stats: dict = {}
    top = bm25_top_maxscore(part, bounds, query, 3, 0.9, 0.4, totals=totals, stats=stats)
    assert top == bm25_top(part, query, 3, 0.9, 0.4, totals=totals)
    assert stats["scored"] <= df[rare].sum() < df[common].sum() / 20  # only documents with a rare word are scored


def test_filters_and_deletions_skip_as_they_rank():
    """A filter that leaves fewer than ``k`` documents, and one that every top document fails."""
    rng = np.random.default_rng(4)
    parts, totals = random_parts(rng, [2000, 1500], deleted_share=0.3, allowed_share=0.002)
    bounds = [RangeBounds.build(p, lengths, rows_per_range=64) for p, lengths, _, _ in parts]
    query = [VOCABULARY[t] for t in (0, 1, 5, 40, 700)]
    top = bm25_top_maxscore(parts, bounds, query, 50, 0.9, 0.4, totals=totals)
    assert top == bm25_top(parts, query, 50, 0.9, 0.4, totals=totals)
    allowed_live = sum(int((allowed & live).sum()) for _, _, live, allowed in parts)
    assert 0 < len(top) <= allowed_live < 50


def test_bounds_cover_every_posting_once():
    postings, lengths = zipf_segment(1000, seed=8)
    bounds = RangeBounds.build(postings, lengths, rows_per_range=32)
    assert bounds.starts[0] == 0 and bounds.starts[-1] == len(postings.rows) and np.all(np.diff(bounds.starts) > 0)
    for t in range(len(VOCABULARY)):
        rows, tf = postings.of(VOCABULARY[t])
        for e in range(bounds.indptr[t], bounds.indptr[t + 1]):
            a, z = bounds.starts[e], bounds.starts[e + 1]
            assert np.all(postings.rows[a:z] // 32 == bounds.ranges[e])
            assert (
                postings.tf[a:z].max() == bounds.max_tf[e] and lengths[postings.rows[a:z]].min() == bounds.min_length[e]
            )


def test_a_collection_answers_the_same_whichever_path_it_takes(tmp_path, tiny_embedder, monkeypatch):
    """Through ``Collection.search``: segments, deletions and a filter, skipping forced on and off."""
    from retriever import Collection
    from retriever.search import ranking
    from retriever.storage.merging import MergePolicy

    rng = np.random.default_rng(11)
    words = [f"word{i}" for i in range(300)]
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(factor=50, small_factor=50))
    for start in range(0, 600, 200):
        col.add(
            [
                {
                    "id": f"d{i}",
                    "text": " ".join(words[int(w) % 300] for w in rng.zipf(1.4, size=40)),
                    "metadata": {"g": i % 3},
                }
                for i in range(start, start + 200)
            ]
        )
    col.delete([f"d{i}" for i in range(0, 600, 7)])
    assert len(col.reader.current().parts) == 3
    for query in ("word1 word7 word150", "word2", "word299 word3 word3"):
        for where in (None, {"g": 1}):
            answers = []
            for threshold in (0, 1 << 60):  # every query skips, then none does
                monkeypatch.setattr(ranking, "SKIP_MIN_POSTINGS", threshold)
                answers.append([(h.id, h.score) for h in col.search(query, k=20, mode="bm25", where=where)])
            assert answers[0] == answers[1] and answers[0]


def test_segments_store_their_bounds_and_older_segments_compute_them(tmp_path, tiny_embedder):
    import json

    from retriever import Collection
    from retriever.storage.segment import Segment

    col = Collection.create(tmp_path / "col", tiny_embedder)
    col.add([{"id": f"d{i}", "text": f"rivers flow into the sea {i} " * (i % 5 + 1)} for i in range(50)])
    segment = col.reader.current().parts[0].segment
    stored, built = segment.range_bounds, RangeBounds.build(segment.postings, segment.doc_lengths)
    assert segment._stored_bounds is not None
    for name in ("indptr", "ranges", "starts", "max_tf", "min_length"):
        assert np.array_equal(getattr(stored, name), getattr(built, name)), name
    col.close()
    meta_path = segment.folder / "segment.json"  # as a segment written before the bounds were stored
    meta = json.loads(meta_path.read_text())
    del meta["bm25_ranges"]
    meta_path.write_text(json.dumps(meta))
    older = Segment(segment.folder)
    assert older._stored_bounds is None and np.array_equal(older.range_bounds.max_tf, built.max_tf)


def test_threads_searching_at_once_each_get_the_exhaustive_answer():
    """Each thread keeps its own partial sums (nogil kernels run side by side)."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(21)
    parts, totals = random_parts(rng, [4000, 2500], deleted_share=0.05, allowed_share=None)
    bounds = [RangeBounds.build(p, lengths, rows_per_range=128) for p, lengths, _, _ in parts]
    queries = [[VOCABULARY[int(t)] for t in rng.zipf(1.2, size=12) % len(VOCABULARY)] for _ in range(40)]
    expected = [bm25_top(parts, q, 20, 0.9, 0.4, totals=totals) for q in queries]
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda q: bm25_top_maxscore(parts, bounds, q, 20, 0.9, 0.4, totals=totals), queries * 3))
    assert found == expected * 3
