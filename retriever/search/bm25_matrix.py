"""BM25 over one in-memory sparse matrix of term counts: the whole collection at once.

Not the search path (that is ``retriever.search.bm25``, over each segment's
postings). This form rebuilds cheaply from ``(id, terms)`` pairs, so training
mines hard negatives with it, and the tests use it as an independent
reference for the segment scores. It needs scipy, which the search path does
not import (a command-line search is faster without it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from retriever.errors import CorruptCollectionError
from retriever.search.bm25 import DEFAULT_B, DEFAULT_K1
from retriever.storage.atomic import atomic_write


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
                (
                    np.concatenate(rows) if rows else np.zeros(0, np.int64),
                    np.concatenate(cols) if cols else np.zeros(0, np.int64),
                ),
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
