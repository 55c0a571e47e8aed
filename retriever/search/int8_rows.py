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

The files are written and read by ``retriever.storage.int8_files``; this
module quantises rows into them and scores with them.
"""

from __future__ import annotations

import numpy as np

from retriever.storage.int8_files import Int8Rows

_BATCH = 8_192  # rows quantized or converted at a time: a memory-mapped segment is never read whole into memory


def quantize(rows: np.ndarray) -> Int8Rows:
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
    return Int8Rows(codes, scale)


def scores(int8: Int8Rows, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``(len(ids),)`` float32 estimates of ``rows[ids] @ query`` (``query`` ``(dim,)`` float32), converted
    ``_BATCH`` rows at a time (a filtered search may rank every row it lets through)."""
    scaled = query * int8.scale
    if len(ids) <= _BATCH:
        return int8.codes[ids].astype(np.float32) @ scaled
    return np.concatenate(
        [int8.codes[ids[at : at + _BATCH]].astype(np.float32) @ scaled for at in range(0, len(ids), _BATCH)]
    )
