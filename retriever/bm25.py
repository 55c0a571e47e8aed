"""BM25 over whole documents (title and text as one field), Lucene scoring.

The keyword side of a collection. Text is analysed the Lucene way: lower-cased
word tokens, the 33 Lucene English stopwords dropped (bm25s' list), Porter
stemming (PyStemmer). Term counts live in a sparse matrix, one row per
document, saved per generation next to the vector file so both commit
together; a write removes and appends rows without re-reading the others.

Scores follow Lucene's BM25: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``
and ``tf / (tf + k1 * (1 - b + b * dl / avgdl))``, summed over query tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from retriever.atomic import atomic_write
from retriever.errors import CorruptCollectionError

DEFAULT_K1 = 0.9
DEFAULT_B = 0.4
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


class Analyzer:
    """Text to index terms: lower-case word tokens, stopwords out, Porter stems.

    Args:
        stemmer: A Snowball algorithm name for PyStemmer (default ``"porter"``),
            or ``None`` for no stemming.
        stopwords: ``"en"`` for Lucene's English list (default) or ``None``.
    """

    def __init__(self, stemmer: str | None = "porter", stopwords: str | None = "en") -> None:
        import Stemmer
        from bm25s.stopwords import STOPWORDS_EN

        self.settings = {"stemmer": stemmer, "stopwords": stopwords}
        self._stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        self._stopwords = frozenset(STOPWORDS_EN) if stopwords == "en" else frozenset()

    def __call__(self, text: str) -> list[str]:
        tokens = [t for t in _TOKEN.findall(text.lower()) if t not in self._stopwords]
        return self._stemmer.stemWords(tokens) if self._stemmer else tokens

    def matches(self, text: str, terms: set[str]) -> list[tuple[int, str]]:
        """``(character offset, term)`` of every token of ``text`` that analyses to one of ``terms``."""
        words = [(m.start(), m.group().lower()) for m in _TOKEN.finditer(text)]
        unique = list({word for _, word in words if word not in self._stopwords})
        stems = dict(zip(unique, self._stemmer.stemWords(unique) if self._stemmer else unique))
        return [(offset, stems[word]) for offset, word in words if stems.get(word) in terms]

    def positions(self, text: str) -> tuple[np.ndarray, list[str]]:
        """Every index term of ``text`` with the character offset of its word.

        The terms are exactly ``self(text)``; offsets are int64 positions in ``text``.
        """
        lowered = text.lower()
        if len(lowered) == len(text):
            words = [(m.start(), m.group()) for m in _TOKEN.finditer(lowered)]
        else:  # a few characters grow when lower-cased: find words in the original instead
            words = [(m.start(), m.group().lower()) for m in _TOKEN.finditer(text)]
            words = [(offset, w) for offset, word in words for w in _TOKEN.findall(word)]
        kept = [(offset, word) for offset, word in words if word not in self._stopwords]
        tokens = [word for _, word in kept]
        terms = self._stemmer.stemWords(tokens) if self._stemmer else tokens
        return np.fromiter((offset for offset, _ in kept), dtype=np.int64, count=len(kept)), terms


@dataclass
class Postings:
    """Term-major postings of one segment: term ``t`` occurs in ``rows[indptr[t]:indptr[t + 1]]``.

    Attributes:
        terms: The segment's vocabulary; a term's id is its position.
        indptr: ``(len(terms) + 1,)`` int64 offsets into ``rows`` and ``tf``.
        rows: Document (or chunk) rows, ascending within each term, int32.
        tf: Term frequency of each posting, float32 (``None`` for incidence only).
    """

    terms: list[str]
    indptr: np.ndarray
    rows: np.ndarray
    tf: np.ndarray | None

    @cached_property
    def vocabulary(self) -> dict[str, int]:
        return {term: i for i, term in enumerate(self.terms)}

    def of(self, term: str) -> tuple[np.ndarray, np.ndarray | None]:
        """``(rows, tf)`` of ``term``; empty arrays when it does not occur."""
        t = self.vocabulary.get(term)
        if t is None:
            return self.rows[:0], (None if self.tf is None else self.tf[:0])
        lo, hi = self.indptr[t], self.indptr[t + 1]
        return self.rows[lo:hi], (None if self.tf is None else self.tf[lo:hi])

    @classmethod
    def from_pairs(
        cls, terms: list[str], term_ids: np.ndarray, rows: np.ndarray, tf: np.ndarray | None, counts: bool = True
    ) -> "Postings":
        """Postings from ``(term, row[, tf])`` triples; repeated pairs add up."""
        n_rows = int(rows.max()) + 1 if len(rows) else 0
        key = term_ids.astype(np.int64) * max(n_rows, 1) + rows
        unique, inverse = np.unique(key, return_inverse=True)
        weights = np.ones(len(key), np.float32) if tf is None else tf.astype(np.float32)
        freq = np.bincount(inverse, weights=weights, minlength=len(unique)).astype(np.float32)
        unique_terms = unique // max(n_rows, 1)
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(unique_terms, minlength=len(terms)), out=indptr[1:])
        return cls(terms, indptr, (unique % max(n_rows, 1)).astype(np.int32), freq if counts else None)

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(term_ids, rows, tf)``: every posting, the inverse of ``from_pairs``."""
        term_ids = np.repeat(np.arange(len(self.terms), dtype=np.int64), np.diff(self.indptr))
        return term_ids, self.rows.astype(np.int64), self.tf


def bm25_top(
    parts: Sequence[tuple[Postings, np.ndarray, np.ndarray | None, np.ndarray | None]],
    query_terms: Sequence[str],
    k: int,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    *,
    totals: tuple[int, float],
) -> list[tuple[int, int, float]]:
    """BM25 over several segments with collection-wide statistics.

    Document frequencies, the document count and the average length are
    those of the live documents of all ``parts`` together, so scores equal
    those of one index built from the live documents alone.

    Args:
        parts: Per segment ``(postings, doc_lengths, live, allowed)``: ``live``
            masks deleted rows out of the statistics and the results, ``allowed``
            (a filter) out of the results only; either may be ``None``.
        query_terms: The analysed query (repeated terms count again).
        totals: ``(live documents, their summed length)`` over all parts (a
            view keeps them: ``View.n_live_docs``, ``View.live_length``).

    Returns:
        Up to ``k`` ``(part index, row, score)`` with score > 0, best first.
    """
    n_docs, total_length = totals
    if n_docs == 0:
        return []
    avgdl = max(total_length / n_docs, 1e-9)
    multiplicity: dict[str, int] = {}
    for term in query_terms:
        multiplicity[term] = multiplicity.get(term, 0) + 1
    terms = list(multiplicity)
    # per part, the live postings of every query term at once, term after term
    gathered: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
    df = np.zeros(len(terms), dtype=np.int64)
    for postings, _, live, _ in parts:
        rows, tf, term_of = _query_postings(postings, terms)
        if live is not None and len(rows):
            keep = live[rows]
            rows, tf, term_of = rows[keep], tf[keep], term_of[keep]
        df += np.bincount(term_of, minlength=len(terms))
        gathered.append((rows, tf, term_of) if len(rows) else None)
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    weight = np.asarray([multiplicity[t] for t in terms]) * idf
    scores = [None] * len(parts)
    for i, postings_of_query in enumerate(gathered):
        if postings_of_query is None:
            continue
        rows, tf, term_of = postings_of_query
        lengths = parts[i][1]
        norm = k1 * (1 - b + b * lengths[rows] / avgdl)
        scores[i] = np.zeros(len(lengths), dtype=np.float32)
        # unbuffered and in posting order: float32 sums as adding term by term gives
        np.add.at(scores[i], rows, (weight[term_of] * tf / (tf + norm)).astype(np.float32))
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # score, part, row
    for i, part_scores in enumerate(scores):
        if part_scores is None:
            continue
        allowed = parts[i][3]
        if allowed is not None:
            part_scores = np.where(allowed, part_scores, 0.0)
        rows = np.flatnonzero(part_scores > 0)
        if len(rows) > k:
            rows = np.sort(rows[np.argpartition(-part_scores[rows], k - 1)[:k]])
        found.append((part_scores[rows], np.full(len(rows), i), rows))
    if not found:
        return []
    all_scores, part_of, rows = (np.concatenate(column) for column in zip(*found))
    best = np.argsort(-all_scores, kind="stable")[:k]  # ties keep segment order, then row order
    return list(zip(part_of[best].tolist(), rows[best].tolist(), all_scores[best].tolist()))


def _query_postings(postings: Postings, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, tf, term index)`` of every posting of ``terms`` in one segment, grouped by term."""
    spans = []
    for j, term in enumerate(terms):
        t = postings.vocabulary.get(term)
        if t is not None:
            spans.append((j, int(postings.indptr[t]), int(postings.indptr[t + 1])))
    if not spans:
        return postings.rows[:0], postings.tf[:0], np.zeros(0, dtype=np.int64)
    rows = np.concatenate([postings.rows[lo:hi] for _, lo, hi in spans])
    tf = np.concatenate([postings.tf[lo:hi] for _, lo, hi in spans])
    term_of = np.repeat(np.asarray([j for j, _, _ in spans]), [hi - lo for _, lo, hi in spans])
    return rows, tf, term_of


def _pack(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array plus offsets (no pickle in the file)."""
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def _unpack(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    raw = blob.tobytes()
    return [raw[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(len(offsets) - 1)]


@dataclass
class BM25Index:
    """Term counts of every document, one sparse row each.

    Attributes:
        doc_ids: Document id of each row.
        counts: ``(len(doc_ids), len(terms))`` CSR matrix of term frequencies.
        terms: The vocabulary; a term's id is its position (append-only).
        k1, b: BM25 parameters.
    """

    doc_ids: list[str]
    counts: sp.csr_matrix
    terms: list[str]
    k1: float = DEFAULT_K1
    b: float = DEFAULT_B

    @classmethod
    def empty(cls, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> "BM25Index":
        return cls([], sp.csr_matrix((0, 0), dtype=np.float32), [], k1, b)

    def __len__(self) -> int:
        return len(self.doc_ids)

    @cached_property
    def vocabulary(self) -> dict[str, int]:
        return {term: i for i, term in enumerate(self.terms)}

    @cached_property
    def row_of(self) -> dict[str, int]:
        return {doc_id: i for i, doc_id in enumerate(self.doc_ids)}

    def updated(self, remove: Iterable[str], add: Sequence[tuple[str, list[str]]]) -> "BM25Index":
        """A new index without the ``remove`` ids and with ``add`` ``(id, terms)`` rows."""
        keep_mask = np.ones(len(self.doc_ids), dtype=bool)
        keep_mask[[self.row_of[doc_id] for doc_id in remove if doc_id in self.row_of]] = False
        keep = np.flatnonzero(keep_mask)
        terms = list(self.terms)
        vocabulary = dict(self.vocabulary)
        rows, cols, vals = [], [], []
        for row, (_, doc_terms) in enumerate(add):
            ids, freqs = np.unique([vocabulary.setdefault(t, len(vocabulary)) for t in doc_terms], return_counts=True)
            rows.append(np.full(len(ids), row, dtype=np.int64))
            cols.append(ids)
            vals.append(freqs.astype(np.float32))
        terms.extend(list(vocabulary)[len(terms) :])
        width = len(terms)
        kept = self.counts[keep] if len(keep) else sp.csr_matrix((0, self.counts.shape[1]), dtype=np.float32)
        kept = sp.csr_matrix((kept.data, kept.indices, kept.indptr), shape=(kept.shape[0], width))
        added = sp.csr_matrix(
            (
                np.concatenate(vals) if vals else np.zeros(0, np.float32),
                (np.concatenate(rows) if rows else np.zeros(0, np.int64), np.concatenate(cols) if cols else np.zeros(0, np.int64)),
            ),
            shape=(len(add), width),
        )
        doc_ids = [self.doc_ids[i] for i in keep] + [doc_id for doc_id, _ in add]
        return BM25Index(doc_ids, sp.vstack([kept, added], format="csr"), terms, self.k1, self.b)

    @cached_property
    def _weights(self) -> sp.csc_matrix:
        """BM25 weight of every (document, term) pair, column-major for query lookups."""
        n_docs = len(self.doc_ids)
        counts = self.counts
        if n_docs == 0:
            return sp.csc_matrix(counts.shape, dtype=np.float32)
        lengths = np.asarray(counts.sum(axis=1)).ravel()
        avgdl = max(lengths.mean(), 1e-9)
        df = np.bincount(counts.indices, minlength=counts.shape[1])
        idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = self.k1 * (1 - self.b + self.b * lengths / avgdl)
        row_of_entry = np.repeat(np.arange(n_docs), np.diff(counts.indptr))
        tf = counts.data
        data = idf[counts.indices] * tf / (tf + norm[row_of_entry])
        return sp.csr_matrix((data.astype(np.float32), counts.indices, counts.indptr), shape=counts.shape).tocsc()

    def scores(self, query_terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every row for the analysed query (repeated terms count again)."""
        ids = [self.vocabulary[t] for t in query_terms if t in self.vocabulary]
        if not ids or not self.doc_ids:
            return np.zeros(len(self.doc_ids), dtype=np.float32)
        return np.asarray(self._weights[:, ids].sum(axis=1)).ravel()

    def top(self, query_terms: Sequence[str], k: int, allowed: set[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(doc_id, score)`` among documents matching a query term."""
        scores = self.scores(query_terms)
        if allowed is not None:
            mask = np.zeros(len(scores), dtype=bool)
            mask[[self.row_of[d] for d in allowed if d in self.row_of]] = True
            scores = np.where(mask, scores, 0.0)
        candidates = np.flatnonzero(scores > 0)
        if len(candidates) > k:
            candidates = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        return [(self.doc_ids[i], float(scores[i])) for i in order]

    # -- files ------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write atomically as ``.npz`` (no pickled objects)."""
        id_blob, id_offsets = _pack(self.doc_ids)
        term_blob, term_offsets = _pack(self.terms)
        counts = self.counts

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as handle:
                np.savez(
                    handle,
                    id_blob=id_blob,
                    id_offsets=id_offsets,
                    term_blob=term_blob,
                    term_offsets=term_offsets,
                    indptr=counts.indptr,
                    indices=counts.indices,
                    data=counts.data,
                    params=np.array([self.k1, self.b], dtype=np.float64),
                )

        atomic_write(path, write)

    @classmethod
    def load(cls, path: Path) -> "BM25Index":
        """Read a saved index; raises ``FileNotFoundError`` if it is gone."""
        try:
            with np.load(path, allow_pickle=False) as f:
                doc_ids = _unpack(f["id_blob"], f["id_offsets"])
                terms = _unpack(f["term_blob"], f["term_offsets"])
                counts = sp.csr_matrix((f["data"], f["indices"], f["indptr"]), shape=(len(doc_ids), len(terms)))
                k1, b = (float(x) for x in f["params"])
        except FileNotFoundError:
            raise
        except (OSError, KeyError, ValueError) as exc:
            raise CorruptCollectionError(f"cannot read BM25 index {path}: {exc}") from None
        return cls(doc_ids, counts, terms, k1, b)
