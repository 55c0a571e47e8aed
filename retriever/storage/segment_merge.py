"""Merging segments: one segment's data from the live documents of several, ordered by key.

Nothing is embedded or analysed again: vectors come back from each
segment's index (or its rescoring rows), postings are remapped onto one
vocabulary with dead rows dropped. ``merging.MergePolicy`` says when.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from retriever.search import vector_index
from retriever.search.bm25 import Postings
from retriever.storage.segment import Segment, SegmentData, offsets_of


def merge(segments: Sequence[Segment], deleted: Sequence[np.ndarray], vectors: bool = True) -> SegmentData:
    """One segment holding the live documents of ``segments``, ordered by key.

    Term statistics are carried over as they are (no text is analysed again).
    ``vectors=False`` leaves the vectors zero, for a caller that embeds them again.
    """
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

    blobs, text_lengths, chunk_counts = [], [], []
    new_row_of = [np.full(s.n_docs, -1, dtype=np.int64) for s in segments]
    new_chunk_of = [np.full(s.n_chunks, -1, dtype=np.int64) for s in segments]
    next_chunk = 0
    for new_row, (i, row) in enumerate(refs):
        segment = segments[i]
        lo, hi = int(segment.text_offsets[row]), int(segment.text_offsets[row + 1])
        blobs.append(segment.text_blob[lo:hi].tobytes())
        text_lengths.append(hi - lo)
        c_lo, c_hi = int(segment.doc_chunks[row]), int(segment.doc_chunks[row + 1])
        chunk_counts.append(c_hi - c_lo)
        new_row_of[i][row] = new_row
        new_chunk_of[i][c_lo:c_hi] = np.arange(next_chunk, next_chunk + c_hi - c_lo)
        next_chunk += c_hi - c_lo
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
            merged_vectors[at] = vector_index.reconstruct(segment.index, kept)
        kept_docs = np.flatnonzero(new_row_of[i] >= 0)
        merged_lengths[new_row_of[i][kept_docs]] = segment.doc_lengths[kept_docs]
    postings, chunk_terms = _merge_postings(segments, new_row_of, new_chunk_of)
    return SegmentData(
        keys=keys,
        text_blob=b"".join(blobs),
        text_offsets=offsets_of(text_lengths),
        doc_chunks=offsets_of(chunk_counts),
        spans=merged_spans,
        byte_spans=merged_byte_spans,
        vectors=merged_vectors,
        postings=postings,
        doc_lengths=merged_lengths,
        chunk_terms=chunk_terms,
    )


def _merge_postings(segments, new_row_of, new_chunk_of) -> tuple[Postings, Postings]:
    """Both postings of the merged segment: term ids mapped into one vocabulary, dead rows dropped."""
    vocabulary: dict[str, int] = {}
    doc_parts, chunk_parts = [], []
    for segment, row_map, chunk_map in zip(segments, new_row_of, new_chunk_of):
        term_map = np.asarray([vocabulary.setdefault(t, len(vocabulary)) for t in segment.terms], dtype=np.int64)
        for postings, mapping, parts in ((segment.postings, row_map, doc_parts), (segment.chunk_terms, chunk_map, chunk_parts)):
            term_ids, rows, tf = postings.pairs()
            new_rows = mapping[rows]
            keep = new_rows >= 0
            parts.append((term_map[term_ids[keep]], new_rows[keep], None if tf is None else np.asarray(tf)[keep]))
    terms = list(vocabulary)

    def combine(parts, counts):
        term_ids = np.concatenate([p[0] for p in parts])
        rows = np.concatenate([p[1] for p in parts])
        tf = np.concatenate([p[2] for p in parts]) if counts else None
        return Postings.from_pairs(terms, term_ids, rows, tf, counts)

    return combine(doc_parts, True), combine(chunk_parts, False)
