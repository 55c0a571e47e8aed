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
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import insert, select

from retriever.errors import BadInputError, SemsearchError
from retriever.storage.atomic import fsync_dir, fsync_path
from retriever.storage.catalog import Catalog, CatalogState, metadata_obj
from retriever.storage.cleanup import MODELS_DIR, TAGGERS_DIR
from retriever.storage.generations import write_head
from retriever.storage.manifest import DEFAULT_CATALOG, Manifest
from retriever.storage.segment import META, SEGMENTS_DIR
from retriever.storage.segment_files import deletion_file, deletion_files

MAX_TRIES = 5
_ROWS_PER_BATCH = 5_000


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


class _Gone(Exception):
    """A file of the generation being copied was removed by a later commit or merge."""


def take_snapshot(root: Path, manifest: Manifest, catalog: Catalog, dest: Path,
                  locked: Callable[[], Any]) -> SnapshotReport:
    """Copy the last committed generation of the collection at ``root`` into ``dest`` (which must not exist).

    Args:
        root: The collection directory.
        manifest: Its manifest.
        catalog: Its open catalog (the engine knows a PostgreSQL password the manifest does not keep).
        dest: Where the snapshot goes.
        locked: Returns the collection's write-lock context manager, taken after ``MAX_TRIES`` failed tries.

    Raises:
        BadInputError: ``dest`` exists, or lies inside the collection.
    """
    dest = _check_destination(Path(dest), Path(root))
    report = SnapshotReport(dest)
    for attempt in range(1, MAX_TRIES + 2):
        report.tries = attempt
        with locked() if attempt > MAX_TRIES else contextlib.nullcontext():  # at last writers wait: nothing goes
            if _try_copy(root, manifest, lambda target: _copy_catalog(catalog, target), dest, report):
                return report
    raise SemsearchError(f"snapshot of {root}: files kept changing under it, even under the write lock")


def restore_snapshot(snapshot: Path, dest: Path) -> SnapshotReport:
    """Make the snapshot at ``snapshot`` a live collection at ``dest`` (which must not exist).

    Raises:
        BadInputError: ``dest`` exists, or the snapshot's catalog is not a SQLite file inside it.
        CollectionNotFoundError: ``snapshot`` holds no collection.
    """
    snapshot = Path(snapshot)
    manifest = Manifest.load(snapshot)
    if manifest.catalog_url:
        raise BadInputError(f"{snapshot}: its catalog is {manifest.catalog_url}, not a file inside it; "
                            "restore takes a snapshot that semsearch snapshot wrote")
    dest = _check_destination(Path(dest), snapshot)
    report = SnapshotReport(dest, tries=1)
    if not _try_copy(snapshot, manifest, lambda target: _backup_sqlite(snapshot / DEFAULT_CATALOG, target), dest,
                     report):
        raise SemsearchError(f"restore from {snapshot}: a file of the snapshot disappeared while it was read")
    return report


def _check_destination(dest: Path, root: Path) -> Path:
    dest = dest.expanduser().absolute()
    if dest.exists() or dest.is_symlink():
        raise BadInputError(f"{dest} exists; a snapshot or restore goes to a new directory")
    if dest.resolve().is_relative_to(root.resolve()):
        raise BadInputError(f"{dest} is inside the collection {root}; choose a directory outside it")
    if not dest.parent.is_dir():
        raise BadInputError(f"{dest.parent}: no such directory")
    return dest


def _try_copy(root: Path, manifest: Manifest, copy_catalog: Callable[[Path], None], dest: Path,
              report: SnapshotReport) -> bool:
    """One attempt into a temporary folder beside ``dest``, renamed into place when whole; False if files went."""
    work = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    (work / SEGMENTS_DIR).mkdir(parents=True)
    try:
        copy_catalog(work / DEFAULT_CATALOG)
        state = _state_of(work / DEFAULT_CATALOG)
        counts = {"linked": 0, "copied": 1, "bytes": (work / DEFAULT_CATALOG).stat().st_size}
        for ref in state.segments:
            _copy_segment(root / SEGMENTS_DIR / ref.name, work / SEGMENTS_DIR / ref.name, ref.deletions, counts)
        _copy_taggers(root / TAGGERS_DIR, work / TAGGERS_DIR)
        manifest = _copy_models(root, manifest, work, dest, counts)
        for tree in (work / TAGGERS_DIR, work / MODELS_DIR):
            _fsync_tree(tree)
        replace(manifest, catalog_url=None).save(work)  # the catalog is the file inside
        write_head(work, state.generation)
        fsync_dir(work / SEGMENTS_DIR)
        fsync_dir(work)
        os.rename(work, dest)
        fsync_dir(dest.parent)
    except _Gone:
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


def _copy_catalog(catalog: Catalog, target: Path) -> None:
    """The catalog as one SQLite file at ``target``, read in one transaction."""
    if catalog.engine.dialect.name == "sqlite":
        _backup_sqlite(Path(catalog.engine.url.database), target)
        return
    copy = Catalog(f"sqlite:///{target}")
    try:
        metadata_obj.create_all(copy.engine)
        with catalog.engine.connect() as source, copy.engine.begin() as sink:
            source = source.execution_options(isolation_level="REPEATABLE READ")  # one consistent view
            with source.begin():
                for table in metadata_obj.sorted_tables:
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
    reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    writer = sqlite3.connect(target)
    try:
        reader.backup(writer)
        writer.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    finally:
        writer.close()
        reader.close()
    fsync_path(target)


def _state_of(path: Path) -> CatalogState:
    catalog = Catalog(f"sqlite:///{path}")
    try:
        return catalog.state()
    finally:
        catalog.close()


def _document_count(path: Path) -> int:
    catalog = Catalog(f"sqlite:///{path}")
    try:
        return catalog.counts()[0]
    finally:
        catalog.close()


def _copy_segment(source: Path, target: Path, deletions: int, counts: dict[str, int]) -> None:
    """The files of one segment as of a generation: its own, and its deletion file of that generation."""
    try:
        names = sorted(p.name for p in source.iterdir())
    except FileNotFoundError:
        raise _Gone(source) from None
    wanted_deletions = deletion_file(deletions) if deletions else None
    kept = deletion_files(deletions) if deletions else set()
    if wanted_deletions and wanted_deletions not in names or META not in names:
        raise _Gone(source)  # being removed: a listing taken mid-way lacks files
    try:
        recorded = json.loads((source / META).read_text(encoding="utf-8")).get("checksums") or {}
    except (OSError, ValueError):
        raise _Gone(source) from None
    if not set(recorded) <= set(names):
        raise _Gone(source)
    target.mkdir()
    for name in names:
        if name.startswith("deleted.") and name not in kept:
            continue
        _link_or_copy(source / name, target / name, counts)
    fsync_dir(target)


def _copy_taggers(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*"))


def _copy_models(root: Path, manifest: Manifest, work: Path, dest: Path, counts: dict[str, int]) -> Manifest:
    """The collection's own models (``models/``, where ``adapt -c`` puts them) linked or copied into ``work``,
    and ``manifest`` with the models it names there renamed to their place under ``dest``."""
    source = root.resolve() / MODELS_DIR
    if not source.is_dir():
        return manifest
    shutil.copytree(source, work / MODELS_DIR, ignore=shutil.ignore_patterns(".*"),  # no temporaries
                    copy_function=lambda file, target: _link_or_copy(Path(file), Path(target), counts))

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


def _link_or_copy(source: Path, target: Path, counts: dict[str, int]) -> None:
    try:
        size = source.stat().st_size
        try:
            os.link(source, target)
            counts["linked"] += 1
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            shutil.copyfile(source, target)  # another file system, or links refused
            fsync_path(target)
            counts["copied"] += 1
    except FileNotFoundError:
        raise _Gone(source) from None
    counts["bytes"] += size
