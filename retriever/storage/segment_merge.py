"""Merging segments: one segment's data from the live documents of several, ordered by key.

Nothing is embedded or analysed again: vectors come back from each
segment's index (or its rescoring rows), postings are remapped onto one
vocabulary with dead rows dropped. ``merging.MergePolicy`` says when.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from retriever.storage.postings import Postings
from retriever.storage.segment import Segment, SegmentData, offsets_of
from retriever.storage.vector_files import reconstruct


def merge(segments: Sequence[Segment], deleted: Sequence[np.ndarray], vectors: bool = True) -> SegmentData:
    """One segment holding the live documents of ``segments``, ordered by key.

    Term statistics are carried over as they are (no text is analysed again).
    ``vectors=False`` leaves the vectors zero, for a caller that embeds them again.
    """
    for segment in segments:
        segment.read_ahead(vectors)
    key_parts, doc_refs = [], []
    for i, (segment, gone) in enumerate(zip(segments, deleted)):
        live = np.ones(segment.n_docs, dtype=bool)
        live[gone] = False
        rows = np.flatnonzero(live)
        key_parts.append(np.asarray(segment.keys[rows]))
        doc_refs.append(np.stack([np.full(len(rows), i), rows], axis=1))
    keys = np.concatenate(key_parts) if key_parts else np.zeros(0, np.int64)
    refs = np.concatenate(doc_refs) if doc_refs else np.zeros((0, 2), np.int64)
    order = np.argsort(keys, kind="stable")
    keys, refs = keys[order], refs[order]

    text_lengths, chunk_counts = [], []
    new_row_of = [np.full(s.n_docs, -1, dtype=np.int64) for s in segments]
    new_chunk_of = [np.full(s.n_chunks, -1, dtype=np.int64) for s in segments]
    next_chunk = 0
    for new_row, (i, row) in enumerate(refs):
        segment = segments[i]
        text_lengths.append(int(segment.text_offsets[row + 1] - segment.text_offsets[row]))
        c_lo, c_hi = int(segment.doc_chunks[row]), int(segment.doc_chunks[row + 1])
        chunk_counts.append(c_hi - c_lo)
        new_row_of[i][row] = new_row
        new_chunk_of[i][c_lo:c_hi] = np.arange(next_chunk, next_chunk + c_hi - c_lo)
        next_chunk += c_hi - c_lo
    text_offsets = offsets_of(text_lengths)
    text = _texts(segments, refs, text_offsets)
    merged_spans = np.zeros((next_chunk, 2), np.int64)
    merged_byte_spans = np.zeros((next_chunk, 2), np.int64)
    merged_vectors = np.zeros((next_chunk, segments[0].index.d), np.float32)
    merged_lengths = np.zeros(len(keys), np.float32)
    for i, segment in enumerate(segments):
        kept = np.flatnonzero(new_chunk_of[i] >= 0)
        at = new_chunk_of[i][kept]
        merged_spans[at] = segment.spans[kept]
        merged_byte_spans[at] = segment.byte_spans[kept]
        if vectors:
            merged_vectors[at] = reconstruct(segment.index, kept, read_rows=False)  # read ahead above
        kept_docs = np.flatnonzero(new_row_of[i] >= 0)
        merged_lengths[new_row_of[i][kept_docs]] = segment.doc_lengths[kept_docs]
    postings, chunk_terms = _merge_postings(segments, new_row_of, new_chunk_of)
    return SegmentData(
        keys=keys,
        text_blob=text,
        text_offsets=text_offsets,
        doc_chunks=offsets_of(chunk_counts),
        spans=merged_spans,
        byte_spans=merged_byte_spans,
        vectors=merged_vectors,
        postings=postings,
        doc_lengths=merged_lengths,
        chunk_terms=chunk_terms,
    )


def _texts(segments: Sequence[Segment], refs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The documents ``refs`` (``(segment, row)`` each) texts, one after another at ``offsets``, as uint8:
    filled in place (the texts listed, then joined, held them twice)."""
    text = np.empty(int(offsets[-1]), np.uint8)
    for (i, row), at, end in zip(refs.tolist(), offsets[:-1].tolist(), offsets[1:].tolist()):
        lo = int(segments[i].text_offsets[row])
        text[at:end] = segments[i].text_blob[lo : lo + end - at]
    return text


def _merge_postings(segments, new_row_of, new_chunk_of) -> tuple[Postings, Postings]:
    """Both postings of the merged segment: term ids mapped into one vocabulary, dead rows dropped."""
    vocabulary: dict[str, int] = {}
    term_maps = [
        np.asarray([vocabulary.setdefault(t, len(vocabulary)) for t in s.terms], dtype=np.int64) for s in segments
    ]
    terms = list(vocabulary)
    documents = _remapped(terms, [(s.postings, m, rows) for s, m, rows in zip(segments, term_maps, new_row_of)])
    chunks = _remapped(terms, [(s.chunk_terms, m, rows) for s, m, rows in zip(segments, term_maps, new_chunk_of)])
    return documents, chunks


def _remapped(terms: list[str], parts: Sequence[tuple[Postings, np.ndarray, np.ndarray]]) -> Postings:
    """One ``Postings`` over ``terms`` from each part's ``(postings, term map, row map)``, rows the map sends
    to -1 dropped. A row lives in one segment, so no pair repeats: the pairs are sorted by one int64 key
    (term, row), each part's taken apart first and its temporaries freed, so that a merge of a million
    chunks holds a few bytes a posting beyond its result (it held about ten times that)."""
    keys, freqs = [], []
    for postings, term_map, row_map in parts:
        term_ids = np.repeat(term_map, np.diff(postings.indptr))
        rows = row_map[postings.rows]
        keep = rows >= 0
        keys.append((term_ids[keep] << 32) | rows[keep])
        del term_ids, rows
        if postings.tf is not None:
            freqs.append(np.asarray(postings.tf)[keep])
    key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    del keys
    if freqs:
        order = np.argsort(key, kind="stable")
        tf = np.concatenate(freqs)[order]
        key = key[order]
        del order
    else:
        key.sort()
        tf = None
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    indptr[1:] = np.searchsorted(key >> 32, np.arange(len(terms)), side="right")
    return Postings(terms, indptr, (key & 0xFFFFFFFF).astype(np.int32), tf)
