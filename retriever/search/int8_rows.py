"""int8 copies of a segment's float32 rows: the tier that ranks candidates before any float32 row is read.

Compressed codes (1-bit RaBitQ) pass a few hundred candidates a segment to
rescoring. Read from the float32 rows (1,536 bytes a 384-d row), each is a
disk read once a collection outgrows the page cache. The same rows in int8,
scaled per dimension so that the largest value of each becomes 127, take a
quarter of that, which the page cache can hold: the candidates are ranked by
their int8 inner products, and only the best few are read in float32 for
their exact scores (the int8 error on real rows is measured by ``python -m
benchmarks.int8_rows``; docs/benchmarks.md). As every search reads them at random, a reader that
opens a segment starts reading its int8 rows into the page cache in the
background (``paging.read_ahead_in_background``); its memory holds none of
them, and the kernel may drop them again under pressure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retriever.errors import CorruptCollectionError
from retriever.storage.paging import read_ahead_in_background, read_at_random

CODES_FILE = "vectors.int8.npy"  # (n, dim) int8
SCALE_FILE = "vectors.scale.npy"  # (dim,) float32: a code times its dimension's scale is the float32 value
FILES = (CODES_FILE, SCALE_FILE)
_BATCH = 8_192  # rows quantized or converted at a time: a memory-mapped segment is never read whole into memory


@dataclass(frozen=True)
class Int8Rows:
    """``codes`` ``(n, dim)`` int8 and ``scale`` ``(dim,)`` float32, so that ``codes * scale`` ~ the rows."""

    codes: np.ndarray
    scale: np.ndarray

    @classmethod
    def quantize(cls, rows: np.ndarray) -> "Int8Rows":
        """int8 codes of ``rows`` ``(n, dim)`` float32, each dimension scaled by its largest absolute value."""
        n, dim = rows.shape
        peak = np.zeros(dim, dtype=np.float32)
        for start in range(0, n, _BATCH):
            np.maximum(peak, np.abs(rows[start : start + _BATCH]).max(axis=0, initial=0.0), out=peak)
        scale = np.where(peak > 0, peak / 127, 1.0).astype(np.float32)
        codes = np.empty((n, dim), dtype=np.int8)
        for start in range(0, n, _BATCH):
            batch = np.rint(rows[start : start + _BATCH] / scale)
            codes[start : start + _BATCH] = np.clip(batch, -127, 127)
        return cls(codes, scale)

    def scores(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """``(len(ids),)`` float32 estimates of ``rows[ids] @ query`` (``query`` ``(dim,)`` float32), converted
        ``_BATCH`` rows at a time (a filtered search may rank every row it lets through)."""
        scaled = query * self.scale
        if len(ids) <= _BATCH:
            return self.codes[ids].astype(np.float32) @ scaled
        return np.concatenate([self.codes[ids[at : at + _BATCH]].astype(np.float32) @ scaled
                               for at in range(0, len(ids), _BATCH)])

    def write(self, folder: Path, write_file) -> None:
        """Write both files into ``folder`` through ``write_file(path, fill)`` (``atomic.write_durably``)."""
        folder = Path(folder)
        write_file(folder / CODES_FILE, lambda path: np.save(path, self.codes, allow_pickle=False))
        write_file(folder / SCALE_FILE, lambda path: np.save(path, self.scale, allow_pickle=False))

    @classmethod
    def read(cls, folder: Path, n: int, dim: int) -> "Int8Rows":
        """The int8 rows in ``folder``, memory-mapped, read a page at a time, and read ahead in the background.

        Raises:
            FileNotFoundError: A file is gone (a merge removed the segment).
            CorruptCollectionError: A file is unreadable or not of shape ``(n, dim)`` / ``(dim,)``.
        """
        folder = Path(folder)
        codes = _load(folder / CODES_FILE, np.int8, (n, dim))
        scale = _load(folder / SCALE_FILE, np.float32, (dim,))
        read_ahead_in_background(read_at_random(codes))
        return cls(codes, np.array(scale))


def _load(path: Path, dtype, shape: tuple[int, ...]) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise CorruptCollectionError(f"cannot read int8 rescoring rows {path}: {exc}") from None
    if array.dtype != dtype or array.shape != shape:
        raise CorruptCollectionError(f"{path} holds {array.dtype} {array.shape}, not {np.dtype(dtype)} {shape}")
    return np.asarray(array)
