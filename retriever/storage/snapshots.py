"""Snapshots: a consistent copy of a collection's last committed generation, taken while writers go on.

A snapshot is a collection directory of its own, with a SQLite catalog
inside, so it opens, searches and restores like any other. It is taken in
three steps:

1. The catalog is copied in one read transaction: a SQLite catalog through
   SQLite's online backup API, any other (PostgreSQL) table by table into a
   SQLite file. The copy fixes the generation G it holds.
2. The files of G's segments are hard-linked where the file system allows
   (a segment's files never change once written), copied otherwise. A file
   missing by then means a later commit or merge removed it, so G is gone:
   the snapshot starts again (``MAX_TRIES`` times; then under the write
   lock, which holds writers back for as long as it takes).
3. The manifest (its catalog now the file inside, the models it holds in
   ``models/`` renamed to their copies), ``HEAD``, the taggers and those
   models follow; everything is fsynced and the folder renamed into place,
   so the destination is whole or absent.

``restore`` makes a snapshot a live collection again at a new path the
same way: the catalog copied, the segment files linked or copied.

Either side may be a folder someone else wrote, so only what is the
collection's own is carried: regular files opened without following a link
(a symbolic link, FIFO or device is a ``CorruptCollectionError`` naming it),
folders that are no links, and of a segment only the files its
``segment.json`` names. The manifest written is the one on disk as of the
generation copied (read before and after the catalog, so a model switch in
another process is never missed), with only the model of that generation.
A work folder ``.<dest>.partial-<pid>-<hex>`` is swept by a later snapshot
or restore into the same folder once its process is gone (``leftovers``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import insert, inspect, select

from retriever.errors import BadInputError, CorruptCollectionError, SemsearchError
from retriever.storage.atomic import fsync_dir, fsync_path
from retriever.storage.catalog import Catalog, CatalogState, metadata_obj
from retriever.storage.catalog_url import sqlite_url
from retriever.storage.cleanup import MODELS_DIR, TAGGERS_DIR
from retriever.storage.generations import write_head
from retriever.storage.leftovers import left_over
from retriever.storage.manifest import DEFAULT_CATALOG, Manifest
from retriever.storage.own_files import FileGone, copy_tree, link_or_copy, read_regular
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.segment_files import own_folder, regular_file
from retriever.storage.segment_format import META, deletion_file, deletion_files

MAX_TRIES = 5
MAX_NAME_BYTES = 200  # a destination's name, leaving room for its work folder's within the file system's 255
_ROWS_PER_BATCH = 5_000
#: A snapshot's or restore's work folder beside its destination (older ones lack the ``-<hex>``).
WORK_FOLDER = re.compile(r"\.(?P<dest>.+)\.partial-(?P<pid>[0-9]+)(-[0-9a-f]{8})?")
_being_written: set[Path] = set()  # destinations this process is writing now
_being_written_lock = threading.Lock()


@dataclass
class SnapshotReport:
    """What a snapshot or a restore wrote.

    Attributes:
        path: The new directory.
        generation: The generation it holds.
        documents: Documents in it.
        segments: Its segments.
        linked: Files hard-linked from the source.
        copied: Files copied (the catalog always).
        bytes: Their size.
        tries: Attempts needed (more than one when writers removed files meanwhile).
        seconds: Time taken.
    """

    path: Path
    generation: int = 0
    documents: int = 0
    segments: int = 0
    linked: int = 0
    copied: int = 0
    bytes: int = 0
    tries: int = 0
    seconds: float = 0.0
    _started: float = field(default_factory=time.perf_counter, repr=False)

    def to_dict(self) -> dict[str, Any]:
        names = ("generation", "documents", "segments", "linked", "copied", "bytes", "tries")
        return {"path": str(self.path), **{name: getattr(self, name) for name in names}, "seconds": self.seconds}


def take_snapshot(
    root: Path, manifest: Manifest, catalog: Catalog, dest: Path, locked: Callable[[], Any]
) -> SnapshotReport:
    """Copy the last committed generation of the collection at ``root`` into ``dest`` (which must not exist).

    Args:
        root: The collection directory.
        manifest: Its manifest.
        catalog: Its open catalog (the engine knows a PostgreSQL password the manifest does not keep).
        dest: Where the snapshot goes.
        locked: Returns the collection's write-lock context manager, taken after ``MAX_TRIES`` failed tries.

    The manifest written is read from ``root`` around the catalog copy, not
    taken from ``manifest``, which another process may have changed since.

    Raises:
        BadInputError: ``dest`` exists, lies inside the collection, or is being written by this process already.
        CorruptCollectionError: A file or folder of the collection is a link, or not a regular file.
    """
    dest = _check_destination(Path(dest), Path(root))
    report = SnapshotReport(dest)
    with _claimed(dest):
        for attempt in range(1, MAX_TRIES + 2):
            report.tries = attempt
            with locked() if attempt > MAX_TRIES else contextlib.nullcontext():  # at last writers wait: nothing goes
                if _try_copy(root, lambda target: _copy_catalog(catalog, target), dest, report):
                    return report
    raise SemsearchError(f"snapshot of {root}: files kept changing under it, even under the write lock")


def restore_snapshot(snapshot: Path, dest: Path) -> SnapshotReport:
    """Make the snapshot at ``snapshot`` a live collection at ``dest`` (which must not exist).

    Raises:
        BadInputError: ``dest`` exists or is being written, or the snapshot's catalog is not a SQLite file
            inside it.
        CollectionNotFoundError: ``snapshot`` holds no collection.
        CorruptCollectionError: A file or folder of the snapshot is a link, or not a regular file.
    """
    snapshot = Path(snapshot)
    manifest = Manifest.load(snapshot)
    if manifest.catalog_url:
        raise BadInputError(
            f"{snapshot}: its catalog is {manifest.catalog_url}, not a file inside it; "
            "restore takes a snapshot that semsearch snapshot wrote"
        )
    dest = _check_destination(Path(dest), snapshot)
    report = SnapshotReport(dest, tries=1)

    def copy_catalog(target: Path) -> None:
        try:
            _backup_sqlite(regular_file(snapshot / DEFAULT_CATALOG), target)
        except FileNotFoundError:
            raise SemsearchError(f"catalog {snapshot / DEFAULT_CATALOG} is missing") from None

    with _claimed(dest):
        if not _try_copy(snapshot, copy_catalog, dest, report):
            raise SemsearchError(f"restore from {snapshot}: a file of the snapshot disappeared while it was read")
    return report


@contextlib.contextmanager
def _claimed(dest: Path):
    """``dest`` marked as being written by this process for the ``with`` block; a second claim is refused.

    Raises:
        BadInputError: Another snapshot or restore of this process writes ``dest`` now.
    """
    with _being_written_lock:
        if dest in _being_written:
            raise BadInputError(f"{dest}: a snapshot or restore to it is being taken now; choose another directory")
        _being_written.add(dest)
    try:
        yield
    finally:
        with _being_written_lock:
            _being_written.discard(dest)


def sweep_work_folders(folder: Path) -> list[Path]:
    """Remove the work folders that killed snapshots and restores left in ``folder`` (``leftovers.left_over``).

    Returns:
        The folders removed.
    """
    removed = []
    with contextlib.suppress(OSError):
        for path in Path(folder).iterdir():
            match = WORK_FOLDER.fullmatch(path.name)
            if match and not path.is_symlink() and path.is_dir() and left_over(path, int(match["pid"])):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def _check_destination(dest: Path, root: Path) -> Path:
    """``dest`` made absolute, when it is a new folder outside the collection at ``root`` in a folder that exists.

    Raises:
        BadInputError: Naming what is wrong with ``dest``.
    """
    try:
        dest = dest.expanduser().absolute()
        if len(os.fsencode(dest.name)) > MAX_NAME_BYTES:
            raise BadInputError(f"destination name {dest.name[:40]!r}...: at most {MAX_NAME_BYTES} bytes")
        if os.path.lexists(dest):
            raise BadInputError(f"{dest} exists; a snapshot or restore goes to a new directory")
        if dest.resolve().is_relative_to(root.resolve()):
            raise BadInputError(f"{dest} is inside the collection {root}; choose a directory outside it")
        if not dest.parent.is_dir():
            raise BadInputError(f"{dest.parent}: no such directory")
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a name too long, a loop of links
        if isinstance(exc, BadInputError):
            raise
        raise BadInputError(f"destination {str(dest)[:200]!r}: {getattr(exc, 'strerror', None) or exc}") from None
    return dest


def _try_copy(root: Path, copy_catalog: Callable[[Path], None], dest: Path, report: SnapshotReport) -> bool:
    """One attempt into a work folder beside ``dest``, renamed into place when whole; False if files went."""
    sweep_work_folders(dest.parent)
    work = dest.parent / f".{dest.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    (work / SEGMENTS_DIR).mkdir(parents=True)
    try:
        before = Manifest.load(root)
        copy_catalog(work / DEFAULT_CATALOG)
        state = _state_of(work / DEFAULT_CATALOG)
        if Manifest.load(root) != before:
            raise FileGone(root / "manifest.json")  # a switch or compact changed it meanwhile: its model may differ
        manifest = _as_of(before, state.generation)
        counts = {"linked": 0, "copied": 1, "bytes": (work / DEFAULT_CATALOG).stat().st_size}
        for ref in state.segments:
            _copy_segment(root / SEGMENTS_DIR / ref.name, work / SEGMENTS_DIR / ref.name, ref.deletions, counts)
        copy_tree(root / TAGGERS_DIR, work / TAGGERS_DIR, counts, link=False)
        manifest = _copy_models(root, manifest, work, dest, counts)
        for tree in (work / TAGGERS_DIR, work / MODELS_DIR):
            _fsync_tree(tree)
        manifest.save(work)
        write_head(work, state.generation)
        fsync_dir(work / SEGMENTS_DIR)
        fsync_dir(work)
        try:
            os.rename(work, dest)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise BadInputError(f"{dest} exists; a snapshot or restore goes to a new directory") from None
        fsync_dir(dest.parent)
    except FileGone:
        shutil.rmtree(work, ignore_errors=True)
        return False
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    report.generation, report.segments = state.generation, len(state.segments)
    report.linked, report.copied, report.bytes = counts["linked"], counts["copied"], counts["bytes"]
    report.documents = _document_count(dest / DEFAULT_CATALOG)
    report.seconds = round(time.perf_counter() - report._started, 3)
    return True


def _as_of(manifest: Manifest, generation: int) -> Manifest:
    """``manifest`` as a snapshot of ``generation`` keeps it: the model of that generation only (no switch
    before or after it), and its catalog the file inside."""
    return replace(manifest, model=manifest.model_at(generation), model_since=0, previous_model=None, catalog_url=None)


def _copy_catalog(catalog: Catalog, target: Path) -> None:
    """The catalog as one SQLite file at ``target``, read in one transaction."""
    if catalog.engine.dialect.name == "sqlite":
        _backup_sqlite(Path(catalog.engine.url.database), target)
        return
    copy = Catalog(sqlite_url(target))
    try:
        metadata_obj.create_all(copy.engine)
        with catalog.engine.connect() as source, copy.engine.begin() as sink:
            source = source.execution_options(isolation_level="REPEATABLE READ")  # one consistent view
            with source.begin():
                present = set(inspect(source).get_table_names())
                for table in metadata_obj.sorted_tables:
                    if table.name not in present:  # a table this catalog never needed yet (judgments): empty
                        continue
                    rows = source.execute(select(table)).mappings()
                    while batch := rows.fetchmany(_ROWS_PER_BATCH):
                        sink.execute(insert(table), [dict(row) for row in batch])
    finally:
        copy.close()
    fsync_path(target)


def _backup_sqlite(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source`` into ``target``: one consistent copy, writers not stopped."""
    if not source.is_file():
        raise SemsearchError(f"catalog {source} is missing")
    reader = sqlite3.connect(f"{Path(source).absolute().as_uri()}?mode=ro", uri=True)  # ?, # and % escaped
    writer = sqlite3.connect(target)
    try:
        reader.backup(writer)
        writer.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    finally:
        writer.close()
        reader.close()
    fsync_path(target)


def _state_of(path: Path) -> CatalogState:
    catalog = Catalog(sqlite_url(path))
    try:
        return catalog.state()
    finally:
        catalog.close()


def _document_count(path: Path) -> int:
    catalog = Catalog(sqlite_url(path))
    try:
        return catalog.counts()[0]
    finally:
        catalog.close()


def _copy_segment(source: Path, target: Path, deletions: int, counts: dict[str, int]) -> None:
    """The files of one segment as of a generation: those its ``segment.json`` names (all but other
    generations' deletion files, for a segment older than checksums), and its deletion file of that generation.

    ``segment.json`` is linked or copied last and must still be the one read first: a segment changed in place
    meanwhile (``upgrade --int8``) is taken again by the next attempt.
    """
    try:
        own_folder(source)
        names = sorted(p.name for p in source.iterdir())
        meta_bytes = read_regular(source / META)
    except FileNotFoundError:
        raise FileGone(source) from None
    wanted_deletions = deletion_file(deletions) if deletions else None
    kept = deletion_files(deletions) if deletions else set()
    if wanted_deletions and wanted_deletions not in names:
        raise FileGone(source)  # being removed: a listing taken mid-way lacks files
    try:
        recorded = json.loads(meta_bytes.decode("utf-8")).get("checksums")
    except (ValueError, AttributeError):
        raise CorruptCollectionError(f"{source / META} is malformed") from None
    if recorded is None:  # written before checksums: every file of the folder but other deletions
        wanted = {name for name in names if not name.startswith("deleted.") and name != META} | kept
    else:
        wanted = set(recorded) | (kept & set(names))
    if not wanted <= set(names):
        raise FileGone(source)
    target.mkdir()
    for name in sorted(wanted):
        link_or_copy(source / name, target / name, counts)
    link_or_copy(source / META, target / META, counts)
    if read_regular(target / META) != meta_bytes:
        raise FileGone(source / META)
    fsync_dir(target)


def _copy_models(root: Path, manifest: Manifest, work: Path, dest: Path, counts: dict[str, int]) -> Manifest:
    """The collection's own models (``models/``, where ``adapt -c`` puts them) linked or copied into ``work``,
    and ``manifest`` with the models it names there renamed to their place under ``dest``."""
    source = root.resolve() / MODELS_DIR
    if not os.path.lexists(source):
        return manifest
    copy_tree(source, work / MODELS_DIR, counts)

    def moved(model: dict[str, Any] | None) -> dict[str, Any] | None:
        if model is None:
            return None
        try:
            inside = Path(model["name"]).relative_to(source)
        except ValueError:  # a model by name, or of its own place outside the collection
            return model
        return {**model, "name": str(dest.resolve() / MODELS_DIR / inside)}

    return replace(manifest, model=moved(manifest.model), previous_model=moved(manifest.previous_model))


def _fsync_tree(folder: Path) -> None:
    """fsync every file and folder under ``folder`` (copies ``copytree`` made, links to files already on
    disk), each folder after what it holds; nothing where there is no ``folder``."""
    for directory, _, files in os.walk(folder, topdown=False):
        for name in files:
            fsync_path(Path(directory) / name)
        fsync_dir(Path(directory))
