"""Removing files no generation references (Lucene's IndexFileDeleter).

A writer that dies after writing a segment but before publishing it leaves
unreferenced files; the next writer removes them when it takes the lock.
Staged segments of a live process are kept (``staging.may_be_alive``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
from pathlib import Path
from typing import Iterator, Sequence
from urllib.parse import quote

from filelock import FileLock, Timeout

from retriever.errors import BadInputError, CollectionLockedError
from retriever.storage.atomic import fsync_dir
from retriever.storage.catalog import CatalogState
from retriever.storage.generations import HEAD_FILE, read_head
from retriever.storage.leftovers import sweep_temporaries
from retriever.storage.manifest import DEFAULT_CATALOG, MANIFEST
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.segment_format import META, deletion_files
from retriever.storage.staging import STAGED_PREFIX, may_be_alive

LOCK_FILE = ".write.lock"
REMOVING_PREFIX = ".removing-"  # a segment folder on its way out (``remove_segment_folder``)
TAGGERS_DIR = "taggers"  # trained taggers (retriever.tagging.store)
MODELS_DIR = "models"  # models adapted to the collection (``semsearch adapt -c``)
OWN_FILES = {MANIFEST, DEFAULT_CATALOG, LOCK_FILE, SEGMENTS_DIR, HEAD_FILE, TAGGERS_DIR, MODELS_DIR}


@contextlib.contextmanager
def writer_lock_held(root: Path, timeout: float) -> Iterator[None]:
    """Hold the collection's writer lock (``LOCK_FILE``) for work that rewrites it outside a ``Writer``: upgrades.

    Raises:
        CollectionLockedError: Another process held the lock for ``timeout`` seconds; nothing was changed.
    """
    lock = FileLock(str(Path(root) / LOCK_FILE), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise CollectionLockedError(
            f"{root} is being written by another process (waited {timeout:.0f}s); nothing was changed"
        ) from None
    try:
        yield
    finally:
        lock.release()


def remove_unreferenced(root: Path, state: CatalogState) -> None:
    """Remove segment folders and deletion files that ``state`` does not reference.

    The ``atomic_write`` temporaries that killed processes left in ``root``
    (``.HEAD.<pid>.tmp``, ``.manifest.json.<pid>.tmp``) go as well.
    """
    sweep_temporaries(Path(root))
    folder = Path(root) / SEGMENTS_DIR
    if not folder.is_dir():
        return
    wanted = {ref.name: ref.deletions for ref in state.segments}
    removed = False
    for path in folder.iterdir():
        if path.name.startswith(STAGED_PREFIX) and may_be_alive(path):
            continue  # a worker may still be writing it, or a driver about to commit it
        if path.name not in wanted:
            remove_segment_folder(path)
            removed = True
            continue
        keep = deletion_files(wanted[path.name])
        for deletions in path.glob("deleted.*"):  # older deletion files and their checksums
            if deletions.name not in keep:
                deletions.unlink(missing_ok=True)
                removed = True
    if removed:
        fsync_dir(folder)


def remove_segment_folder(path: Path) -> None:
    """Remove a segment folder no generation references: first renamed out of the way, then deleted.

    A reader still loading an older generation may be opening this folder's
    files; after the rename, every file it has yet to open is missing along
    with the folder, which it reads as "a writer moved on" and loads the
    new generation instead, never as a half-deleted segment.
    """
    if path.is_dir():
        doomed = path.with_name(f"{REMOVING_PREFIX}{path.name}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):  # another writer's cleanup took it first
            path.rename(doomed)
            path = doomed
    remove_files([path])


def remove_files(paths: Sequence[Path]) -> None:
    """Remove each file or folder of ``paths``; missing ones are fine."""
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def prepare_directory(root: Path) -> None:
    """Make ``root`` ready for a new collection: refuse a file, a collection or other files; clear a half-made one.

    A half-made collection is what an interrupted ``create`` leaves: no
    manifest, and no sign of a committed generation (``committed_data``).

    Raises:
        BadInputError: ``root`` is a file, holds a collection (also one whose
            manifest is lost), or holds files of its own.
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
        found = committed_data(root)
        if found:
            raise BadInputError(
                f"{root} holds a collection's data ({found}) but no {MANIFEST}: restore the manifest, "
                "or move the directory away to start afresh; nothing was removed"
            )
        remove_partial_collection(root)


def committed_data(root: Path) -> str | None:
    """What in ``root`` shows that a generation was committed there, or ``None`` (a ``create`` never gets so far).

    A written segment (its ``segment.json``), ``HEAD`` past generation 0, a
    SQLite catalog past generation 0 or holding format-1 tables, or format-1
    ``index/`` files.
    """
    written = sorted((root / SEGMENTS_DIR).glob(f"*/{META}"))
    if written:
        return f"{SEGMENTS_DIR}/{written[0].parent.name}"
    head = read_head(root)
    if head:
        return f"{HEAD_FILE} names generation {head}"
    if (root / "index").is_dir() and any((root / "index").iterdir()):
        return "index/ (format 1)"
    generation = _sqlite_generation(root / DEFAULT_CATALOG)
    return f"{DEFAULT_CATALOG} is at generation {generation}" if generation else None


def _sqlite_generation(path: Path) -> int | None:
    """The committed generation of a SQLite catalog file (1 for a format-1 one); ``None``: none, or unreadable."""
    if not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)) as db:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "state" in tables:
                return 1  # format 1: its generation counts from the first write
            if "semsearch_state" not in tables:
                return None
            row = db.execute("SELECT max(generation) FROM semsearch_state").fetchone()
    except sqlite3.Error:  # not (yet) a database: the create died while making it
        return None
    return int(row[0] or 0) or None


def remove_partial_collection(root: Path) -> None:
    """Clear what an interrupted ``create`` left (no manifest was written)."""
    for name in (DEFAULT_CATALOG, f"{DEFAULT_CATALOG}-wal", f"{DEFAULT_CATALOG}-shm", HEAD_FILE):
        (root / name).unlink(missing_ok=True)
    shutil.rmtree(root / SEGMENTS_DIR, ignore_errors=True)
    shutil.rmtree(root / "index", ignore_errors=True)


def size_on_disk(root: Path) -> int:
    """Bytes of every file under ``root``; a file or folder that another process removes meanwhile (a
    staged segment committed or abandoned, a merged segment collected) counts as gone."""
    total = 0
    for folder, _, files in os.walk(root):  # a folder gone before it is listed is skipped
        for name in files:
            try:
                info = os.stat(os.path.join(folder, name))
            except FileNotFoundError:
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total
