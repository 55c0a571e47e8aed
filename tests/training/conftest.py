"""Fixtures for training tests: a small repetitive corpus and a tokenizer trained on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TINY_CORPUS

TINY = dict(layers=2, hidden=32, heads=2, intermediate=64, max_len=32)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One torch thread: tiny models run ~30x faster than with threads contending for shared cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    """A directory with two text files: TINY_CORPUS's lines as paragraphs, repeated."""
    root = tmp_path_factory.mktemp("corpus")
    paragraphs = "\n\n".join(TINY_CORPUS.splitlines())
    (root / "a.txt").write_text((paragraphs + "\n\n") * 12, encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text((paragraphs + "\n\n") * 8, encoding="utf-8")
    (root / "ignored.md").write_text("not walked", encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def tokenizer_dir(corpus_dir, tmp_path_factory) -> Path:
    from training.tokenizer import train_tokenizer

    return train_tokenizer([corpus_dir], tmp_path_factory.mktemp("tok") / "tok", vocab_size=300, min_frequency=1)


@pytest.fixture(scope="session")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir))
