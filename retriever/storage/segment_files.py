"""Checks on a segment's files before they are trusted: a collection directory may come from someone else.

A segment name from the catalog must be a plain ``s<digits>`` name (never a
path that leaves ``segments/``); every file read must be a regular file of
the folder itself (no symbolic link to a file elsewhere, no FIFO that would
hang the open); and the arrays must have the shapes ``segment.json`` states.
Each failure is a ``CorruptCollectionError`` that names the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np

from retriever.errors import CorruptCollectionError
from retriever.storage.segment_format import format_version

SEGMENT_NAME = re.compile(r"s[0-9]{6,18}")  # what ``segment.segment_name`` gives


def parse_segments(text: str, where: str) -> list[tuple[str, int]]:
    """The ``[[name, deletion generation], ...]`` list a catalog's state row holds, checked.

    Args:
        text: The JSON text of the state row's ``segments`` column.
        where: The catalog, as messages name it.

    Raises:
        CorruptCollectionError: The text is not such a list, a name is no
            segment name (``/abs``, ``../x``), or a generation is negative.
    """
    try:
        items = json.loads(text)
        pairs = [(name, dels) for name, dels in items]
    except (TypeError, ValueError) as exc:
        raise CorruptCollectionError(f"catalog {where}: unreadable segment list ({exc})") from None
    for name, dels in pairs:
        if not isinstance(name, str) or not SEGMENT_NAME.fullmatch(name):
            raise CorruptCollectionError(f"catalog {where} names segment {name!r}, which is no segment name")
        if not isinstance(dels, int) or isinstance(dels, bool) or dels < 0:
            raise CorruptCollectionError(f"catalog {where}: segment {name} has deletion generation {dels!r}")
    return pairs


def regular_file(path: Path) -> Path:
    """``path`` when it is a regular file itself (not a link, FIFO, device or folder).

    Raises:
        FileNotFoundError: Nothing is there (a merge may have removed it).
        CorruptCollectionError: Something else than a regular file is there.
    """
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise CorruptCollectionError(f"{path} is a symbolic link; a collection's files must be its own")
    if not stat.S_ISREG(mode):
        raise CorruptCollectionError(f"{path} is not a regular file")
    return path


def own_folder(folder: Path) -> Path:
    """``folder`` when it and its parent are real folders (no symbolic links).

    Raises:
        FileNotFoundError: The folder is gone.
        CorruptCollectionError: It, or ``segments/``, is a symbolic link or no folder.
    """
    for path in (folder.parent, folder):
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            raise CorruptCollectionError(f"{path} is not a folder of the collection's own (a link, or a file)")
    return folder


def check_meta(meta: Any, path: Path) -> dict:
    """``segment.json``'s content when it has non-negative ``docs``, ``chunks``, ``dim`` and an ``index``,
    and a format version this code reads (``segment_format.format_version``)."""
    ok = isinstance(meta, dict) and isinstance(meta.get("index"), dict) and "type" in meta["index"]
    counts = [meta.get(k) for k in ("docs", "chunks", "dim")] if ok else []
    if not ok or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        raise CorruptCollectionError(f"{path} lacks docs, chunks, dim or index")
    format_version(meta, path)
    return meta


def check_array(array: np.ndarray, shape: tuple[int, ...], kind: str, path: Path) -> np.ndarray:
    """``array`` when it has ``shape`` and a dtype of ``kind`` (``"i"``: integer, ``"f"``: float)."""
    kinds = "iu" if kind == "i" else kind
    if array.shape != shape or array.dtype.kind not in kinds:
        raise CorruptCollectionError(
            f"{path} holds a {array.dtype} array of shape {array.shape}; segment.json implies {shape}"
        )
    return array


def check_offsets(offsets: np.ndarray, end: int, path: Path) -> None:
    """Offsets from 0 to ``end``, never decreasing (``(n + 1,)`` of a segment's rows)."""
    if offsets[0] != 0 or offsets[-1] != end or (len(offsets) > 1 and np.any(np.diff(offsets) < 0)):
        raise CorruptCollectionError(f"{path}: offsets do not run from 0 to {end} in order")


def check_spans(byte_spans: np.ndarray, lengths: np.ndarray, path: Path) -> None:
    """Each chunk's byte span lies inside its document's text (``lengths`` per chunk)."""
    start, end = byte_spans[:, 0], byte_spans[:, 1]
    if np.any(start < 0) or np.any(end < start) or np.any(end > lengths):
        raise CorruptCollectionError(f"{path}: a chunk's span leaves its document's text")


def check_keys(keys: np.ndarray, path: Path) -> None:
    """Catalog keys strictly ascending (rows are found by binary search)."""
    if len(keys) > 1 and np.any(np.diff(keys) <= 0):
        raise CorruptCollectionError(f"{path}: keys are not strictly ascending")


def check_index(index: Any, chunks: int, dim: int, path: Path) -> None:
    """The vector index holds ``chunks`` vectors of ``dim`` dimensions."""
    if index.ntotal != chunks or index.d != dim:
        raise CorruptCollectionError(
            f"{path} holds {index.ntotal} vectors of dimension {index.d}; segment.json says {chunks} of {dim}"
        )


def check_deletions(rows: np.ndarray, n_docs: int, path: Path) -> np.ndarray:
    """A deletion file's rows: 1-D integers in ``[0, n_docs)``."""
    if rows.ndim != 1 or rows.dtype.kind not in "iu" or (len(rows) and (rows.min() < 0 or rows.max() >= n_docs)):
        raise CorruptCollectionError(f"{path} holds no rows of a {n_docs}-document segment")
    return rows
