"""Training pairs from a collection's judgments: each judged query with each document that answers it.

A pair is the query text, the chunk of an answering document that the
collection's model matches best to it (chunked and title-prefixed as the
collection embeds it), and a hard negative: a document judged not to answer
the query, else one of the collection's own hybrid hits for it at ranks
``NEGATIVE_RANKS`` that no judgment calls answering. Only the queries given
are read, so a fold's pairs never hold a query it is scored on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from retriever.judgments.records import JudgedSet
from training.pairs import Pair

NEGATIVE_RANKS = (3, 30)  # hybrid ranks (1-based, inclusive) a mined negative is drawn from


@dataclass(frozen=True)
class PairPlan:
    """How pairs are made.

    Attributes:
        hard_negatives: Give every pair a hard negative (default True); off: in-batch negatives only.
        mine: Draw negatives from the collection's hybrid hits where no document is judged not to answer.
        seed: Seeds the choice of negatives.
    """

    hard_negatives: bool = True
    mine: bool = True
    seed: int = 0


def judged_pairs(collection, judged: JudgedSet, plan: PairPlan = PairPlan()) -> list[Pair]:
    """One ``Pair`` per (query, answering document) of ``judged`` whose document the collection holds.

    Args:
        collection (retriever.Collection): Read for documents, chunks, its model and its hybrid search.
        judged: The queries and judgments to train on (grade > 0 answers, 0 does not).
        plan: Negatives and seed.

    Returns:
        Pairs in query order; with ``plan.hard_negatives``, only the pairs that found a negative (every pair
        then has one, so no batch trains without).
    """
    rng = random.Random(plan.seed)
    answers = {
        key: [doc_id for doc_id, grade in judged.qrels.get(key, {}).items() if grade > 0] for key in judged.queries
    }
    answers = {key: ids for key, ids in answers.items() if ids}
    chunks = best_chunks(collection, {key: judged.queries[key] for key in answers}, answers)
    pairs: list[Pair] = []
    for key, ids in answers.items():
        text = judged.queries[key]
        negatives = _negatives(collection, text, judged.qrels[key], plan) if plan.hard_negatives else []
        for doc_id in ids:
            chunk = chunks.get((key, doc_id))
            if chunk is None or (plan.hard_negatives and not negatives):
                continue
            pairs.append(Pair(text, chunk, rng.choice(negatives)) if plan.hard_negatives else Pair(text, chunk))
    return pairs


def best_chunks(collection, queries: dict[str, str], answers: dict[str, list[str]]) -> dict[tuple[str, str], str]:
    """For each (query key, document id) of ``answers``, the embedded text of the document's chunk that the
    collection's model matches best to the query; documents the collection no longer holds are left out.

    Every chunk of a document of several chunks is embedded once (as the collection embeds passages), every
    query once.
    """
    split = {}
    for doc_id in {doc_id for ids in answers.values() for doc_id in ids}:
        document = collection.get(doc_id)
        found = collection.chunker.split(document) if document is not None else []
        if found:
            split[doc_id] = found
    several = sorted(doc_id for doc_id, found in split.items() if len(found) > 1)
    rows, token_ids = {}, []
    for doc_id in several:
        rows[doc_id] = (len(token_ids), len(token_ids) + len(split[doc_id]))
        token_ids += [chunk.token_ids for chunk in split[doc_id]]
    vectors = collection.embedder.embed_token_ids(token_ids) if token_ids else None
    keys = [key for key in answers if any(doc_id in rows for doc_id in answers[key])]
    query_vectors = dict(zip(keys, collection.embed([queries[key] for key in keys]))) if keys else {}
    chosen = {}
    for key, ids in answers.items():
        for doc_id in ids:
            if doc_id not in split:
                continue
            if doc_id not in rows:
                chosen[(key, doc_id)] = split[doc_id][0].embed_text
                continue
            first, last = rows[doc_id]
            best = int(np.argmax(vectors[first:last] @ query_vectors[key]))
            chosen[(key, doc_id)] = split[doc_id][best].embed_text
    return chosen


def _negatives(collection, query: str, grades: dict[str, int], plan: PairPlan) -> list[str]:
    """First chunks of the documents judged not to answer ``query``; else (with ``plan.mine``) of its hybrid hits
    at ``NEGATIVE_RANKS`` that no judgment calls answering."""
    judged_not = [doc_id for doc_id, grade in grades.items() if grade == 0]
    if not judged_not and plan.mine:
        first, last = NEGATIVE_RANKS
        hits = collection.search(query, k=last, mode="hybrid", evidence="none")[first - 1 :]
        judged_not = [hit.id for hit in hits if grades.get(hit.id, 0) == 0]
    texts = []
    for doc_id in judged_not:
        document = collection.get(doc_id)
        chunks = collection.chunker.split(document) if document is not None else []
        if chunks:
            texts.append(chunks[0].embed_text)
    return texts
