"""A segment's vector index: exact when small, IVF tuned to a recall target when large, compressed codes
rescored exactly from float32 rows."""

from __future__ import annotations

import dataclasses

import faiss
import numpy as np
import pytest

from retriever.errors import BadInputError, CorruptCollectionError
from retriever.search import int8_rows, ivf_tuning, vector_index
from retriever.search.vector_index import IndexPolicy
from retriever.storage.segment_format import INDEX_FILE, ROWS_FILE
from retriever.storage.vector_files import FAST_SCAN_IMPLEMENTATION, read_vectors, write_vectors


def clustered(n: int, dim: int = 32, centers: int = 40, seed: int = 0) -> np.ndarray:
    """Unit vectors scattered around fixed random centres, as embeddings of topical text are.

    ``seed`` draws the points; the centres are the same for every seed, so
    vectors drawn with another seed serve as queries near the data.
    """
    middle = np.random.default_rng(12345).normal(size=(centers, dim))
    rng = np.random.default_rng(seed)
    x = middle[rng.integers(0, centers, n)] + 0.6 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def exact_top(vectors, queries, k, rows=None):
    scores = queries @ vectors.T
    if rows is not None:
        scores[:, ~rows] = -np.inf
    return np.argsort(-scores, axis=1)[:, :k]


FLOAT_IVF = IndexPolicy(ann_min_rows=1000, codes="float32")


def test_small_segments_stay_exact_and_large_ones_get_ivf():
    small = vector_index.build(clustered(200), FLOAT_IVF)
    assert small.info == {"type": "flat"} and isinstance(small.index, faiss.IndexFlatIP) and small.rows is None
    large = vector_index.build(clustered(4000), FLOAT_IVF)
    info = large.info
    assert info["type"] == "ivf" and isinstance(large.index, faiss.IndexIVFFlat) and large.rows is None
    assert info["nlist"] == large.index.nlist and 1 <= info["nprobe"] <= large.index.nlist
    assert info["recall"] >= 0.97  # tuned with a margin over the 0.95 target


def test_ivf_meets_its_recall_target_on_queries_it_was_not_tuned_on(tmp_path):
    vectors = clustered(6000, seed=1)
    built = vector_index.build(vectors, FLOAT_IVF)
    faiss.write_index(built.index, str(tmp_path / INDEX_FILE))
    loaded = read_vectors(tmp_path, built.info)  # memory-mapped, nprobe restored
    assert loaded.index.nprobe == built.info["nprobe"]
    queries = clustered(100, seed=2)
    _, found = vector_index.search(loaded, queries, 10, None, len(vectors), IndexPolicy())
    truth = exact_top(vectors, queries, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth)])
    assert recall >= 0.95


@pytest.mark.parametrize("share", [0.001, 0.01, 0.3])
def test_filtered_ivf_search_returns_k_rows_that_pass_the_filter(share):
    vectors = clustered(5000, seed=3)
    index = vector_index.build(vectors, FLOAT_IVF)
    rng = np.random.default_rng(4)
    allowed = rng.random(len(vectors)) < share
    allowed[:12] = True
    query = clustered(1, seed=5)
    for policy in (IndexPolicy(exact_max_rows=0), IndexPolicy()):  # IVF with a selector, then exact gathering
        scores, rows = vector_index.search(index, query, 10, allowed, int(allowed.sum()), policy)
        assert (rows[0] >= 0).sum() == 10
        assert allowed[rows[0]].all()
        assert np.all(np.diff(scores[0]) <= 1e-6)
    # gathering is exact
    _, rows = vector_index.search(index, query, 10, allowed, int(allowed.sum()), IndexPolicy())
    assert list(rows[0]) == list(exact_top(vectors, query, 10, allowed)[0])


def test_flat_search_with_a_mask_is_exact():
    vectors = clustered(300)
    index = vector_index.build(vectors, IndexPolicy())
    allowed = np.zeros(300, dtype=bool)
    allowed[::7] = True
    query = clustered(1, seed=9)
    _, rows = vector_index.search(index, query, 5, allowed, int(allowed.sum()), IndexPolicy())
    assert list(rows[0]) == list(exact_top(vectors, query, 5, allowed)[0])
    assert np.allclose(vector_index.reconstruct(index, np.array([3, 7])), vectors[[3, 7]])


def test_missing_and_damaged_files(tmp_path):
    built = vector_index.build(clustered(10), IndexPolicy())
    path = tmp_path / "vectors.faiss"
    with pytest.raises(FileNotFoundError):
        read_vectors(tmp_path, built.info)
    faiss.write_index(built.index, str(path))
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(CorruptCollectionError, match="cannot read vector index"):
        read_vectors(tmp_path, built.info)


def test_a_file_removed_between_check_and_read_is_reported_missing_not_corrupt(tmp_path, monkeypatch):
    """A merge can remove a segment just after a reader saw it exist."""
    built = vector_index.build(clustered(10), IndexPolicy())
    path = tmp_path / "vectors.faiss"
    faiss.write_index(built.index, str(path))
    read_index = vector_index.faiss.read_index

    def read_after_cleanup(name, *args):
        path.unlink()  # the writer wins the race
        return read_index(name, *args)

    monkeypatch.setattr(vector_index.faiss, "read_index", read_after_cleanup)
    with pytest.raises(FileNotFoundError):
        read_vectors(tmp_path, built.info)


# -- compressed codes, rescored -------------------------------------------------
COMPRESSED = IndexPolicy(ann_min_rows=1000, codes="compressed")
SMALL_CODES = IndexPolicy(ann_min_rows=20_000, codes_min_rows=1000)  # codes in few lists from 1,000 to 19,999


def _written(built, folder):
    write_vectors(built, folder, lambda path, fill: fill(path))
    return read_vectors(folder, built.info)


def test_compressed_codes_are_chosen_by_size_or_always():
    assert vector_index.build(clustered(500), COMPRESSED).info == {"type": "flat"}
    large = vector_index.build(clustered(4000), COMPRESSED)
    assert large.info["type"] == "ivf-rabitq" and isinstance(large.index, faiss.IndexIVFRaBitQFastScan)
    assert large.rows is not None and large.int8 is not None
    assert large.files == ("vectors.faiss", "vectors.npy", "vectors.int8.npy", "vectors.scale.npy")
    small = vector_index.build(clustered(500), IndexPolicy(codes="always"))
    assert small.info["type"] == "ivf-rabitq" and small.index.nlist == 1
    with pytest.raises(BadInputError, match="index codes"):
        IndexPolicy(codes="int3")


@pytest.mark.parametrize("n", [300, 2000])
def test_compressed_then_rescored_equals_exact_when_every_row_is_a_candidate(n, tmp_path):
    """With candidates to spare (every row of a small segment), rescoring gives exact search, scores included."""
    vectors = clustered(n, seed=6)
    built = _written(vector_index.build(vectors, IndexPolicy(codes="always", rescore=n)), tmp_path)
    built.index.nprobe = built.index.nlist
    queries = clustered(20, seed=7)
    scores, rows = vector_index.search(built, queries, 10, None, n, IndexPolicy(codes="always", rescore=n))
    truth = exact_top(vectors, queries, 10)
    assert np.array_equal(rows, truth)
    assert np.allclose(scores, np.take_along_axis(queries @ vectors.T, truth, axis=1), atol=1e-5)


def test_compressed_codes_meet_the_recall_target_with_a_fraction_of_the_bytes(tmp_path):
    vectors = clustered(8000, dim=64, seed=1)
    built = _written(vector_index.build(vectors, COMPRESSED), tmp_path)
    assert built.info["recall"] >= 0.97
    queries = clustered(100, dim=64, seed=2)
    scores, found = vector_index.search(built, queries, 10, None, len(vectors), COMPRESSED)
    truth = exact_top(vectors, queries, 10)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth)]) >= 0.95
    assert np.allclose(scores, np.take_along_axis(queries @ vectors.T, found, axis=1), atol=1e-5)  # exact scores
    codes, rows = (tmp_path / "vectors.faiss").stat().st_size, (tmp_path / "vectors.npy").stat().st_size
    assert codes < rows / 4  # 1 bit a dimension plus list overhead, against 32 bits


@pytest.mark.parametrize("share", [0.002, 0.05, 0.5])
@pytest.mark.parametrize(
    "n, built_with, searched_with",
    [
        (5000, COMPRESSED, (IndexPolicy(codes="compressed", exact_max_rows=0), COMPRESSED)),  # IVF: selector, gathering
        (3000, SMALL_CODES, (dataclasses.replace(SMALL_CODES, exact_max_rows=0), SMALL_CODES)),  # codes in few lists
    ],
)
def test_filtered_compressed_search_returns_k_rows_that_pass_the_filter(share, n, built_with, searched_with, tmp_path):
    vectors = clustered(n, seed=3)
    built = _written(vector_index.build(vectors, built_with), tmp_path)
    allowed = np.random.default_rng(4).random(len(vectors)) < share
    allowed[:12] = True
    query = clustered(1, seed=5)
    for policy in searched_with:
        scores, rows = vector_index.search(built, query, 10, allowed, int(allowed.sum()), policy)
        assert (rows[0] >= 0).sum() == 10 and allowed[rows[0]].all()
        assert np.all(np.diff(scores[0]) <= 1e-6)
    assert np.allclose(vector_index.reconstruct(built, np.array([3, 7])), vectors[[3, 7]])


def test_damaged_rescoring_rows_are_reported(tmp_path):
    built = vector_index.build(clustered(3000), COMPRESSED)
    faiss.write_index(built.index, str(tmp_path / INDEX_FILE))
    with pytest.raises(FileNotFoundError):
        read_vectors(tmp_path, built.info)
    np.save(tmp_path / ROWS_FILE, built.rows[:-1])
    with pytest.raises(CorruptCollectionError, match="not float32"):
        read_vectors(tmp_path, built.info)


# -- codes in an IVF of few lists, rescored (segments too small for full lists) ----------


def test_segments_too_small_for_full_lists_get_codes_in_few_lists_only_with_compressed_codes():
    sizes = {500: "flat", 1000: "ivf-rabitq", 19_999: "ivf-rabitq", 20_000: "ivf-rabitq"}
    assert {n: vector_index.index_type_for(n, SMALL_CODES) for n in sizes} == sizes
    floats = IndexPolicy(ann_min_rows=6000, codes_min_rows=1000, codes="float32")
    assert [vector_index.index_type_for(n, floats) for n in (1000, 6000)] == ["flat", "ivf"]
    always = IndexPolicy(ann_min_rows=6000, codes_min_rows=1000, codes="always")
    assert vector_index.index_type_for(500, always) == "ivf-rabitq"
    assert vector_index.index_type_for(20_000, IndexPolicy()) == "ivf-rabitq"  # a commit of 20,000 chunks
    assert vector_index.index_type_for(16_383, IndexPolicy()) == "flat"


def test_codes_in_few_lists_meet_the_recall_target_with_exact_scores(tmp_path):
    vectors = clustered(4000, dim=64, seed=1)
    built = _written(vector_index.build(vectors, SMALL_CODES), tmp_path)
    assert isinstance(built.index, faiss.IndexIVFRaBitQFastScan) and built.rows is not None
    assert built.info["type"] == "ivf-rabitq" and built.index.nlist == 4000 // 256 and built.info["recall"] >= 0.97
    assert built.info["rescore"] in [SMALL_CODES.rescore * f for f in ivf_tuning.RESCORE_FACTORS]
    queries = clustered(100, dim=64, seed=2)
    scores, found = vector_index.search(built, queries, 10, None, len(vectors), SMALL_CODES)
    truth = exact_top(vectors, queries, 10)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth)]) >= 0.95
    assert np.allclose(scores, np.take_along_axis(queries @ vectors.T, found, axis=1), atol=1e-5)
    codes, rows = (tmp_path / "vectors.faiss").stat().st_size, (tmp_path / "vectors.npy").stat().st_size
    assert codes < rows / 4


def test_compressed_codes_are_the_default_for_large_segments():
    assert IndexPolicy().codes == "compressed"
    built = vector_index.build(clustered(4000), IndexPolicy(ann_min_rows=1000))
    assert built.info["type"] == "ivf-rabitq" and built.info["rescore"] >= IndexPolicy().rescore


@pytest.mark.parametrize("ratio", [0.6, 0.78, 0.9])
def test_probes_sit_off_the_rows_as_far_as_asked(ratio):
    vectors = clustered(5000, dim=64, seed=1)
    probes = ivf_tuning.probe_queries(vectors, np.random.default_rng(0), ratio)
    assert probes.shape == (ivf_tuning.PROBES, 64) and np.allclose(np.linalg.norm(probes, axis=1), 1, atol=1e-5)
    best = (probes @ vectors.T).max(axis=1)
    nearest = np.sort(vectors[:1000] @ vectors.T, axis=1)[:, -2]  # each row's nearest other row
    assert abs(np.median(best) / np.median(nearest) - ratio) < 0.02
    assert best.max() < 0.9999  # never a stored row itself


def test_a_raised_rescoring_factor_is_recorded_and_searched_with(tmp_path):
    """Where 1-bit codes rank true neighbours too low at a cheap nprobe, the build passes more candidates
    to rescoring, and a reader uses the factor the build recorded."""
    vectors = clustered(8000, dim=64, seed=1)
    built = _written(vector_index.build(vectors, COMPRESSED), tmp_path)
    assert built.info["rescore"] > COMPRESSED.rescore
    probes = ivf_tuning.probe_queries(vectors, np.random.default_rng(3), COMPRESSED.probe_ratio)
    truth = exact_top(vectors, probes, 10)

    def recall(index):
        _, found = vector_index.search(index, probes, 10, None, len(vectors), COMPRESSED)
        return np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth)])

    as_built = recall(built)
    built.info.pop("rescore")  # as if the factor were not recorded: the policy's 10 per hit
    assert as_built >= 0.95 and recall(built) < as_built


def test_recall_deeper_than_ten_probes_more_lists_and_rescores_more():
    """Tuned for the top 10, a segment searched for 100 hits that all matter (``recall_k`` 100) probes
    more lists and rescores its tuned factor per hit; for a fusion depth (``recall_k`` 10) it does not."""
    assert [ivf_tuning.deep_nprobe(8, k, 256) for k in (1, 10, 20, 40, 100)] == [8, 8, 16, 16, 32]
    assert ivf_tuning.deep_nprobe(128, 100, 256) == 256  # never past every list
    vectors = clustered(6000, dim=64, centers=300, seed=1)  # many small clusters: 1-bit codes need rescoring
    built = vector_index.build(vectors, COMPRESSED)
    queries = clustered(50, dim=64, centers=300, seed=2)
    truth = exact_top(vectors, queries, 100)

    def recall(recall_k):
        _, found = vector_index.search(built, queries, 100, None, len(vectors), COMPRESSED, recall_k)
        return np.mean([len(set(a) & set(b)) / 100 for a, b in zip(found, truth)])

    assert recall(100) >= 0.97 and recall(10) < recall(100) - 0.05


def test_a_part_holding_a_share_of_the_rows_probes_fewer_of_its_lists():
    """A part that fetches only its share of a search's top 10 probes ``nprobe * sqrt(share)`` of its lists, at
    least ``SHARED_NPROBE_FLOOR`` of them, and still finds the best rows; deeper recall ignores the share."""
    assert [ivf_tuning.probed_lists(40, 10, 1024, share) for share in (1.0, 0.81, 0.5, 0.01)] == [40, 36, 30, 30]
    assert ivf_tuning.probed_lists(8, 100, 256, 0.01) == ivf_tuning.deep_nprobe(8, 100, 256) == 32
    assert ivf_tuning.probed_lists(1, 10, 64, 0.01) == 1
    vectors = clustered(6000, dim=64, centers=300, seed=1)
    built = vector_index.build(vectors, COMPRESSED)
    queries = clustered(50, dim=64, centers=300, seed=2)
    truth = exact_top(vectors, queries, 3)
    stats = faiss.cvar.indexIVF_stats

    def probed(share):
        stats.reset()
        _, found = vector_index.search(built, queries, 10, None, len(vectors), COMPRESSED, share=share)
        return stats.nlist, np.mean([len(set(a[:3]) & set(b)) / 3 for a, b in zip(found, truth)])

    lists, top3 = probed(0.05)
    nprobe = built.index.nprobe
    assert probed(1.0)[0] == 50 * nprobe and lists == 50 * int(np.ceil(nprobe * ivf_tuning.SHARED_NPROBE_FLOOR))
    assert lists < 50 * nprobe and top3 >= 0.95


@pytest.mark.parametrize("needed, chosen", [(23, 24), (17, 20), (64, 64), (3, 3), (1, 1)])
def test_tuning_halves_the_gap_after_the_first_power_of_two_that_reaches_the_goal(needed, chosen):
    """A search whose results are exact from ``needed`` lists on: doubling finds the next power of two,
    then two halvings of the gap from the last one short of it come closer."""
    vectors = clustered(500)
    tried = []

    def search(queries, k, nprobe, rescore):
        tried.append(nprobe)
        exact = exact_top(vectors, queries, k)
        return (exact if nprobe >= needed else np.full_like(exact, -1)), 0

    tuned = ivf_tuning.tune(search, vectors, 64, False, IndexPolicy(), np.random.default_rng(0))
    assert tuned.nprobe == chosen and tuned.recall == 1.0
    assert len(tried) <= 7 + ivf_tuning.BISECTIONS  # 1, 2, 4, ..., 64, then the halvings


def _codes_of_every_row(vectors, folder):
    """A segment as written before small segments got lists: 1-bit codes of every row (``rabitq``), read back."""
    index = faiss.IndexRaBitQ(vectors.shape[1], faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    index.add(vectors)
    built = vector_index.VectorIndex(
        index, {"type": "rabitq", "int8": True, "rescore": 20, "recall": 0.99}, vectors, int8_rows.quantize(vectors)
    )
    return _written(built, folder)


def test_segments_written_with_codes_of_every_row_are_still_searched(tmp_path):
    vectors = clustered(4000, dim=64, seed=1)
    built = _codes_of_every_row(vectors, tmp_path)
    assert isinstance(built.index, faiss.IndexRaBitQ) and built.int8 is not None
    queries = clustered(100, dim=64, seed=2)
    scores, found = vector_index.search(built, queries, 10, None, len(vectors), SMALL_CODES)
    truth = exact_top(vectors, queries, 10)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, truth)]) >= 0.95
    assert np.allclose(scores, np.take_along_axis(queries @ vectors.T, found, axis=1), atol=1e-5)
    allowed = np.zeros(len(vectors), dtype=bool)
    allowed[::50] = True  # 80 rows: every one a candidate, so the search is exact
    scores, rows = vector_index.search(
        built, queries[:5], 10, allowed, int(allowed.sum()), dataclasses.replace(SMALL_CODES, exact_max_rows=0)
    )
    assert np.array_equal(rows, exact_top(vectors, queries[:5], 10, allowed))


def test_an_exact_search_of_codes_of_every_row_reads_the_rows_themselves(tmp_path):
    """``exact=True`` lets every row through a mask with no limit on gathering: the float32 rows are searched,
    not the candidates the codes rank first."""
    vectors = clustered(15_000, dim=64, seed=8)
    built = _codes_of_every_row(vectors, tmp_path)
    built.info["rescore"] = 1  # 100 candidates of 15,000: the codes alone miss some of the true top 10
    queries = clustered(100, dim=64, seed=9)
    everything = np.ones(len(vectors), dtype=bool)
    exact = dataclasses.replace(SMALL_CODES, exact_max_rows=1 << 62)  # as ranking asks for it
    scores, rows = vector_index.search(built, queries, 10, everything, len(vectors), exact)
    assert np.array_equal(rows, exact_top(vectors, queries, 10))


def test_fast_scan_codes_search_with_the_heap_implementation_and_find_what_the_default_finds(tmp_path):
    vectors = clustered(6000, dim=64, centers=300, seed=1)
    built = vector_index.build(vectors, IndexPolicy(codes="always"))
    write_vectors(built, tmp_path, lambda path, fill: fill(path))
    loaded = read_vectors(tmp_path, built.info)
    assert built.index.implem == loaded.index.implem == FAST_SCAN_IMPLEMENTATION
    queries = clustered(40, dim=64, centers=300, seed=2)
    params = faiss.SearchParametersIVF(nprobe=loaded.index.nprobe)
    heap = loaded.index.search(queries, 50, params=params)
    loaded.index.implem = 0  # FAISS's own choice
    default = loaded.index.search(queries, 50, params=params)
    assert np.array_equal(heap[1], default[1]) and np.array_equal(heap[0], default[0])
