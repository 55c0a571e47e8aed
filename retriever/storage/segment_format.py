"""The on-disk format of a segment: every file's name, what it holds, and the format's versions.

The one definition of a segment folder (as Lucene's ``IndexFileNames`` and
``SegmentInfos`` define an index's files): other modules name files only
through the constants here. ``docs/design/segments.md`` points at this table.

A segment is a folder ``segments/sNNNNNN/`` written once and never changed
(deletion files aside). Shapes count the segment's documents (``docs``), chunk
rows (``chunks``), vector dimension (``dim``), vocabulary (``terms``) and
postings. "crc" says whether ``segment.json`` records the file's CRC-32
(``integrity.record_checksums``); "since" is the segment format version that
first always holds the file (``-``: every version)::

    file                      shape, dtype                  written by                 crc  since
    segment.json              JSON: docs, chunks, dim,      segment.SegmentData.write  no   -
                              index (type, nlist, nprobe,   (last; int8_upgrade
                              rescore, int8), bm25_ranges,  rewrites it whole)
                              checksums, format_version
    keys.npy                  (docs,) int64, ascending      segment / writer (rekey)   yes  -
    doc_chunks.npy            (docs + 1,) int64 offsets     segment                    yes  -
    spans.npy                 (chunks, 2) int64 chars       segment                    yes  -
    byte_spans.npy            (chunks, 2) int64 bytes       segment                    yes  -
    text.bin                  UTF-8 texts, concatenated     segment                    yes  -
    text_offsets.npy          (docs + 1,) int64 offsets     segment                    yes  -
    doc_lengths.npy           (docs,) float32               segment                    yes  -
    terms.txt                 terms, one a line, UTF-8      segment                    yes  -
    postings.indptr.npy       (terms + 1,) int64            segment                    yes  -
    postings.rows.npy         (postings,) int32 doc rows    segment                    yes  -
    postings.tf.npy           (postings,) float32           segment                    yes  -
    chunk_terms.indptr.npy    (terms + 1,) int64            segment                    yes  -
    chunk_terms.rows.npy      (chunk postings,) int32       segment                    yes  -
    bm25_ranges.indptr.npy    (terms + 1,) int64            segment (range_bounds)     yes  2
    bm25_ranges.ranges.npy    (entries,) int64              segment (range_bounds)     yes  2
    bm25_ranges.starts.npy    (entries + 1,) int64          segment (range_bounds)     yes  2
    bm25_ranges.max_tf.npy    (entries,) float32            segment (range_bounds)     yes  2
    bm25_ranges.min_length.npy (entries,) float32           segment (range_bounds)     yes  2
    vectors.faiss             FAISS index of chunks x dim   vector_files               yes  -
    vectors.npy               (chunks, dim) float32         vector_files (compressed)  yes  -
    vectors.int8.npy          (chunks, dim) int8            int8_files (compressed)    yes  2
    vectors.scale.npy         (dim,) float32                int8_files (compressed)    yes  2
    deleted.<g>.npy           (deleted,) int64 doc rows     segment.write_deletions    own  -
    deleted.<g>.npy.crc32     that file's CRC-32            integrity                  no   -

"compressed": only beside an index of type ``ivf-rabitq`` or ``rabitq``
(``COMPRESSED``); "own": a deletion file's CRC-32 is in the ``.crc32`` file
beside it, as deletion files are added after ``segment.json``.

Versions (``segment.json``'s ``format_version``; a file without one is
version 1). Readers accept ``OLDEST_READABLE`` to ``FORMAT_VERSION``:

- 1: segments written before the version was recorded. The BM25 range
  bounds are present where ``segment.json`` has ``bm25_ranges`` (computed
  on first use otherwise), int8 rows where its index has ``"int8": true``
  (``semsearch upgrade`` writes them).
- 2 (written now): ``format_version`` recorded; the range bounds always,
  and int8 rows beside every compressed index.

A newer version is refused with a ``FormatVersionError`` naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retriever.errors import CorruptCollectionError, FormatVersionError

FORMAT_VERSION = 2  # the version this code writes, and the newest it reads
OLDEST_READABLE = 1  # a segment.json without a version
VERSION_KEY = "format_version"

META = "segment.json"  # counts, index type and tuning, checksums, format version: written last
KEYS = "keys.npy"
DOC_CHUNKS = "doc_chunks.npy"
SPANS = "spans.npy"
BYTE_SPANS = "byte_spans.npy"
TEXT = "text.bin"
TEXT_OFFSETS = "text_offsets.npy"
DOC_LENGTHS = "doc_lengths.npy"
TERMS = "terms.txt"
INDEX_FILE = "vectors.faiss"
ROWS_FILE = "vectors.npy"  # float32 rows that rescore compressed codes
INT8_CODES_FILE = "vectors.int8.npy"  # (chunks, dim) int8
INT8_SCALE_FILE = "vectors.scale.npy"  # (dim,) float32: a code times its dimension's scale is the float32 value
INT8_FILES = (INT8_CODES_FILE, INT8_SCALE_FILE)
CHECKSUM_SUFFIX = ".crc32"  # a deletion file's CRC-32 is in <deletion file>.crc32 beside it

# groups of arrays stored as <group>.<array>.npy
POSTINGS = "postings"  # term -> (document row, term frequency)
CHUNK_TERMS = "chunk_terms"  # term -> chunk rows holding it (keyword snippets)
RANGES = "bm25_ranges"  # per term and range of rows: largest tf, shortest document
POSTINGS_ARRAYS = ("indptr", "rows", "tf")
CHUNK_TERMS_ARRAYS = ("indptr", "rows")
RANGE_ARRAYS = ("indptr", "ranges", "starts", "max_tf", "min_length")

# vector index types, as segment.json's index "type" names them
FLAT = "flat"
IVF = "ivf"
IVF_RABITQ = "ivf-rabitq"
RABITQ = "rabitq"  # codes of every row, no lists: read in segments written before small ones got lists
COMPRESSED = (IVF_RABITQ, RABITQ)  # types whose codes are rescored from float32 rows (``ROWS_FILE``)


def part_file(group: str, array: str) -> str:
    """The file of one array of a group: ``part_file(POSTINGS, "rows")`` is ``postings.rows.npy``."""
    return f"{group}.{array}.npy"


def deletion_file(generation: int) -> str:
    """The name of a segment's deleted rows as of ``generation``."""
    return f"deleted.{generation}.npy"


def deletion_files(generation: int) -> set[str]:
    """The files a segment keeps for its deletions as of ``generation``: the rows and their checksum."""
    return {deletion_file(generation), deletion_file(generation) + CHECKSUM_SUFFIX}


def format_version(meta: dict[str, Any], path: Path) -> int:
    """The format version ``segment.json`` (read from ``path``) records: 1 where it records none.

    Raises:
        CorruptCollectionError: The version is no positive integer.
        FormatVersionError: The version is newer than ``FORMAT_VERSION`` (written by a newer semsearch).
    """
    version = meta.get(VERSION_KEY, OLDEST_READABLE)
    if not isinstance(version, int) or isinstance(version, bool) or version < OLDEST_READABLE:
        raise CorruptCollectionError(f"{path} has segment format version {version!r}, which is no version")
    if version > FORMAT_VERSION:
        raise FormatVersionError(
            f"{path} has segment format version {version}; this semsearch reads versions "
            f"{OLDEST_READABLE} to {FORMAT_VERSION}: upgrade semsearch to read it"
        )
    return version
