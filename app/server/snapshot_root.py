"""Where snapshots taken over HTTP go: under one folder the operator chose, named by the server.

``semsearch serve --snapshot-root DIR`` keeps each collection's snapshots in
``DIR/<collection>/<name>``. A client names at most ``<name>`` (1-64
letters, digits, ``_``, ``.``, ``-``; by default the server's UTC time and a
random suffix), never a path: so a key for one collection can neither write
into another collection nor probe or fill the server's file system.
Without ``--snapshot-root`` the service takes no snapshots over HTTP.

Bounds: one snapshot at a time per collection (across worker processes, by
a lock file; another request meanwhile gets 429), at most ``max_kept``
snapshots per collection (507 beyond: they are the operator's to remove,
over ``DELETE /admin/snapshots/{name}`` or by hand), and room on the root's
file system for the catalog copy (and for every file where hard links
cannot reach the collection) with ``MIN_FREE_BYTES`` to spare.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from filelock import FileLock, Timeout

from app.server.access import check_name
from retriever.errors import BadInputError, SemsearchError
from retriever.storage.manifest import DEFAULT_CATALOG, MANIFEST

DEFAULT_MAX_KEPT = 20
MIN_FREE_BYTES = 64 << 20
_TAKING = ".taking.lock"  # held while a snapshot is taken


class SnapshotBusyError(SemsearchError):
    """Another snapshot of the collection is being taken (HTTP 429)."""


class SnapshotRoomError(SemsearchError):
    """The snapshot root holds ``max_kept`` snapshots of the collection already, or its disk is too full (507)."""


class SnapshotNotFoundError(SemsearchError):
    """No snapshot of that name under the collection's folder (404)."""


def check_snapshot_root(root: str | os.PathLike, served: Iterable[Path]) -> Path:
    """``root`` made absolute and created (its parent must exist), when it is a safe place for snapshots:
    neither inside a served collection nor holding one or the folder one lies in (``serve -c FOLDER`` would
    serve a snapshot there as a collection at the next start).

    Raises:
        BadInputError: ``root`` is a file, lies inside a served collection, holds one or its folder, or its
            parent is missing.
    """
    path = Path(root).expanduser().absolute()
    resolved = path.resolve()
    for collection in served:
        collection = Path(collection).resolve()
        if resolved.is_relative_to(collection) or collection.parent.is_relative_to(resolved):
            raise BadInputError(
                f"--snapshot-root {path} lies inside or holds the collection {collection}; "
                "choose a folder apart from the collections served"
            )
    if path.exists() and not path.is_dir():
        raise BadInputError(f"--snapshot-root {path} is a file; give a folder")
    if not path.parent.is_dir():
        raise BadInputError(f"--snapshot-root {path}: its parent folder does not exist")
    path.mkdir(exist_ok=True)
    return path


@dataclass(frozen=True)
class CollectionSnapshots:
    """The snapshots of one served collection: ``root/<collection>/``.

    Attributes:
        root: The operator's snapshot root (absolute).
        collection: The collection's name, as keys' scopes name it.
        max_kept: Snapshots of the collection kept at most (default 20).
    """

    root: Path
    collection: str
    max_kept: int = DEFAULT_MAX_KEPT

    @property
    def folder(self) -> Path:
        return self.root / self.collection

    def destination(self, name: str | None) -> Path:
        """``folder/name`` for a new snapshot (a fresh server-chosen name when ``name`` is None).

        Raises:
            BadInputError: ``name`` is no plain name, or a snapshot of that name exists.
        """
        if name is None:
            name = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)
        check_name(name, "snapshot name")
        self.folder.mkdir(exist_ok=True)
        dest = self.folder / name
        if os.path.lexists(dest):
            raise BadInputError(f"name: a snapshot {name!r} of collection {self.collection!r} exists; choose another")
        return dest

    @contextmanager
    def taking(self, collection_root: Path) -> Iterator[None]:
        """Hold the collection's snapshot lock, after checking the count and the free space.

        Raises:
            SnapshotBusyError: Another snapshot of the collection is being taken.
            SnapshotRoomError: ``max_kept`` snapshots are kept already, or the disk lacks room.
        """
        self.folder.mkdir(exist_ok=True)
        lock = FileLock(str(self.folder / _TAKING), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise SnapshotBusyError(
                f"a snapshot of collection {self.collection!r} is being taken; try again when it is done"
            ) from None
        try:
            kept = len(self.listed())
            if kept >= self.max_kept:
                raise SnapshotRoomError(
                    f"{kept} snapshots of collection {self.collection!r} are kept already, "
                    f"the most this server keeps ({self.max_kept}); remove old ones first"
                )
            self._check_room(Path(collection_root))
            yield
        finally:
            lock.release()

    def _check_room(self, collection_root: Path) -> None:
        needed = _size(collection_root / DEFAULT_CATALOG)
        if os.stat(collection_root).st_dev != os.stat(self.folder).st_dev:  # no hard links across: every file
            needed = sum(_size(p) for p in collection_root.rglob("*") if p.is_file() and not p.is_symlink())
        free = shutil.disk_usage(self.folder).free
        if free < needed + MIN_FREE_BYTES:
            raise SnapshotRoomError(
                f"the snapshot root's disk has {free / 1e6:,.0f} MB free; a snapshot of "
                f"collection {self.collection!r} needs about {needed / 1e6:,.0f} MB and "
                f"{MIN_FREE_BYTES >> 20} MB to spare"
            )

    def listed(self) -> list[dict[str, Any]]:
        """The snapshots kept, oldest first: ``[{"name", "created"}]`` (``created``: ISO 8601 UTC)."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in self.folder.iterdir():
            if path.name.startswith(".") or path.is_symlink() or not (path / MANIFEST).is_file():
                continue
            taken = (path / MANIFEST).stat().st_mtime_ns
            created = dt.datetime.fromtimestamp(taken / 1e9, dt.timezone.utc).isoformat(timespec="seconds")
            found.append((taken, path.name, {"name": path.name, "created": created}))
        return [item for _, _, item in sorted(found)]

    def remove(self, name: str) -> None:
        """Delete the snapshot ``name``.

        Raises:
            BadInputError: ``name`` is no plain name.
            SnapshotNotFoundError: No snapshot of that name is kept.
        """
        check_name(name, "snapshot name")
        path = self.folder / name
        if path.is_symlink() or not (path / MANIFEST).is_file():
            raise SnapshotNotFoundError(f"no snapshot {name!r} of collection {self.collection!r}")
        shutil.rmtree(path)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
