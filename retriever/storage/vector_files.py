"""A segment's vector files: the FAISS index (``vectors.faiss``) and, beside compressed codes, the float32
rescoring rows (``vectors.npy``) and their int8 copies (``int8_files``), as ``segment_format`` names them.

``retriever.search.vector_index`` builds and searches a ``VectorIndex``;
this module writes one into a segment folder, maps it back, checked
against its index, and reads stored vectors back out of it (``reconstruct``:
for exact scans and merges). Indexes are memory-mapped when read, so processes serving
one collection share pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from retriever.errors import CorruptCollectionError
from retriever.storage.int8_files import Int8Rows, read_int8_rows, write_int8_rows
from retriever.storage.paging import gather_rows, is_pass, read_ahead_in_background, read_at_random
from retriever.storage.segment_format import COMPRESSED, FLAT, INDEX_FILE, INT8_FILES, IVF, IVF_RABITQ, ROWS_FILE

# FAISS's fast-scan search keeping each query's best codes in a heap: the same hits as its default, sooner
# (docs/benchmarks.md)
FAST_SCAN_IMPLEMENTATION = 10


@dataclass
class VectorIndex:
    """A segment's vectors as searched: the FAISS index, what its build recorded of it (``segment.json``'s
    ``index``), and, beside compressed codes, the ``(n, dim)`` float32 rows that rescore candidates
    (``None`` when the index holds float32 vectors itself) and their int8 copies that rank them first
    (``None`` in segments written before int8 copies were)."""

    index: faiss.Index
    info: dict
    rows: np.ndarray | None = None
    int8: Int8Rows | None = None

    def __post_init__(self) -> None:
        if isinstance(self.index, faiss.IndexIVFFastScan):
            self.index.implem = FAST_SCAN_IMPLEMENTATION

    @property
    def d(self) -> int:
        return int(self.index.d)

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    @property
    def files(self) -> tuple[str, ...]:
        """The files ``write_vectors`` writes it to."""
        int8 = () if self.int8 is None else INT8_FILES
        return ((INDEX_FILE,) if self.rows is None else (INDEX_FILE, ROWS_FILE)) + int8


def write_vectors(built: VectorIndex, folder: Path, write_file) -> None:
    """Write ``built`` into ``folder``: the FAISS index, and beside compressed codes their float32 rows
    and int8 copies, each through ``write_file(path, fill)`` (``atomic.write_durably``)."""
    folder = Path(folder)
    write_file(folder / INDEX_FILE, lambda path: faiss.write_index(built.index, str(path)))
    if built.rows is None:
        return
    rows = np.ascontiguousarray(built.rows, dtype=np.float32)
    write_file(folder / ROWS_FILE, lambda path: np.save(path, rows, allow_pickle=False))
    if built.int8 is not None:
        write_int8_rows(built.int8, folder, write_file)


def read_vectors(folder: Path, info: dict) -> VectorIndex:
    """Memory-map a segment's index (and, beside compressed codes, its float32 rows); IVF gets its tuned
    ``nprobe``, float32 IVF a direct map.

    Raises:
        FileNotFoundError: The folder is gone (a merge removed the segment).
        CorruptCollectionError: A file exists but is not a readable index or rows of its shape.
    """
    folder = Path(folder)
    path = folder / INDEX_FILE
    if not path.exists():
        raise FileNotFoundError(path)
    kind = info.get("type", FLAT)
    flags = faiss.IO_FLAG_MMAP_IFC if kind == FLAT else faiss.IO_FLAG_MMAP
    try:
        index = faiss.read_index(str(path), flags | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError as exc:
        if not path.exists():
            raise FileNotFoundError(path) from None
        raise CorruptCollectionError(f"cannot read vector index {path}: {exc}") from None
    rows = None
    if kind in (IVF, IVF_RABITQ):
        index.nprobe = int(info["nprobe"])
    if kind == IVF and index.direct_map.type == faiss.DirectMap.NoMap:
        index.make_direct_map()
    int8 = None
    if kind in COMPRESSED:
        rows = _read_rows(folder / ROWS_FILE, index)
        int8 = read_int8_rows(folder, index.ntotal, index.d) if info.get("int8") else None
    return VectorIndex(index, dict(info), rows, int8)


def reconstruct(built: VectorIndex, rows: np.ndarray, read_rows: bool = True) -> np.ndarray:
    """Vectors of ``rows``, ``(len(rows), dim)`` float32 (``read_rows``: see ``paging.gather_rows``)."""
    index = built.index
    if len(rows) == 0:
        return np.zeros((0, index.d), dtype=np.float32)
    if built.rows is not None:
        gathered = gather_rows(built.rows, rows, read_rows)
        if built.int8 is not None and is_pass(built.rows, rows):  # it pushed other pages out of the cache:
            read_ahead_in_background(built.int8.codes)  # read back the tier every search reads
        return gathered
    if isinstance(index, faiss.IndexFlat):
        return faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)[rows]
    return index.reconstruct_batch(np.ascontiguousarray(rows, dtype=np.int64))


def _read_rows(path: Path, index: faiss.Index) -> np.ndarray:
    """The ``(ntotal, d)`` float32 rescoring rows at ``path``, memory-mapped."""
    if not path.exists():
        raise FileNotFoundError(path)
    try:
        rows = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise  # its folder was removed since the check
    except (OSError, ValueError, EOFError) as exc:
        raise CorruptCollectionError(f"cannot read rescoring vectors {path}: {exc}") from None
    if rows.dtype != np.float32 or rows.shape != (index.ntotal, index.d):
        raise CorruptCollectionError(
            f"{path} holds {rows.dtype} {rows.shape}, not float32 ({index.ntotal}, {index.d}) as its index"
        )
    return read_at_random(np.asarray(rows))  # a plain ndarray over the mapping: pages shared, no memmap overhead
