"""A segment's int8 rescoring rows on disk: ``vectors.int8.npy`` and ``vectors.scale.npy`` (``segment_format``).

Beside compressed codes, the int8 copies of the float32 rows rank the codes'
candidates before any float32 row is read (``retriever.search.int8_rows``
quantises rows into them and scores with them). Read memory-mapped, a page
at a time, and read ahead into the page cache in the background as every
search reads them at random (``paging.read_ahead_in_background``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retriever.errors import CorruptCollectionError
from retriever.storage.paging import read_ahead_in_background, read_at_random
from retriever.storage.segment_format import INT8_CODES_FILE, INT8_SCALE_FILE


@dataclass(frozen=True)
class Int8Rows:
    """``codes`` ``(n, dim)`` int8 and ``scale`` ``(dim,)`` float32, so that ``codes * scale`` ~ the rows."""

    codes: np.ndarray
    scale: np.ndarray


def write_int8_rows(rows: Int8Rows, folder: Path, write_file) -> None:
    """Write both files into ``folder`` through ``write_file(path, fill)`` (``atomic.write_durably``)."""
    folder = Path(folder)
    write_file(folder / INT8_CODES_FILE, lambda path: np.save(path, rows.codes, allow_pickle=False))
    write_file(folder / INT8_SCALE_FILE, lambda path: np.save(path, rows.scale, allow_pickle=False))


def read_int8_rows(folder: Path, n: int, dim: int) -> Int8Rows:
    """The int8 rows in ``folder``, memory-mapped, read a page at a time, and read ahead in the background.

    Raises:
        FileNotFoundError: A file is gone (a merge removed the segment).
        CorruptCollectionError: A file is unreadable or not of shape ``(n, dim)`` / ``(dim,)``.
    """
    folder = Path(folder)
    codes = _load(folder / INT8_CODES_FILE, np.int8, (n, dim))
    scale = _load(folder / INT8_SCALE_FILE, np.float32, (dim,))
    read_ahead_in_background(read_at_random(codes))
    return Int8Rows(codes, np.array(scale))


def _load(path: Path, dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The array at ``path``, memory-mapped, checked to have ``dtype`` and ``shape``."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise CorruptCollectionError(f"cannot read int8 rescoring rows {path}: {exc}") from None
    if array.dtype != dtype or array.shape != shape:
        raise CorruptCollectionError(f"{path} holds {array.dtype} {array.shape}, not {np.dtype(dtype)} {shape}")
    return np.asarray(array)
