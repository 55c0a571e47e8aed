"""Segments: the immutable units a collection's documents live in.

A segment is a folder under ``segments/`` holding a batch of documents and
their chunks, written once and never changed. Its files, their shapes and
the format's versions are defined in ``segment_format``; this module writes
them (``SegmentData.write``) and opens them checked (``Segment``).

Everything but the FAISS index is a NumPy array opened memory-mapped, so a
reader pays for what it touches and processes share pages.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from retriever.errors import CorruptCollectionError
from retriever.storage.atomic import fsync_dir, write_durably
from retriever.storage.builders import IndexBuilder, TermAnalyzer
from retriever.storage.integrity import record_checksums, write_checksum_beside
from retriever.storage.paging import read_ahead, read_at_random, read_ranges_ahead
from retriever.storage.postings import Postings
from retriever.storage.range_bounds import RangeBounds
from retriever.storage.segment_files import (
    check_array,
    check_deletions,
    check_index,
    check_keys,
    check_meta,
    check_offsets,
    check_spans,
    own_folder,
    regular_file,
)
from retriever.storage.segment_format import (
    BYTE_SPANS,
    CHUNK_TERMS,
    COMPRESSED,
    DOC_CHUNKS,
    DOC_LENGTHS,
    FORMAT_VERSION,
    INDEX_FILE,
    INT8_FILES,
    KEYS,
    META,
    POSTINGS,
    RANGE_ARRAYS,
    RANGES,
    ROWS_FILE,
    SPANS,
    TERMS,
    TEXT,
    TEXT_OFFSETS,
    VERSION_KEY,
    deletion_file,
    part_file,
)
from retriever.storage.vector_files import read_vectors, write_vectors

SEGMENTS_DIR = "segments"


def segment_name(number: int) -> str:
    return f"s{number:06d}"


@dataclass
class SegmentData:
    """A segment's content in memory, ready to write.

    Attributes:
        keys: ``(docs,)`` int64 catalog keys, ascending.
        text_blob: Every document's UTF-8 text, concatenated (bytes, or a uint8 array).
        text_offsets: ``(docs + 1,)`` byte offsets into ``text_blob``.
        doc_chunks: ``(docs + 1,)`` first chunk row of each document.
        spans: ``(chunks, 2)`` character spans; ``byte_spans`` the same in bytes.
        vectors: ``(chunks, dim)`` float32 unit vectors.
        postings: Document-level BM25 postings with term frequencies.
        doc_lengths: ``(docs,)`` analysed lengths.
        chunk_terms: Chunk-level incidence over the same vocabulary.
    """

    keys: np.ndarray
    text_blob: bytes | np.ndarray
    text_offsets: np.ndarray
    doc_chunks: np.ndarray
    spans: np.ndarray
    byte_spans: np.ndarray
    vectors: np.ndarray
    postings: Postings
    doc_lengths: np.ndarray
    chunk_terms: Postings

    @classmethod
    def from_documents(
        cls,
        keys: Sequence[int],
        titles: Sequence[str],
        texts: Sequence[str],
        spans: Sequence[Sequence[tuple[int, int]]],
        vectors: np.ndarray,
        analyzer: TermAnalyzer,
    ) -> "SegmentData":
        """Analyse and lay out documents whose chunks were embedded into ``vectors`` (in order)."""
        encoded = [text.encode("utf-8") for text in texts]
        text_offsets = offsets_of([len(b) for b in encoded])
        doc_chunks = offsets_of([len(s) for s in spans])
        char_spans = np.asarray([span for doc in spans for span in doc], dtype=np.int64).reshape(-1, 2)
        byte_spans = np.empty_like(char_spans)
        vocabulary: dict[str, int] = {}
        doc_parts, chunk_parts, lengths = [], [], []
        for d, (title, text) in enumerate(zip(titles, texts)):
            lo, hi = doc_chunks[d], doc_chunks[d + 1]
            byte_spans[lo:hi] = _byte_offsets(text, char_spans[lo:hi])
            offsets, terms = analyzer.positions(text)
            ids = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in terms), np.int64, len(terms))
            title_terms = analyzer(title) if title else []
            title_ids = np.fromiter(
                (vocabulary.setdefault(t, len(vocabulary)) for t in title_terms), np.int64, len(title_terms)
            )
            doc_parts.append((np.concatenate([title_ids, ids]), d))
            lengths.append(len(title_ids) + len(ids))
            bounds = np.searchsorted(offsets, char_spans[lo:hi])  # (chunks, 2): first and past-last term
            for c, (a, b) in enumerate(bounds):
                chunk_parts.append((ids[a:b], lo + c))
        terms = list(vocabulary)
        return cls(
            keys=np.asarray(keys, dtype=np.int64),
            text_blob=b"".join(encoded),
            text_offsets=text_offsets,
            doc_chunks=doc_chunks,
            spans=char_spans,
            byte_spans=byte_spans,
            vectors=np.ascontiguousarray(vectors, dtype=np.float32),
            postings=_postings(terms, doc_parts, counts=True),
            doc_lengths=np.asarray(lengths, dtype=np.float32),
            chunk_terms=_postings(terms, chunk_parts, counts=False),
        )

    def write(self, folder: Path, index_builder: IndexBuilder) -> dict:
        """Write the segment into a new ``folder``, fsynced; ``segment.json`` last. Returns its meta.

        ``index_builder`` builds the vector index (``retriever.search.vector_index.IndexPolicy``, handed in
        by the caller); the files are those of ``segment_format`` at ``FORMAT_VERSION``.
        """
        folder = Path(folder)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        built = index_builder.build(self.vectors)
        write_vectors(built, folder, write_durably)
        arrays = {
            KEYS: self.keys,
            DOC_CHUNKS: self.doc_chunks,
            SPANS: self.spans,
            BYTE_SPANS: self.byte_spans,
            TEXT_OFFSETS: self.text_offsets,
            DOC_LENGTHS: self.doc_lengths,
            part_file(POSTINGS, "indptr"): self.postings.indptr,
            part_file(POSTINGS, "rows"): self.postings.rows,
            part_file(POSTINGS, "tf"): self.postings.tf,
            part_file(CHUNK_TERMS, "indptr"): self.chunk_terms.indptr,
            part_file(CHUNK_TERMS, "rows"): self.chunk_terms.rows,
        }
        bounds = RangeBounds.build(self.postings, self.doc_lengths)
        arrays.update({part_file(RANGES, name): getattr(bounds, name) for name in RANGE_ARRAYS})
        for name, array in arrays.items():
            write_durably(folder / name, lambda path, a=array: np.save(path, a, allow_pickle=False))
        write_durably(folder / TEXT, lambda path: path.write_bytes(self.text_blob))
        terms = "\n".join(self.postings.terms)
        write_durably(folder / TERMS, lambda path: path.write_text(terms, encoding="utf-8"))
        meta = {
            "docs": int(len(self.keys)),
            "chunks": int(len(self.spans)),
            "dim": int(self.vectors.shape[1]),
            "index": built.info,
            "bm25_ranges": {"rows_per_range": bounds.rows_per_range},
            "checksums": record_checksums(folder),
            VERSION_KEY: FORMAT_VERSION,
        }
        write_durably(folder / META, lambda path: path.write_text(json.dumps(meta), encoding="utf-8"))
        fsync_dir(folder)
        fsync_dir(folder.parent)
        return meta


class Segment:
    """A written segment, opened read-only and memory-mapped.

    Raises:
        FileNotFoundError: The folder is gone (merged away by a newer generation).
        CorruptCollectionError: A file is missing or unreadable.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.name = self.folder.name
        try:
            own_folder(self.folder)
            meta_path = regular_file(self.folder / META)
        except FileNotFoundError:
            raise FileNotFoundError(self.folder / META) from None
        try:
            self.meta = check_meta(json.loads(meta_path.read_text(encoding="utf-8")), meta_path)
            self._open_arrays()
        except FileNotFoundError:
            if not self.folder.exists():
                raise
            raise CorruptCollectionError(f"segment {self.folder} is incomplete") from None
        except (OSError, ValueError, EOFError) as exc:  # EOFError: an empty .npy file
            raise CorruptCollectionError(f"cannot read segment {self.folder}: {exc}") from None
        index_path = regular_file(self.folder / INDEX_FILE)
        if self.meta["index"].get("type") in COMPRESSED:
            regular_file(self.folder / ROWS_FILE)
            for name in INT8_FILES if self.meta["index"].get("int8") else ():
                regular_file(self.folder / name)
        self.index = read_vectors(self.folder, self.meta["index"])
        check_index(self.index, self.n_chunks, int(self.meta["dim"]), index_path)

    def _open_arrays(self) -> None:
        """Map every array and read the vocabulary, each checked against ``segment.json``'s counts."""
        docs, chunks = self.n_docs, self.n_chunks
        self.keys = self._array(KEYS, (docs,), "i")
        self.doc_chunks = self._array(DOC_CHUNKS, (docs + 1,), "i")
        self.spans = self._array(SPANS, (chunks, 2), "i")
        self.byte_spans = self._array(BYTE_SPANS, (chunks, 2), "i")
        self.text_offsets = self._array(TEXT_OFFSETS, (docs + 1,), "i")
        self.doc_lengths = self._array(DOC_LENGTHS, (docs,), "f")
        text_path = regular_file(self.folder / TEXT)
        self.text_blob = (
            np.asarray(np.memmap(text_path, dtype=np.uint8, mode="r"))
            if text_path.stat().st_size
            else np.zeros(0, np.uint8)
        )
        read_at_random(self.text_blob)  # a search reads the texts of its ten hits, anywhere in the file
        check_keys(self.keys, self.folder / KEYS)
        check_offsets(self.doc_chunks, chunks, self.folder / DOC_CHUNKS)
        check_offsets(self.text_offsets, len(self.text_blob), self.folder / TEXT_OFFSETS)
        check_spans(self.byte_spans, np.diff(self.text_offsets)[self.chunk_doc], self.folder / BYTE_SPANS)
        # opened now, not on first use: a merge may remove the folder while this reader lives
        text = regular_file(self.folder / TERMS).read_text(encoding="utf-8")
        self.terms = text.split("\n") if text else []
        self.postings = self._postings(POSTINGS, True)
        self.chunk_terms = self._postings(CHUNK_TERMS, False)
        self._stored_bounds = self._open_range_bounds()

    def _postings(self, group: str, counts: bool) -> Postings:
        """The postings ``<group>.*.npy``, their offsets checked against the vocabulary."""
        indptr = self._array(part_file(group, "indptr"), (len(self.terms) + 1,), "i")
        rows = self._array(part_file(group, "rows"), (int(indptr[-1]),), "i")
        check_offsets(indptr, len(rows), self.folder / part_file(group, "indptr"))
        tf = self._array(part_file(group, "tf"), rows.shape, "f") if counts else None
        return Postings(self.terms, indptr, rows, tf)

    def _array(self, name: str, shape: tuple[int, ...], kind: str) -> np.ndarray:
        """The file ``name`` memory-mapped, checked to have ``shape`` and a dtype of ``kind``."""
        path = regular_file(self.folder / name)
        # a plain ndarray over the mapping: pages still shared, slicing without memmap's per-slice cost
        return check_array(np.asarray(np.load(path, mmap_mode="r", allow_pickle=False)), shape, kind, path)

    @property
    def n_docs(self) -> int:
        return int(self.meta["docs"])

    @property
    def n_chunks(self) -> int:
        return int(self.meta["chunks"])

    @property
    def index_type(self) -> str:
        return self.meta["index"]["type"]

    @cached_property
    def range_bounds(self) -> RangeBounds:
        """BM25's per-term bounds over row ranges (``bm25_ranges``): the segment's own files, or, for a
        segment written before they were, computed on first use."""
        return self._stored_bounds or RangeBounds.build(self.postings, self.doc_lengths)

    def _open_range_bounds(self) -> RangeBounds | None:
        """The ``bm25_ranges.*.npy`` files, memory-mapped and checked; ``None`` when the segment has none."""
        settings = self.meta.get("bm25_ranges")
        if not settings:
            return None
        per_range = int(settings["rows_per_range"])
        indptr = self._array(part_file(RANGES, "indptr"), (len(self.terms) + 1,), "i")
        entries = int(indptr[-1])
        starts = self._array(part_file(RANGES, "starts"), (entries + 1,), "i")
        check_offsets(indptr, entries, self.folder / part_file(RANGES, "indptr"))
        check_offsets(starts, len(self.postings.rows), self.folder / part_file(RANGES, "starts"))
        return RangeBounds(
            rows_per_range=per_range,
            n_ranges=-(-self.n_docs // per_range),
            indptr=indptr,
            ranges=self._array(part_file(RANGES, "ranges"), (entries,), "i"),
            starts=starts,
            max_tf=self._array(part_file(RANGES, "max_tf"), (entries,), "f"),
            min_length=self._array(part_file(RANGES, "min_length"), (entries,), "f"),
        )

    @cached_property
    def chunk_doc(self) -> np.ndarray:
        """``(chunks,)`` document row of each chunk row."""
        return np.repeat(np.arange(self.n_docs, dtype=np.int64), np.diff(self.doc_chunks))

    def read_ahead(self, vectors: bool = True) -> None:
        """Start reading the texts (and with ``vectors`` the rescoring rows) whole, before a pass over every
        document: they are otherwise paged in a page at a time, as a search reads them."""
        read_ahead(self.text_blob)
        if vectors and self.index.rows is not None:
            read_ahead(self.index.rows)

    def text(self, row: int) -> str:
        """The whole text of document ``row``."""
        lo, hi = self.text_offsets[row], self.text_offsets[row + 1]
        return self.text_blob[lo:hi].tobytes().decode("utf-8")

    def chunks_text(self, first: int, last: int) -> tuple[str, int]:
        """The text of chunk rows ``first`` to ``last`` of one document, read alone, and its character offset."""
        lo, hi = self._text_bytes(first, last)
        return bytes(self.text_blob[lo:hi]).decode("utf-8"), int(self.spans[first][0])

    def context_chunks(self, chunk: int) -> tuple[int, int]:
        """``(first, last)``: chunk row ``chunk`` and the rows either side of it in its document."""
        doc_row = self.chunk_doc[chunk]
        return max(int(self.doc_chunks[doc_row]), chunk - 1), min(int(self.doc_chunks[doc_row + 1]) - 1, chunk + 1)

    def read_texts_ahead(self, chunk_ranges: Sequence[tuple[int, int]]) -> None:
        """Start reading the texts of ``(first, last)`` chunk rows now, all at once (``paging.read_ranges_ahead``):
        a search's hits read theirs from a mapped ``text.bin`` larger than the page cache."""
        if isinstance(self.text_blob, np.ndarray):
            read_ranges_ahead(self.text_blob, [self._text_bytes(first, last) for first, last in chunk_ranges])

    def _text_bytes(self, first: int, last: int) -> tuple[int, int]:
        """Byte range in ``text_blob`` of chunk rows ``first`` to ``last`` of one document."""
        base = int(self.text_offsets[self.chunk_doc[first]])
        return base + int(self.byte_spans[first][0]), base + int(self.byte_spans[first : last + 1, 1].max())

    def rows_of(self, keys: np.ndarray) -> np.ndarray:
        """Document rows holding ``keys`` (sorted int64); -1 where this segment has none."""
        if len(self.keys) == 0:
            return np.full(len(keys), -1, dtype=np.int64)
        rows = np.searchsorted(self.keys, keys)
        found = rows < len(self.keys)
        found[found] = self.keys[rows[found]] == keys[found]
        return np.where(found, rows, -1)

    def deleted(self, generation: int) -> np.ndarray:
        """Deleted document rows as of ``generation`` (0: none), sorted int64; ``FileNotFoundError`` where none."""
        if not generation:
            return np.zeros(0, dtype=np.int64)
        path = regular_file(self.folder / deletion_file(generation))
        try:
            return check_deletions(np.load(path, allow_pickle=False), self.n_docs, path)
        except FileNotFoundError:
            raise  # a writer's clean-up took it since the check: the reader loads the newer generation
        except (OSError, ValueError) as exc:
            raise CorruptCollectionError(f"cannot read {path}: {exc}") from None


def write_deletions(folder: Path, generation: int, rows: np.ndarray) -> None:
    """Publish a segment's deleted rows as of ``generation`` (fsynced)."""
    path = Path(folder) / deletion_file(generation)
    write_durably(path, lambda p: np.save(p, np.asarray(np.unique(rows), dtype=np.int64), allow_pickle=False))
    write_checksum_beside(path)
    fsync_dir(Path(folder))


def _postings(terms: list[str], parts: list[tuple[np.ndarray, int]], counts: bool) -> Postings:
    """Postings from ``(term ids, row)`` pairs, one per row."""
    term_ids = np.concatenate([ids for ids, _ in parts]) if parts else np.zeros(0, np.int64)
    rows = np.repeat(np.asarray([row for _, row in parts], dtype=np.int64), [len(ids) for ids, _ in parts])
    return Postings.from_pairs(terms, term_ids, rows, None, counts)


def offsets_of(lengths: Sequence[int]) -> np.ndarray:
    """``(len(lengths) + 1,)`` int64 offsets: 0, then the running sums of ``lengths``."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths, dtype=np.int64), out=offsets[1:])
    return offsets


def _byte_offsets(text: str, char_spans: np.ndarray) -> np.ndarray:
    """``char_spans`` of ``text`` (chunks, 2) as UTF-8 byte offsets (chunks, 2), int64.

    Each character is encoded once: the byte offset of every distinct
    boundary is the previous one's plus the bytes between them, so the cost
    is linear in ``len(text)`` plus the spans' sort.
    """
    if text.isascii():
        return np.array(char_spans, dtype=np.int64)
    spans = np.asarray(char_spans, dtype=np.int64)
    bounds, where = np.unique(spans, return_inverse=True)
    byte_bounds = np.empty(len(bounds), dtype=np.int64)
    done, at = 0, 0
    for i, bound in enumerate(bounds.tolist()):
        done += len(text[at:bound].encode("utf-8"))
        byte_bounds[i], at = done, bound
    return byte_bounds[where.reshape(spans.shape)]
