"""Pairs for contrastive training, and batches that hold no text twice.

Pairs ``(anchor, positive[, negative])`` come from a JSONL file
(``read_pairs``), a BEIR training split (``beir_pairs``: query, relevant
document; optionally one BM25-mined hard negative each), or unlabelled text
(``read_corpus``): SimCSE (``simcse_pairs``: a text paired with itself, the
two views made different by dropout) or Contriever-style crops
(``crop_pairs``: two random spans of the same document).
``no_duplicate_batches`` keeps every text to one row of its batch, so no
in-batch "negative" is secretly a positive.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from retriever.errors import BadInputError
from retriever.jsonl import read_jsonl
from training.data import collect_text_files, read_documents

CROP_MIN_WORDS = 5
CROP_RATIO = (0.1, 0.5)


@dataclass(frozen=True)
class Pair:
    """One training row: an anchor, its positive and, optionally, a hard negative."""

    anchor: str
    positive: str
    negative: str | None = None

    def texts(self) -> set[str]:
        """The row's distinct texts (one to three)."""
        return {t for t in (self.anchor, self.positive, self.negative) if t is not None}


# -- pair sources -----------------------------------------------------------
def read_pairs(path: str | Path) -> list[Pair]:
    """``{"anchor", "positive"[, "negative"]}`` records of a JSONL file."""
    path = Path(path)
    if not path.is_file():
        raise BadInputError(f"{path}: no such file")
    pairs = []
    for number, record in read_jsonl(path, "an anchor/positive record"):
        anchor, positive, negative = record.get("anchor"), record.get("positive"), record.get("negative")
        if not all(isinstance(t, str) and t.strip() for t in (anchor, positive)) or not (
            negative is None or (isinstance(negative, str) and negative.strip())
        ):
            raise BadInputError(f"{path}:{number}: anchor, positive and negative must be non-empty strings")
        pairs.append(Pair(anchor, positive, negative))
    if not pairs:
        raise BadInputError(f"{path} holds no pairs")
    return pairs


def _doc_text(record: dict) -> str:
    title, text = (record.get("title") or "").strip(), record.get("text") or ""
    return f"{title}\n{text}" if title else text


def beir_pairs(
    root: str | Path,
    split: str = "train",
    *,
    hard_negatives: bool = False,
    seed: int = 0,
    leave_out: Callable[[str], bool] | None = None,
) -> list[Pair]:
    """(query, title + "\\n" + text) for every judged-relevant (score > 0) document of ``split``.

    With ``hard_negatives`` each pair gets the query's top BM25 document that
    is not judged relevant (a random such document when BM25 finds none).
    Queries for which ``leave_out(query_id)`` is true (a dev draw) give no pairs.
    """
    from retriever.evaluation import load_beir

    dataset = load_beir(root, split)
    corpus = {str(record["_id"]): record for record in dataset.corpus()}
    pairs = []
    index = analyzer = None
    if hard_negatives:
        from retriever.search.bm25 import Analyzer
        from retriever.search.bm25_matrix import BM25Index

        analyzer = Analyzer()
        index = BM25Index.empty().updated(
            [], [(doc_id, analyzer(f"{r.get('title') or ''} {r.get('text') or ''}")) for doc_id, r in corpus.items()]
        )
    rng = random.Random(seed)
    doc_ids = list(corpus)
    for query_id, judged in dataset.qrels.items():
        relevant = [d for d, score in judged.items() if score > 0 and d in corpus]
        if not relevant or (leave_out is not None and leave_out(query_id)):
            continue
        negative = None
        if index is not None:
            positive_ids = {d for d, score in judged.items() if score > 0}
            ranked = index.top(analyzer(dataset.queries[query_id]), len(positive_ids) + 1)
            negative_id = next((d for d, _ in ranked if d not in positive_ids and d != query_id), None)
            if negative_id is None:
                others = [d for d in doc_ids if d not in positive_ids]
                negative_id = rng.choice(others) if others else None
            negative = _doc_text(corpus[negative_id]) if negative_id else None
        for doc_id in relevant:
            pairs.append(Pair(dataset.queries[query_id], _doc_text(corpus[doc_id]), negative))
    if not pairs:
        raise BadInputError(f"{root}: split {split!r} has no relevant documents in the corpus")
    return pairs


def read_corpus(paths: Sequence[str | Path]) -> list[str]:
    """Documents of text files/directories (paragraphs) and BEIR corpora (``corpus.jsonl`` or its directory)."""
    documents: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        jsonl = path / "corpus.jsonl" if path.is_dir() else path
        if jsonl.suffix == ".jsonl" and jsonl.is_file():
            for _, record in read_jsonl(jsonl, "a corpus record"):
                text = _doc_text(record).strip()
                if text:
                    documents.append(text)
        else:
            documents.extend(read_documents(collect_text_files([path])))
    if not documents:
        raise BadInputError(f"no text in {', '.join(map(str, paths))}")
    return documents


def simcse_pairs(documents: Sequence[str]) -> list[Pair]:
    """Each distinct document paired with itself (dropout makes the two views differ)."""
    return [Pair(doc, doc) for doc in dict.fromkeys(documents)]


def crop_pairs(
    documents: Sequence[str], seed: int = 0, *, min_words: int = CROP_MIN_WORDS, ratio: tuple[float, float] = CROP_RATIO
) -> list[Pair]:
    """Two independent random word spans of each document (each ``ratio`` of its words, at least ``min_words``).

    Documents shorter than ``2 * min_words`` words are skipped. Spans are
    redrawn a few times when they come out identical.
    """
    rng = random.Random(seed)
    pairs = []
    for doc in documents:
        words = doc.split()
        n = len(words)
        if n < 2 * min_words:
            continue
        low = max(min_words, math.ceil(ratio[0] * n))
        high = max(low, int(ratio[1] * n))

        def span() -> str:
            length = rng.randint(low, high)
            start = rng.randint(0, n - length)
            return " ".join(words[start : start + length])

        first, second = span(), span()
        for _ in range(10):
            if first != second:
                break
            second = span()
        pairs.append(Pair(first, second))
    if not pairs:
        raise BadInputError(f"no document has the {2 * min_words} words two crops need")
    return pairs


# -- batching ---------------------------------------------------------------
def no_duplicate_batches(pairs: Sequence[Pair], batch_size: int, seed: int = 0) -> list[list[int]]:
    """Indices of ``pairs`` in shuffled batches in which no text occurs in two rows.

    Greedy, like sentence-transformers' ``NoDuplicatesBatchSampler``: rows go
    in shuffled order into the current batch unless one of their texts is
    already there (they then wait for a later batch). Every row lands in
    exactly one batch; batches of fewer than two rows (no negatives) are dropped.
    """
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    batches: list[list[int]] = []
    while order:
        batch: list[int] = []
        seen: set[str] = set()
        left: list[int] = []
        for i in order:
            texts = pairs[i].texts()
            if len(batch) < batch_size and not texts & seen:
                batch.append(i)
                seen |= texts
            else:
                left.append(i)
        batches.append(batch)
        order = left
    return [batch for batch in batches if len(batch) >= 2]
