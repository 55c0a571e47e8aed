"""Encoder backends: each one's vectors against torch fp32, the export cache, ``auto``'s choice."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from retriever import BadInputError, Embedder
from retriever.encoding.backends import choice
from retriever.encoding.export import find_export

TEXTS = [
    "green tea",
    "The quick brown fox jumps over the lazy dog.",
    "Coffee beans are roasted at high temperature. Rivers flow into the sea.",
    "  python  ",
    "Mountains rise above the clouds and snow covers the peaks in winter. " * 3,
    "databases store rows in tables",
]
BF16 = choice.has_bf16()


def lossless_backends() -> list[str]:
    names = ["torch-fp32", "onnx-fp32", "openvino-fp32"]
    return names + (["openvino-bf16", "torch-bf16"] if BF16 else [])


@pytest.fixture(scope="module")
def tiny_reference(tiny_model_dir, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return cache, Embedder(tiny_model_dir, backend="torch", cache_dir=cache).embed(TEXTS)


def test_torch_backend_equals_sentence_transformers(tiny_model_dir):
    """Independent reference: sentence-transformers' own encode of the same model."""
    from sentence_transformers import SentenceTransformer

    expected = SentenceTransformer(str(tiny_model_dir), device="cpu").encode(TEXTS, normalize_embeddings=True)
    got = Embedder(tiny_model_dir, backend="torch-fp32").embed(TEXTS)
    assert np.min(np.sum(got * expected, axis=1)) > 0.99999


@pytest.mark.parametrize("backend", ["onnx-fp32", "openvino-fp32"])
def test_fp32_backends_match_torch_on_the_tiny_model(tiny_model_dir, tiny_reference, backend):
    cache, reference = tiny_reference
    embedder = Embedder(tiny_model_dir, backend=backend, cache_dir=cache)
    assert embedder.backend == backend
    assert choice.min_cosine(embedder.embed(TEXTS), reference) >= 0.9999


def _op_counts(graph) -> dict[str, int]:
    import onnx

    counts: dict[str, int] = {}
    for node in onnx.load(str(graph), load_external_data=False).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def test_onnx_runs_the_fused_graph_where_every_layer_fuses(tiny_model_dir, tiny_reference):
    cache, reference = tiny_reference
    embedder = Embedder(tiny_model_dir, backend="onnx", cache_dir=cache)
    export = find_export(tiny_model_dir, cache)
    layers = json.loads((tiny_model_dir / "config.json").read_text())["num_hidden_layers"]
    assert export.fused_path is not None
    assert _op_counts(export.fused_path).get("Attention") == layers
    assert "Attention" not in _op_counts(export.onnx_path)  # OpenVINO reads the plain graph
    assert embedder._backend.graph == export.fused_path
    assert choice.min_cosine(embedder.embed(TEXTS), reference) >= 0.9999


def test_a_graph_that_does_not_fully_fuse_is_not_kept(tiny_model_dir, tiny_reference, tmp_path):
    from types import SimpleNamespace

    from retriever.encoding.export import _fuse_graph

    cache, _ = tiny_reference
    Embedder(tiny_model_dir, backend="onnx", cache_dir=cache)
    config = json.loads((tiny_model_dir / "config.json").read_text())
    config["num_hidden_layers"] += 1  # one Attention node fewer than layers: not every layer fused
    target = tmp_path / "fused.onnx"
    assert not _fuse_graph(find_export(tiny_model_dir, cache).onnx_path, target, SimpleNamespace(**config))
    assert not target.exists()


def test_an_export_of_an_older_format_is_made_again(tiny_model_dir, tmp_path):
    first = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    folder = tmp_path / "exported" / first.weights_sha256
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps(meta | {"format": meta["format"] - 1}))
    for path in folder.glob("model.fused*"):
        path.unlink()
    assert find_export(tiny_model_dir, tmp_path) is None
    with pytest.raises(BadInputError, match="in use by another process"):  # ``first`` still uses the old one
        Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    before, sha = first.embed(TEXTS), first.weights_sha256
    del first  # its lease goes with it

    again = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    export = find_export(tiny_model_dir, tmp_path)
    assert export is not None and export.fused_path is not None
    assert [p.name for p in (tmp_path / "exported").iterdir()] == [sha]  # nothing stale left
    np.testing.assert_allclose(again.embed(TEXTS), before, atol=1e-5)


@pytest.fixture(scope="module")
def minilm_reference(tmp_path_factory):
    cache = tmp_path_factory.mktemp("minilm-cache")
    return cache, Embedder(backend="torch", cache_dir=cache).embed(TEXTS)


@pytest.mark.parametrize("backend", lossless_backends())
def test_lossless_backends_match_torch_on_minilm(minilm_reference, backend):
    cache, reference = minilm_reference
    vectors = Embedder(backend=backend, cache_dir=cache).embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == reference.shape
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert choice.min_cosine(vectors, reference) >= 0.9999


@pytest.mark.parametrize("precision", ["fp32"] + (["bf16"] if BF16 else []))
def test_openvino_fixed_shape_graphs_give_the_dynamic_graphs_vectors(tiny_model_dir, tiny_reference, precision):
    """Inputs padded to fixed-shape graphs (rows and tokens) get the vectors of the unpadded dynamic run."""
    from retriever.encoding.backends.openvino_backend import FIXED_ROWS, FIXED_TOKENS, OpenVinoBackend

    assert (FIXED_ROWS, FIXED_TOKENS) == ((1, 4, 8), (16, 32, 64))  # the shapes asserted below

    cache, _ = tiny_reference
    Embedder(tiny_model_dir, backend="openvino", cache_dir=cache)  # exports the graph
    graph = find_export(tiny_model_dir, cache).onnx_path
    fixed = OpenVinoBackend(graph, precision, threads=1)
    dynamic = OpenVinoBackend(graph, precision, threads=1, fixed_shapes=False)
    rng = np.random.default_rng(0)
    longest = FIXED_TOKENS[-1]
    shapes = [
        (1, 1),
        (1, 8),
        (1, 9),
        (1, 33),
        (1, longest),
        (3, 20),
        (8, 5),
        (19, 12),
        (1, longest + 1),
        (5, longest + 2),
    ]  # the tiny model reads 66
    for rows, tokens in shapes:
        ids = rng.integers(5, 300, size=(rows, tokens)).astype(np.int64)  # within the tiny vocabulary
        mask = np.ones_like(ids)
        mask[1:, tokens // 2 :] = 0  # rows of different lengths in one batch
        got, expected = fixed.run(ids, mask), dynamic.run(ids, mask)
        assert got.shape == expected.shape == (rows, got.shape[1])
        assert choice.min_cosine(got, expected) >= (0.99999 if precision == "fp32" else 0.9999), (rows, tokens)
    # 19 rows run as 8 + 8 + 3 (padded to 4); the last two shapes are too long for a fixed graph
    assert sorted(fixed._fixed) == [(1, 16), (1, 64), (4, 16), (4, 32), (8, 16)]
    assert sorted(dynamic._fixed) == []
    # padded_calls (what batching weighs) names exactly the calls that ran
    assert fixed.padded_calls(19, 12) == [(8, 16), (8, 16), (4, 16)]
    assert fixed.padded_calls(5, longest + 2) == [(5, longest + 2)]  # too long for a fixed graph: as it is
    predicted = {call for rows, tokens in shapes for call in fixed.padded_calls(rows, tokens)}
    assert sorted(predicted - {(1, longest + 1), (5, longest + 2)}) == sorted(fixed._fixed)
    assert dynamic.padded_calls(19, 12) == [(19, 12)]


def _fresh_openvino_graph(model_dir, tmp_path):
    """The exported graph of ``model_dir`` in a cache of its own (no compiled blobs yet)."""
    cache = tmp_path / "cache"
    Embedder(model_dir, backend="openvino", cache_dir=cache)
    return find_export(model_dir, cache).onnx_path


def _token_batch(seed: int, rows: int, tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids within the tiny vocabulary, and a mask where rows after the first end halfway."""
    ids = np.random.default_rng(seed).integers(5, 300, size=(rows, tokens)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1:, tokens // 2 :] = 0
    return ids, mask


@pytest.mark.skipif(not BF16, reason="this CPU has no BF16: OpenVINO has one precision to compile here")
def test_openvino_precisions_of_one_graph_keep_their_own_compiled_blobs(tiny_model_dir, tmp_path):
    """A bf16 compile after an fp32 one of the same graph (shared on-disk cache) gives its own, finite vectors."""
    from retriever.encoding.backends.openvino_backend import OpenVinoBackend

    graph = _fresh_openvino_graph(tiny_model_dir, tmp_path)
    ids, mask = _token_batch(seed=1, rows=3, tokens=20)

    def vectors(precision: str) -> list[np.ndarray]:
        fixed = OpenVinoBackend(graph, precision, threads=1)
        dynamic = OpenVinoBackend(graph, precision, threads=1, fixed_shapes=False)
        return [fixed.run(ids[:1, :8], mask[:1, :8]), fixed.run(ids, mask), dynamic.run(ids, mask)]

    expected = vectors("fp32")  # every graph compiled, and cached on disk
    for _ in range(2):  # compiled, then loaded from the cache
        got = vectors("bf16")
        assert all(np.isfinite(v).all() for v in got)
        assert min(choice.min_cosine(g, e) for g, e in zip(got, expected)) >= 0.9999
    cache = graph.parent / "openvino-cache"
    assert {p.relative_to(cache).parts[0] for p in cache.rglob("*.blob")} == {"fp32", "bf16"}


def test_fixed_shape_graphs_are_imported_by_later_backends_and_a_torn_blob_is_compiled_again(tiny_model_dir, tmp_path):
    from retriever.encoding.backends.openvino_backend import OpenVinoBackend

    graph = _fresh_openvino_graph(tiny_model_dir, tmp_path)
    ids, mask = _token_batch(seed=2, rows=1, tokens=12)
    first = OpenVinoBackend(graph, "fp32", threads=1)
    expected = first.run(ids, mask)
    (blob,) = (graph.parent / "openvino-cache" / "fp32").glob("fixed-1x16-*.blob")
    later = OpenVinoBackend(graph, "fp32", threads=1)
    np.testing.assert_array_equal(later.run(ids, mask), expected)
    assert later._source_model is None  # imported: the ONNX graph was never read
    blob.write_bytes(blob.read_bytes()[:1000])  # torn, as by a crash of an older writer
    again = OpenVinoBackend(graph, "fp32", threads=1)
    np.testing.assert_array_equal(again.run(ids, mask), expected)
    assert again._source_model is not None and blob.stat().st_size > 1000  # compiled and saved anew


def test_blobs_of_earlier_cache_layouts_are_removed_and_current_ones_kept(tiny_model_dir, tmp_path):
    from retriever.encoding.backends.openvino_backend import DYNAMIC_CACHE, OpenVinoBackend

    graph = _fresh_openvino_graph(tiny_model_dir, tmp_path)
    cache = graph.parent / "openvino-cache"
    stale = [cache / "1234.blob", cache / "fp32" / "5678.blob"]  # OpenVINO's own cache files, older layouts
    kept = [
        cache / "fp32" / "fixed-1x16-0123456789abcdef.blob",
        cache / "fp32" / DYNAMIC_CACHE / "42.blob",
        cache / "bf16" / "999.blob",
    ]  # fixed shapes (of any build), the dynamic graph's, another precision's
    for path in stale + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"compiled")
    ids, mask = _token_batch(seed=3, rows=2, tokens=40)
    vectors = OpenVinoBackend(graph, "fp32", threads=1, fixed_shapes=False).run(ids, mask)
    assert vectors.shape[0] == 2 and np.isfinite(vectors).all()
    assert not any(path.exists() for path in stale) and all(path.exists() for path in kept)
    assert len(list((cache / "fp32" / DYNAMIC_CACHE).glob("*.blob"))) == 2  # the dynamic graph cached in its folder


def test_auto_checks_single_queries_as_well_as_passages(tiny_embedder):
    """A candidate whose single-query path (other graphs than passage batches) goes wrong is not kept."""

    def encode(name, texts):
        vectors = tiny_embedder.embed(texts)
        return np.full_like(vectors, np.nan) if name == "broken-queries" and len(texts) == 1 else vectors

    result = choice.measure(["reference", "broken-queries"], lambda name: name, encode, passages=4, repeats=1)
    assert result["measured"]["broken-queries"]["min_cosine"] == -1.0
    assert result["backend"] == result["query_backend"] == "reference"


@pytest.mark.parametrize("backend", ["onnx-int8", "openvino-int8"])
def test_int8_is_close_but_only_when_asked(minilm_reference, backend):
    cache, reference = minilm_reference
    vectors = Embedder(backend=backend, cache_dir=cache).embed(TEXTS)
    assert 0.9 <= choice.min_cosine(vectors, reference) < choice.MIN_COSINE
    assert backend not in choice.candidates()


def test_auto_never_keeps_a_backend_beyond_the_cosine_bound(minilm_reference):
    """int8 is fast and lossy; measured beside the exact ones it is never chosen."""
    cache, _ = minilm_reference
    embedder = Embedder(backend="onnx-fp32", cache_dir=cache)
    result = choice.measure(
        ["torch-fp32", "onnx-int8", "onnx-fp32"],
        embedder._open,
        lambda backend, texts: embedder._encode_ids(embedder._tokens.encode(texts), 32, False, backend),
        passages=8,
        repeats=1,
    )
    assert result["measured"]["onnx-int8"]["min_cosine"] < choice.MIN_COSINE
    assert result["backend"] in ("torch-fp32", "onnx-fp32") and result["query_backend"] == "onnx-fp32"
    assert result["measured"][result["backend"]]["min_cosine"] >= choice.MIN_COSINE


def test_auto_decides_once_and_later_loads_skip_torch(tiny_model_dir, tmp_path):
    first = Embedder(tiny_model_dir, cache_dir=tmp_path)
    assert first.info()["requested"] == "auto" and first.backend in choice.candidates()
    assert not first.query_backend.startswith("torch")
    measured = first.info()["measured"]
    assert set(measured) == set(choice.candidates())
    assert measured[first.backend]["min_cosine"] >= choice.MIN_COSINE
    assert len(list((tmp_path / "choices").iterdir())) == 1

    second = Embedder(tiny_model_dir, cache_dir=tmp_path)
    assert second.backend == first.backend and second.info()["measured"] == measured
    assert second._model is None  # the export and the decision were enough: no torch for queries
    assert second.weights_sha256 == first.weights_sha256
    np.testing.assert_allclose(second.embed(TEXTS[:2]), first.embed(TEXTS[:2]), atol=1e-6)
    assert choice.min_cosine(second.embed(TEXTS * 2), first.embed(TEXTS * 2)) >= choice.MIN_COSINE


def test_export_is_keyed_by_weights_and_shared_across_paths(tiny_model_dir, tiny_copy_dir, tmp_path):
    one = Embedder(tiny_model_dir, backend="onnx", cache_dir=tmp_path)
    other = Embedder(tiny_copy_dir, backend="onnx", cache_dir=tmp_path)
    assert other.weights_sha256 == one.weights_sha256
    assert [p.name for p in (tmp_path / "exported").iterdir()] == [one.weights_sha256]
    assert len(list((tmp_path / "locations").iterdir())) == 2
    meta = json.loads((tmp_path / "exported" / one.weights_sha256 / "meta.json").read_text())
    assert meta["dim"] == one.dim and meta["max_tokens"] == one.max_tokens


def test_changed_model_files_are_not_mistaken_for_the_export(tiny_model_dir, perturbed_model_dir, tmp_path):
    """A directory whose files changed no longer matches its recorded fingerprint."""
    target = tmp_path / "model"
    shutil.copytree(tiny_model_dir, target)
    cache = tmp_path / "cache"
    original = Embedder(target, backend="onnx", cache_dir=cache)
    assert find_export(target, cache).weights_sha256 == original.weights_sha256
    shutil.rmtree(target)
    shutil.copytree(perturbed_model_dir, target)
    assert find_export(target, cache) is None
    changed = Embedder(target, backend="onnx", cache_dir=cache)
    assert changed.weights_sha256 != original.weights_sha256


def test_embed_token_ids_equals_embed_of_the_text(tiny_embedder):
    texts = ["green tea is steamed", "rivers flow into the sea and mountains rise"]
    ids = [tiny_embedder.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    np.testing.assert_allclose(tiny_embedder.embed_token_ids(ids), tiny_embedder.embed(texts), atol=1e-5)
    with pytest.raises(BadInputError, match="window"):
        tiny_embedder.embed_token_ids([ids[0] * tiny_embedder.max_tokens])


def test_unknown_backend_is_a_clear_error(tiny_model_dir):
    with pytest.raises(BadInputError, match="unknown encoder backend"):
        Embedder(tiny_model_dir, backend="tensorrt")


def test_backend_from_the_environment(tiny_model_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("SEMSEARCH_BACKEND", "onnx")
    assert Embedder(tiny_model_dir, cache_dir=tmp_path).backend == "onnx-fp32"


def test_an_unwritable_cache_falls_back_to_torch(tiny_model_dir, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    embedder = Embedder(tiny_model_dir, cache_dir=blocker / "cache")
    assert embedder.backend == embedder.query_backend == "torch-fp32"
    assert "no export" in embedder.info()["reason"]
    assert embedder.embed(["green tea"]).shape == (1, embedder.dim)
    with pytest.raises(BadInputError, match="backend onnx-fp32"):
        Embedder(tiny_model_dir, backend="onnx", cache_dir=blocker / "cache")
