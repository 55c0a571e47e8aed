"""Queries drawn from a collection's own documents, and hard negatives mined by its own search.

No labels: each pseudo-query is a piece of one document (its title, one of
its sentences, or a span of a sentence, as in the inverse cloze task) and
that document, with the sentence taken out, is its positive. A hard
negative is a document the collection's hybrid search ranks high for the
query, from ranks ``ranks`` (the very top is left alone: it is too often a
second right answer), never the source and never a document holding the
query's words verbatim.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Sequence

from tqdm import tqdm

from retriever.search.sentences import sentence_spans
from training.pairs import Pair

MIN_QUERY_WORDS, MAX_QUERY_WORDS = 4, 40
SPAN_WORDS = (4, 12)
KEEP_SENTENCE = 0.1  # ICT: the query's sentence stays in the positive this often


@dataclass(frozen=True)
class PseudoQuery:
    """A query cut from document ``doc_id``, and that document's text as its positive."""

    query: str
    doc_id: str
    positive: str
    kind: str  # "title", "sentence" or "span"


def draw_queries(
    documents: Iterable[tuple[str, str, str]], seed: int = 0, *, title_share: float = 0.2, span_share: float = 0.5
) -> list[PseudoQuery]:
    """One pseudo-query for each ``(doc_id, title, text)`` that can give one (in the given order).

    A title of 3 or more words is the query ``title_share`` of the time; else
    a sentence of ``MIN_QUERY_WORDS``-``MAX_QUERY_WORDS`` words, cut to a span of
    ``SPAN_WORDS`` words ``span_share`` of the time, and taken out of the
    positive unless the draw keeps it (``KEEP_SENTENCE``).
    """
    rng = random.Random(seed)
    drawn = []
    for doc_id, title, text in documents:
        if title and len(title.split()) >= 3 and rng.random() < title_share:
            drawn.append(PseudoQuery(title.strip(), doc_id, text, "title"))
            continue
        sentences = sentence_spans(text)
        spans = [(a, b) for a, b in sentences if MIN_QUERY_WORDS <= len(text[a:b].split()) <= MAX_QUERY_WORDS]
        if not spans or len(sentences) < 2:
            continue
        start, end = rng.choice(spans)
        sentence = text[start:end].strip()
        positive = text if rng.random() < KEEP_SENTENCE else (text[:start] + text[end:]).strip()
        words = sentence.split()
        if rng.random() < span_share and len(words) > SPAN_WORDS[1]:
            length = rng.randint(*SPAN_WORDS)
            first = rng.randint(0, len(words) - length)
            drawn.append(PseudoQuery(" ".join(words[first : first + length]), doc_id, positive, "span"))
        else:
            drawn.append(PseudoQuery(sentence, doc_id, positive, "sentence"))
    return drawn


def mine_pairs(
    collection,
    queries: Sequence[PseudoQuery],
    seed: int = 0,
    *,
    ranks: tuple[int, int] = (3, 30),
    mode: str = "hybrid",
    progress: bool = True,
) -> list[Pair]:
    """``Pair(query, positive, hard negative)`` for each query, the negative from the collection's ``mode`` search.

    A query whose search gives no usable negative gets a random other document
    (a batch trains with hard negatives only when every row has one).
    """
    rng = random.Random(seed)
    everyone = sorted(collection.ids())
    pairs = []
    for pq in tqdm(queries, desc="mining negatives", unit="query", disable=not progress):
        hits = collection.search(pq.query, k=ranks[1], mode=mode, evidence="none")
        needle = pq.query.lower()
        usable = [h for h in hits[ranks[0] - 1 :] if h.id != pq.doc_id and needle not in h.text.lower()]
        negative = None
        for _ in range(5):
            chosen = collection.get(rng.choice(usable).id if usable else rng.choice(everyone))
            if chosen is not None and chosen.id != pq.doc_id and chosen.text.strip():
                negative = chosen.text
                break
            usable = []  # the search's pick was unusable: draw from everyone
        pairs.append(Pair(pq.query, pq.positive, negative))
    return pairs
