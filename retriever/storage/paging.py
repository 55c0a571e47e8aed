"""How the kernel pages a segment's memory-mapped files in: a page at a time where searches read at random,
the whole range at once before a pass that reads all of it.

Linux reads around every page fault of a file mapping, as far as the disk's
readahead (``/sys/block/*/queue/read_ahead_kb``: 8 MB on some virtual disks).
That suits a pass over a file and wastes a search that reads ten texts or a
few hundred rescoring rows scattered over a file larger than the page cache:
each such fault reads megabytes (``python -m benchmarks.paging`` searches
with the two pagings in alternation; docs/benchmarks.md).

The kernel reads at most its readahead window (``max(read_ahead_kb,
max_sectors_kb)``) of one ``MADV_WILLNEED``, however long the range: a
whole-file hint reads the start of the file and nothing more.
``read_ahead`` therefore advises a range in steps of ``READ_AHEAD_STEP``.

The calls are hints (``madvise``): an array that is not a file mapping, or a
system without ``madvise``, is left as it is, and no error comes of them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import sys
import threading

import numpy as np

_PAGE = mmap.PAGESIZE
_RANDOM = getattr(mmap, "MADV_RANDOM", None)
_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)
_NORMAL = getattr(mmap, "MADV_NORMAL", None)
# Linux 5.14's advice number where Python's mmap does not name it (3.11 does not); elsewhere none
_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform.startswith("linux") else None)


def _libc_function(name: str, third_argument):
    """libc's ``name(addr, length, third_argument)`` returning an int, or ``None`` where there is none to call."""
    try:
        call = getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True), name)
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_void_p, ctypes.c_size_t, third_argument]
    call.restype = ctypes.c_int
    return call


_HINTS = (_RANDOM, _WILLNEED, _NORMAL)
_MADVISE = _libc_function("madvise", ctypes.c_int) if None not in _HINTS else None  # (addr, length, advice)
_MINCORE = _libc_function("mincore", ctypes.c_void_p)  # (addr, length, vector of a byte a page)
WHOLE_READ_SHARE = 8  # gathering at least this share of an array's rows reads all of it ahead first
READ_AHEAD_STEP = 1 << 19  # bytes one read-ahead hint asks for: below any disk's readahead window
RESIDENT_SAMPLE = 4  # ranges ``read_ranges_ahead`` checks are in memory before it hints


def read_at_random(array: np.ndarray) -> np.ndarray:
    """Fault ``array``'s pages in one at a time, without reading around them (for searches' scattered
    reads); returns ``array``."""
    _advise(array, _RANDOM)
    return array


def read_ahead(array: np.ndarray) -> None:
    """Start reading all of ``array``'s pages now (before a pass over the whole of a ``read_at_random`` array).
    Returns once every read is queued, which on a busy disk may be as long as the reads take."""
    _advise(array, _WILLNEED, step=READ_AHEAD_STEP)


def read_ranges_ahead(array: np.ndarray, ranges) -> None:
    """Start reading the pages of ``array[start:stop]`` for each ``(start, stop)`` of ``ranges`` (along its first
    axis) now, all at once: a search that then reads scattered rows or texts of a file larger than the page
    cache waits about as long as the slowest read, not the sum of them. Nothing is asked for where the
    first ``RESIDENT_SAMPLE`` ranges are in memory already: a file the page cache holds needs no hints, and
    a hint costs a few times what reading a cached row does."""
    ranges = [(int(first), int(stop)) for first, stop in ranges]
    if _MADVISE is None or not array.size or not is_mapped(array) or not ranges:
        return
    start, row_bytes = array.ctypes.data, array.strides[0]
    sample = ranges[:RESIDENT_SAMPLE]
    if all(_resident(start + first * row_bytes, (stop - first) * row_bytes) for first, stop in sample):
        return
    for first, stop in ranges:
        begin = start + first * row_bytes
        length = (stop - first) * row_bytes
        if length > 0:
            page = begin - begin % _PAGE
            _MADVISE(page, begin + length - page, _WILLNEED)


def read_rows_ahead(array: np.ndarray, rows) -> None:
    """``read_ranges_ahead`` for single ``rows`` of ``array``."""
    read_ranges_ahead(array, ((row, row + 1) for row in np.asarray(rows, dtype=np.int64).tolist()))


def _resident(address: int, nbytes: int) -> bool:
    """Whether every page of the ``nbytes`` at ``address`` is in memory; ``True`` where that cannot be told.
    Without numpy, which costs more a call: a search asks this of a few rows a segment."""
    flags = _mincore(address, nbytes)
    return flags is None or all(flag & 1 for flag in flags)


def _page_flags(address: int, nbytes: int) -> np.ndarray | None:
    """``(pages,)`` bool: which pages of the ``nbytes`` at ``address`` are in memory, or ``None`` where that
    cannot be told."""
    flags = _mincore(address, nbytes)
    return None if flags is None else (np.frombuffer(flags, dtype=np.uint8) & 1).astype(bool)


def _mincore(address: int, nbytes: int) -> bytes | None:
    """``mincore``'s byte a page for the pages holding the ``nbytes`` at ``address`` (bit 0: in memory), or
    ``None`` where that cannot be told."""
    if _MINCORE is None or nbytes <= 0:
        return None
    first_page = address - address % _PAGE
    length = address + nbytes - first_page
    vector = (ctypes.c_ubyte * ((length + _PAGE - 1) // _PAGE))()
    return bytes(vector) if _MINCORE(first_page, length, vector) == 0 else None


def read_ahead_in_background(array: np.ndarray) -> threading.Thread | None:
    """For a tier every search reads at random, such as int8 rescoring rows: on a daemon thread (the
    hints release the GIL), ``read_ahead``, then map every page into this process (``MADV_POPULATE_READ``),
    so that searches take no page faults on it (docs/benchmarks.md). The pages stay the page cache's, shared and
    reclaimable. Returns the thread, or ``None`` where there is nothing to read."""
    if _MADVISE is None or not array.size or not is_mapped(array):
        return None

    def read_and_map() -> None:
        read_ahead(array)
        _advise(array, _POPULATE_READ, step=READ_AHEAD_STEP)

    thread = threading.Thread(target=read_and_map, name="read-ahead", daemon=True)
    thread.start()
    return thread


def gather_rows(array: np.ndarray, rows: np.ndarray, read_rows: bool = True) -> np.ndarray:
    """``array[rows]`` as float32, ``(len(rows), ...)``; rows that make up at least ``1 / WHOLE_READ_SHARE``
    of ``array`` (a merge's or an exact search's pass) are read ahead in large runs, not page by page, and
    fewer are all asked for at once (``read_rows_ahead``); neither where ``read_rows`` is false (the caller
    asked for them, or for the whole array)."""
    if read_rows and is_pass(array, rows):
        read_ahead(array)
    elif read_rows and len(rows) > 1:
        read_rows_ahead(array, rows)  # the scattered rows' reads at once, not one fault at a time
    return np.asarray(array[np.asarray(rows, dtype=np.int64)], dtype=np.float32)


def is_pass(array: np.ndarray, rows: np.ndarray) -> bool:
    """Whether gathering ``rows`` of ``array`` reads so much of it (``1 / WHOLE_READ_SHARE``) that it is read whole."""
    return len(rows) >= len(array) // WHOLE_READ_SHARE


def read_normally(array: np.ndarray) -> None:
    """Page ``array`` in as the kernel does by default (reading around each fault)."""
    _advise(array, _NORMAL)


def is_mapped(array: np.ndarray) -> bool:
    """Whether ``array`` views a memory-mapped file (``np.memmap``, or an ``mmap`` buffer)."""
    base = array
    while base is not None:
        if isinstance(base, (np.memmap, mmap.mmap)):
            return True
        base = getattr(base, "base", None)
    return False


def _advise(array: np.ndarray, advice: int | None, step: int | None = None) -> None:
    """``madvise`` over ``array``'s pages, in hints of ``step`` bytes where given, else one."""
    if _MADVISE is None or advice is None or not array.size or not is_mapped(array):
        return
    start = array.ctypes.data
    first_page = start - start % _PAGE
    end = start + array.nbytes
    step = step or end - first_page
    for at in range(first_page, end, step):
        _MADVISE(at, min(step, end - at), advice)  # a hint: its result changes nothing
