"""Fixtures for the retriever tests: a copy and a perturbed variant of the tiny model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_copy_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The same tiny model at another path (identical weights)."""
    target = tmp_path_factory.mktemp("tiny-copy") / "model"
    shutil.copytree(tiny_model_dir, target)
    return target


@pytest.fixture(scope="session")
def perturbed_model_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny model with one weight nudged: same architecture, dim and tokenizer."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    with torch.no_grad():
        param = next(p for name, p in model.named_parameters() if "word_embeddings" in name)
        param.view(-1)[0] += 0.01
    target = tmp_path_factory.mktemp("tiny-perturbed") / "model"
    model.save(str(target))
    return target


@pytest.fixture(scope="session")
def perturbed_embedder(perturbed_model_dir):
    from retriever import Embedder

    return Embedder(perturbed_model_dir)
