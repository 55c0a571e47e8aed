"""Shared fixtures: a tiny random BERT for pipeline tests, the packaged MiniLM
and ../shared/datasets for quality tests (skipped with a reason when absent)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.postgres import catalog_url, postgres_server, postgres_url  # noqa: F401  (fixtures)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if "SEMSEARCH_CACHE" not in os.environ:
    # Exported encoders and backend decisions go to a per-run folder, not ~/.cache;
    # subprocesses (the CLI tests) inherit it and reuse what the run exported.
    os.environ["SEMSEARCH_CACHE"] = tempfile.mkdtemp(prefix="semsearch-test-cache-")
    atexit.register(shutil.rmtree, os.environ["SEMSEARCH_CACHE"], ignore_errors=True)

REPO = Path(__file__).resolve().parent.parent
SHARED_DATASETS = Path(os.environ.get("SEMSEARCH_DATASETS", REPO.parent / "shared" / "datasets"))

TINY_CORPUS = """
The quick brown fox jumps over the lazy dog. Green tea is steamed after picking.
Coffee beans are roasted at high temperature. Rivers flow into the sea.
Mountains rise above the clouds and snow covers the peaks in winter.
Neural networks learn representations of text; search engines rank documents.
Python is a programming language. Databases store rows in tables with indexes.
""".strip()


def build_tiny_model(path: Path, max_seq_length: int = 64) -> Path:
    """A random 2-layer BERT with a WordPiece vocabulary, saved as a
    sentence-transformers directory (Transformer + mean Pooling)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = Path(path)
    raw = path / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator([TINY_CORPUS] * 4, vocab_size=400, min_frequency=1)
    trainer.save_model(str(raw))
    tokenizer = BertTokenizerFast(str(raw / "vocab.txt"), do_lower_case=True)
    tokenizer.model_max_length = max_seq_length
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_seq_length + 2,
    )
    import torch

    torch.manual_seed(0)
    BertModel(config).save_pretrained(raw)
    tokenizer.save_pretrained(raw)
    transformer = Transformer(str(raw), max_seq_length=max_seq_length)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    model_dir = path / "model"
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(model_dir))
    return model_dir


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Directory of a tiny random sentence-transformers BERT (64-token window)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def tiny_embedder(tiny_model_dir):
    from retriever import Embedder

    return Embedder(tiny_model_dir)


@pytest.fixture(scope="session")
def minilm():
    """The packaged all-MiniLM-L6-v2."""
    from retriever import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"needs the shared datasets at {SHARED_DATASETS} (absent here)")
    return SHARED_DATASETS


@pytest.fixture(scope="session")
def scifact_slice(datasets_dir, tmp_path_factory) -> Path:
    """The SciFact slice as a BEIR directory (see ``write_scifact_slice``)."""
    source = datasets_dir / "scifact"
    if not (source / "corpus.jsonl").is_file():
        pytest.skip(f"needs {source}")
    from benchmarks.slices import write_scifact_slice

    return write_scifact_slice(source, tmp_path_factory.mktemp("scifact-slice") / "scifact-slice50")


@pytest.fixture(scope="session")
def scifact_slice_collection(scifact_slice, minilm, tmp_path_factory) -> Path:
    """Directory of a MiniLM collection holding the SciFact slice's corpus."""
    from indexer.job import index_paths
    from retriever import Collection

    path = tmp_path_factory.mktemp("scifact-slice-collection") / "col"
    with Collection.create(path, minilm) as collection:
        report = index_paths(collection, [scifact_slice], progress=False)
    assert report.skipped == [], report.summary()
    return path
