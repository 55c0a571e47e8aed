"""What the sharding tests share: a corpus of documents, and hits compared as a sharded search must match."""

from __future__ import annotations

import random

import numpy as np

WORDS = (
    "quick brown fox jumps over lazy dog green tea steamed after picking coffee beans roasted high temperature "
    "rivers flow toward sea mountains rise above clouds snow covers peaks winter neural networks learn "
    "representations text search engines rank documents python programming language databases store rows "
    "tables indexes"
).split()


def corpus(n: int = 150, seed: int = 7) -> list[dict]:
    """``n`` documents with ``year`` and ``kind`` metadata, a few long enough for several chunks. No word is a
    stopword, so each document's BM25 length differs from every other's and scores do not tie (tied documents
    may come in another order from shards than from one collection)."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        length = 6 + i if i % 25 else 300 + i  # every 25th spans several chunks
        text = " ".join(rng.choice(WORDS) for _ in range(length)) + "."
        docs.append(
            {
                "id": f"doc-{i:03d}",
                "title": f"note {i}",
                "text": text,
                "metadata": {"year": 2000 + i % 5, "kind": "ab"[i % 2]},
            }
        )
    return docs


def assert_same_hits(expected, got, evidence: bool = True) -> None:
    """The same ids in the same order, scores within 1e-5, the same chunks shown and (with ``evidence``) the same
    evidence sentences."""
    assert [hit.id for hit in got] == [hit.id for hit in expected]
    np.testing.assert_allclose([hit.score for hit in got], [hit.score for hit in expected], rtol=0, atol=1e-5)
    assert [(hit.start, hit.end, hit.text) for hit in got] == [(hit.start, hit.end, hit.text) for hit in expected]
    assert not evidence or [[(e.start, e.end, e.terms) for e in hit.evidence] for hit in got] == [
        [(e.start, e.end, e.terms) for e in hit.evidence] for hit in expected
    ]
