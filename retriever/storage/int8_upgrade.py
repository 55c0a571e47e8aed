"""Give compressed segments written before int8 rescoring rows existed their int8 rows, in place.

Such a segment still searches correctly, rescoring every candidate from its
float32 rows; with int8 rows a search ranks the candidates from the int8
copies first and reads only the best few in float32 (``rescoring``). Each
segment gets its two int8 files (fsynced), and then a ``segment.json``
naming them, with their checksums, renamed into place: a segment is switched
whole or not at all. A run killed between the two leaves unnamed files that
readers ignore and the next run writes again. Runs under the writer's lock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from retriever.storage.atomic import atomic_write_text, write_durably
from retriever.storage.cleanup import writer_lock_held
from retriever.storage.int8_files import Int8Rows, write_int8_rows
from retriever.storage.integrity import crc32_of
from retriever.storage.paging import read_ahead
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.segment_files import SEGMENT_NAME
from retriever.storage.segment_format import COMPRESSED, INT8_FILES, META, ROWS_FILE


def segments_without_int8(root: Path) -> list[Path]:
    """The folders under ``root/segments`` of compressed segments that have no int8 rows."""
    found = []
    for folder in sorted(Path(root, SEGMENTS_DIR).glob("s*")):
        if not SEGMENT_NAME.fullmatch(folder.name):
            continue
        try:
            index = json.loads((folder / META).read_text(encoding="utf-8"))["index"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # no published segment: the writer's leftovers, or damage `check` reports
        if index.get("type") in COMPRESSED and not index.get("int8"):
            found.append(folder)
    return found


def add_int8_rows(
    root: Path, quantize: Callable[[np.ndarray], Int8Rows], progress: bool = True, lock_timeout: float = 10.0
) -> int:
    """Write int8 rows into every compressed segment of the collection at ``root`` lacking them.

    ``quantize(rows)`` makes the int8 copies of a segment's ``(chunks, dim)`` float32 rows
    (``retriever.search.int8_rows.quantize``, handed in by ``retriever.upgrading``).

    Returns:
        How many segments got them.

    Raises:
        CollectionLockedError: Another process held the writer's lock for ``lock_timeout`` seconds.
    """
    with writer_lock_held(root, lock_timeout):
        folders = segments_without_int8(root)
        for folder in tqdm(folders, unit="segment", desc="int8 rows", disable=not progress or not folders):
            _add_to(folder, quantize)
        return len(folders)


def _add_to(folder: Path, quantize: Callable[[np.ndarray], Int8Rows]) -> None:
    meta = json.loads((folder / META).read_text(encoding="utf-8"))
    rows = np.load(folder / ROWS_FILE, mmap_mode="r", allow_pickle=False)
    read_ahead(np.asarray(rows))  # one pass over the whole file
    write_int8_rows(quantize(rows), folder, write_durably)
    meta["index"]["int8"] = True
    if "checksums" in meta:
        meta["checksums"].update({name: crc32_of(folder / name) for name in INT8_FILES})
    atomic_write_text(folder / META, json.dumps(meta))
