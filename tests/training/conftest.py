"""Fixtures for training tests: a small repetitive corpus, a tokenizer trained on it, a toy BEIR dataset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TINY_CORPUS

TINY = dict(layers=2, hidden=32, heads=2, intermediate=64, max_len=32)
SENTENCES = [s.strip() + "." for s in TINY_CORPUS.replace(";", ".").replace("\n", " ").split(".") if s.strip()]
QUERIES = {  # query id -> (text, relevant sentence index)
    "q0": ("fox and dog", 0),
    "q1": ("tea picking", 1),
    "q2": ("roasted coffee", 2),
    "q3": ("rivers and sea", 3),
    "q4": ("snow on mountain peaks", 4),
    "q5": ("neural representations", 5),
    "q6": ("ranking documents", 6),
    "q7": ("programming language", 7),
    "q8": ("database tables", 8),
}


class Stop(Exception):
    """Raised by ``stop_at``'s callback: a run killed at a step."""


def stop_at(step: int):
    """A step callback that raises ``Stop`` once the record of ``step`` is logged."""

    def callback(record: dict) -> None:
        if record["step"] == step:
            raise Stop

    return callback


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


@pytest.fixture(scope="session")
def beir_dir(tmp_path_factory) -> Path:
    """A toy BEIR dataset over the tiny corpus' sentences: train and test splits."""
    root = tmp_path_factory.mktemp("beir") / "toy"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"d{i}", "title": f"topic {i}", "text": text}) + "\n" for i, text in enumerate(SENTENCES)
        )
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, (text, _) in QUERIES.items())
    )
    rows = [(qid, f"d{doc}", 1) for qid, (_, doc) in QUERIES.items()]
    (root / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in rows[:6]) + "q0\td5\t0\n"
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in rows[6:])
    )
    return root
