"""Removing files no generation references (Lucene's IndexFileDeleter).

A writer that dies after writing a segment but before publishing it leaves
unreferenced files; the next writer removes them when it takes the lock.
Staged segments of a live process are kept (``staging.may_be_alive``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence

from retriever.errors import BadInputError
from retriever.storage.atomic import fsync_dir
from retriever.storage.catalog import CatalogState
from retriever.storage.generations import HEAD_FILE
from retriever.storage.manifest import DEFAULT_CATALOG, MANIFEST
from retriever.storage.segment import SEGMENTS_DIR, deletion_file
from retriever.storage.staging import STAGED_PREFIX, may_be_alive

LOCK_FILE = ".write.lock"
OWN_FILES = {MANIFEST, DEFAULT_CATALOG, LOCK_FILE, SEGMENTS_DIR, HEAD_FILE}  # what a collection directory holds


def remove_unreferenced(root: Path, state: CatalogState) -> None:
    """Remove segment folders and deletion files that ``state`` does not reference."""
    folder = Path(root) / SEGMENTS_DIR
    if not folder.is_dir():
        return
    wanted = {ref.name: ref.deletions for ref in state.segments}
    removed = False
    for path in folder.iterdir():
        if path.name.startswith(STAGED_PREFIX) and may_be_alive(path):
            continue  # a worker may still be writing it, or a driver about to commit it
        if path.name not in wanted:
            remove_files([path])
            removed = True
            continue
        for deletions in path.glob("deleted.*.npy"):
            if deletions.name != deletion_file(wanted[path.name]):
                deletions.unlink(missing_ok=True)
                removed = True
    if removed:
        fsync_dir(folder)


def remove_files(paths: Sequence[Path]) -> None:
    """Remove each file or folder of ``paths``; missing ones are fine."""
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def prepare_directory(root: Path) -> None:
    """Make ``root`` ready for a new collection: refuse a file, a collection or other files; clear a half-made one.

    Raises:
        BadInputError: ``root`` is a file, holds a collection, or holds files of its own.
    """
    if root.exists() and not root.is_dir():
        raise BadInputError(f"cannot create a collection at {root}: it is a file")
    if (root / MANIFEST).exists():
        raise BadInputError(f"a collection already exists at {root}")
    if root.is_dir():
        foreign = {p.name for p in root.iterdir()} - OWN_FILES
        foreign = {name for name in foreign if not name.startswith(DEFAULT_CATALOG) and name != "index"}
        if foreign:
            raise BadInputError(
                f"cannot create a collection at {root}: the directory is not empty "
                f"({', '.join(sorted(foreign)[:3])}...)"
            )
        remove_partial_collection(root)


def remove_partial_collection(root: Path) -> None:
    """Clear what an interrupted ``create`` left (no manifest was written)."""
    for name in (DEFAULT_CATALOG, f"{DEFAULT_CATALOG}-wal", f"{DEFAULT_CATALOG}-shm", HEAD_FILE):
        (root / name).unlink(missing_ok=True)
    shutil.rmtree(root / SEGMENTS_DIR, ignore_errors=True)
    shutil.rmtree(root / "index", ignore_errors=True)


def size_on_disk(root: Path) -> int:
    """Bytes of every file under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
