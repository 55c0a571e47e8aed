"""Tokenising for the encoder without transformers: the same ids, length-bucketed batches."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.encoding.tokens import TextTokenizer, padded_batches

TEXTS = ["green tea", "  Rivers flow into the sea.  ", "", "snow covers the peaks in winter " * 60, "python"]


@pytest.mark.parametrize("which", ["tiny_embedder", "minilm"])
def test_ids_equal_the_transformers_tokenizer_with_truncation(request, which):
    embedder = request.getfixturevalue(which)
    ours = TextTokenizer(embedder.tokenizer.backend_tokenizer, embedder.max_tokens)
    expected = embedder.tokenizer([t.strip() for t in TEXTS], truncation=True, max_length=embedder.max_tokens)[
        "input_ids"
    ]
    assert ours.encode(TEXTS) == expected
    assert max(len(ids) for ids in ours.encode(TEXTS)) == embedder.max_tokens
    assert ours.count(TEXTS)[3] > embedder.max_tokens  # counting cuts nothing


def test_lower_casing_follows_the_model_setting(tiny_embedder):
    cased = TextTokenizer(tiny_embedder.tokenizer.backend_tokenizer, 64, do_lower_case=True)
    assert cased.content(["GREEN Tea"]) == cased.content(["green tea"])


def test_batches_are_sorted_by_length_and_padded_to_their_longest():
    ids = [[1] * n for n in (5, 2, 9, 3, 7)]
    seen = []
    for positions, input_ids, mask in padded_batches(ids, 2):
        lengths = [len(ids[i]) for i in positions]
        assert input_ids.shape == mask.shape == (len(positions), max(lengths))
        assert mask.sum(axis=1).tolist() == lengths and input_ids.dtype == np.int64
        seen += positions.tolist()
    assert seen == [1, 3, 0, 4, 2]
