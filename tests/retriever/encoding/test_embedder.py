"""Embedder: shapes, normalisation, batch invariance, mean pooling, overflow, identity."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from retriever import BadInputError, Embedder, InputTooLongWarning

TEXTS = [
    "green tea",
    "The quick brown fox jumps over the lazy dog.",
    "Coffee beans are roasted at high temperature. Rivers flow into the sea.",
    "python",
    "Mountains rise above the clouds and snow covers the peaks in winter. "
    "Neural networks learn representations of text.",
    "databases store rows in tables",
]


def _long_text(embedder: Embedder, tokens: int) -> str:
    """Plain text of at least ``tokens`` tokens (special tokens included)."""
    words = "rivers flow into the sea and mountains rise above the clouds".split()
    out: list[str] = []
    while embedder.count_tokens([" ".join(out)])[0] < tokens:
        out.append(words[len(out) % len(words)])
    return " ".join(out)


def test_vectors_are_float32_unit_rows(tiny_embedder):
    vectors = tiny_embedder.embed(TEXTS)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), tiny_embedder.dim) == (len(TEXTS), 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors.flags["C_CONTIGUOUS"]
    # distinct texts give distinct vectors
    assert not np.allclose(vectors[0], vectors[1], atol=1e-3)


def test_single_string_is_one_row(tiny_embedder):
    one = tiny_embedder.embed("green tea")
    assert one.shape == (1, tiny_embedder.dim)
    np.testing.assert_allclose(one[0], tiny_embedder.embed(["green tea"])[0], atol=1e-6)


def test_same_text_same_vector_whatever_the_batch(tiny_embedder):
    alone = np.stack([tiny_embedder.embed([t])[0] for t in TEXTS])
    together = tiny_embedder.embed(TEXTS)
    reversed_ = tiny_embedder.embed(TEXTS[::-1])[::-1]
    small_batches = tiny_embedder.embed(TEXTS, batch_size=2)
    shuffled_order = [3, 0, 5, 1, 4, 2]
    shuffled = tiny_embedder.embed([TEXTS[i] for i in shuffled_order])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(reversed_, alone, atol=1e-5)
    np.testing.assert_allclose(small_batches, alone, atol=1e-5)
    np.testing.assert_allclose(shuffled, alone[shuffled_order], atol=1e-5)


def test_duplicates_in_one_batch_get_identical_vectors(tiny_embedder):
    vectors = tiny_embedder.embed(["green tea", TEXTS[4], "green tea"])
    np.testing.assert_allclose(vectors[0], vectors[2], atol=1e-6)


def test_mean_pooling_ignores_padding(tiny_embedder):
    short = "green tea"
    long = _long_text(tiny_embedder, tiny_embedder.max_tokens - 4)
    assert tiny_embedder.count_tokens([long])[0] <= tiny_embedder.max_tokens
    alone = tiny_embedder.embed([short])[0]
    padded = tiny_embedder.embed([long, short], batch_size=2)[1]
    np.testing.assert_allclose(padded, alone, atol=1e-5)


def test_embedding_is_masked_mean_of_token_states(tiny_embedder, tiny_model_dir):
    """Independent reference: the transformer's token states, averaged over real tokens."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model = AutoModel.from_pretrained(str(tiny_model_dir)).eval()
    texts = ["green tea", TEXTS[4]]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    mean = (states * mask).sum(1) / mask.sum(1)
    expected = torch.nn.functional.normalize(mean, dim=1).numpy()
    # atol 1e-4: the backend auto picks on a busy machine may be ONNX Runtime fp32, which differs from torch's
    # kernels by up to ~3e-5 per component; pooling padding in would differ by far more than that
    np.testing.assert_allclose(tiny_embedder.embed(texts), expected, atol=1e-4)


def test_overlong_input_warns_with_the_count(tiny_embedder):
    long = _long_text(tiny_embedder, tiny_embedder.max_tokens + 20)
    n = tiny_embedder.count_tokens([long])[0]
    assert n > tiny_embedder.max_tokens
    with pytest.warns(InputTooLongWarning) as record:
        vectors = tiny_embedder.embed(["green tea", long, "coffee"])
    message = str(record[0].message)
    assert "1 of 3" in message
    assert f"{n} tokens" in message
    assert str(tiny_embedder.max_tokens) in message
    assert vectors.shape == (3, tiny_embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_overlong_input_counts_every_offender(tiny_embedder):
    long = _long_text(tiny_embedder, tiny_embedder.max_tokens + 5)
    longer = _long_text(tiny_embedder, tiny_embedder.max_tokens + 30)
    with pytest.warns(InputTooLongWarning, match=r"2 of 3 .*text 2"):
        tiny_embedder.embed(["tea", long, longer])


def _text_of_tokens(embedder: Embedder, tokens: int) -> str:
    """Plain text of exactly ``tokens`` tokens, special tokens included, one token per word."""
    words = "rivers flow into the sea and mountains rise above the clouds".split()
    assert all(len(embedder.tokenizer(w, add_special_tokens=False)["input_ids"]) == 1 for w in words)
    text = " ".join(words[i % len(words)] for i in range(tokens - 2))
    assert embedder.count_tokens([text])[0] == tokens
    return text


@pytest.mark.parametrize("which", ["tiny_embedder", "minilm"])
def test_input_exactly_at_the_window_is_whole_and_one_token_more_is_cut(request, which):
    """At ``max_tokens`` (special tokens included): no warning, every token embedded; one more: a warning, a cut."""
    embedder = request.getfixturevalue(which)
    window = embedder.max_tokens
    at_window = _text_of_tokens(embedder, window)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputTooLongWarning)
        vector = embedder.embed([at_window])
        np.testing.assert_array_equal(embedder.embed([at_window], on_overflow="error"), vector)
    # no cut: the vector is that of all the text's tokens, and the last one counts
    content = embedder.tokenizer(at_window, add_special_tokens=False)["input_ids"]
    assert len(content) == window - 2
    np.testing.assert_allclose(vector, embedder.embed_token_ids([content]), atol=1e-6)
    assert not np.allclose(vector, embedder.embed_token_ids([content[:-1]]), atol=1e-4)

    above = at_window + " sea"
    assert embedder.count_tokens([above])[0] == window + 1
    with pytest.warns(InputTooLongWarning, match=f"window of {window} tokens .*{window + 1} tokens"):
        cut = embedder.embed([above])
    np.testing.assert_allclose(cut, vector, atol=1e-6)  # cut back to the window: the last word dropped
    with pytest.raises(BadInputError, match=f"{window + 1} tokens"):
        embedder.embed([above], on_overflow="error")


def test_overflow_error_mode_raises(tiny_embedder):
    long = _long_text(tiny_embedder, tiny_embedder.max_tokens + 10)
    n = tiny_embedder.count_tokens([long])[0]
    with pytest.raises(BadInputError, match=f"{n} tokens"):
        tiny_embedder.embed(["tea", long], on_overflow="error")


def test_unknown_overflow_mode_raises(tiny_embedder):
    with pytest.raises(BadInputError, match="on_overflow"):
        tiny_embedder.embed(["tea"], on_overflow="truncate")


def test_empty_input_gives_zero_rows(tiny_embedder):
    for empty in ([], ()):
        out = tiny_embedder.embed(empty)
        assert out.shape == (0, tiny_embedder.dim)
        assert out.dtype == np.float32
    assert tiny_embedder.count_tokens([]) == []


@pytest.mark.parametrize("bad", [[1], ["tea", None], [b"bytes"], ["tea", ["nested"]]])
def test_non_string_input_raises(tiny_embedder, bad):
    with pytest.raises(BadInputError, match=r"texts\[\d\] must be a string"):
        tiny_embedder.embed(bad)


def test_count_tokens_includes_special_tokens(tiny_embedder):
    plain = len(tiny_embedder.tokenizer("green tea", add_special_tokens=False)["input_ids"])
    assert tiny_embedder.count_tokens(["green tea"]) == [plain + 2]


def test_directory_that_is_not_a_model_raises(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "config.json").write_text("not json")
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello")
    for location in (empty, junk, text_file, tmp_path / "missing" / "model"):
        with pytest.raises(BadInputError):
            Embedder(location)


def test_weights_sha256_is_stable_and_path_independent(tiny_model_dir, tiny_copy_dir, tiny_embedder):
    again = Embedder(tiny_model_dir)
    digest = tiny_embedder.weights_sha256
    assert len(digest) == 64 and int(digest, 16) >= 0
    assert again.weights_sha256 == digest
    assert Embedder(tiny_copy_dir).weights_sha256 == digest


def test_weights_sha256_differs_for_other_weights(tiny_embedder, perturbed_embedder, minilm):
    assert perturbed_embedder.dim == tiny_embedder.dim
    assert perturbed_embedder.weights_sha256 != tiny_embedder.weights_sha256
    assert minilm.weights_sha256 != tiny_embedder.weights_sha256


def test_identity_describes_the_model(tiny_embedder, tiny_model_dir):
    identity = tiny_embedder.identity()
    assert identity["sha256"] == tiny_embedder.weights_sha256
    assert identity["dim"] == 32
    assert identity["max_tokens"] == 64
    assert identity["pooling"] == "mean" and identity["normalize"] is True
    assert identity["name"] == str(tiny_model_dir.resolve())


def test_minilm_defaults(minilm):
    assert minilm.name == "all-MiniLM-L6-v2"
    assert minilm.dim == 384
    assert minilm.max_tokens == 256
    assert Embedder("sentence-transformers/all-MiniLM-L6-v2").weights_sha256 == minilm.weights_sha256


def test_minilm_paraphrase_scores_above_unrelated(minilm):
    a, b, c, d = minilm.embed(
        [
            "How do I reset my password?",
            "What are the steps to change a forgotten password?",
            "The recipe needs two cups of flour and an egg.",
            "Volcanic eruptions send ash high into the atmosphere.",
        ]
    )
    paraphrase = float(a @ b)
    assert paraphrase > float(a @ c) + 0.2
    assert paraphrase > float(a @ d) + 0.2
    assert float(b @ c) < paraphrase
