"""Leases on exports in use (``exported/<weights sha256>/``), so that pruning the export cache passes them by.

A lease is a shared ``flock`` on the export's folder, held through an open
descriptor of it for as long as the ``ExportLease`` lives: until ``release``,
until it is garbage collected, or until its process ends, killed included
(the kernel drops the locks of a process's descriptors when it exits, so a
dead process holds no lease and leaves nothing to clean up). Removing an
export takes the exclusive lock without waiting (``unleased``) and moves the
folder aside while holding it; a process taking a lease meanwhile finds the
folder gone from its path and gets no lease (``ExportLease.take``), so the
export it wanted is made again rather than read half deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import weakref
from pathlib import Path
from typing import Iterator

#: Attempts to lease an export that other processes keep replacing (moved aside and written again).
_TAKE_ATTEMPTS = 3


class ExportLease:
    """A shared lock on one export folder, held until ``release`` (or garbage collection, or process exit).

    Use ``ExportLease.take``. Where the file system refuses locks the lease
    holds nothing (``held`` is ``False``), and pruning there removes no export.

    Attributes:
        path: The export folder.
    """

    def __init__(self, path: Path, descriptor: int | None) -> None:
        self.path = Path(path)
        self._descriptor = descriptor
        self._closer = weakref.finalize(self, os.close, descriptor) if descriptor is not None else None

    @classmethod
    def take(cls, path: Path) -> "ExportLease | None":
        """A lease on the export folder at ``path``, or ``None`` when no folder is there (or it is being removed).

        Waits only while another process moves the folder aside (the exclusive
        lock is held for one rename).
        """
        for _ in range(_TAKE_ATTEMPTS):
            try:
                descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError:  # unreadable: nothing to lease, and whoever reads it fails on its own
                return cls(path, None)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_SH)
            except OSError:  # a file system without locks: the export is used unleased
                os.close(descriptor)
                return cls(path, None)
            if _same_folder(path, descriptor):
                return cls(path, descriptor)
            os.close(descriptor)  # moved aside while this waited; another export may have taken the name
        return None

    @property
    def held(self) -> bool:
        """Whether the lock is held (it is not after ``release``, nor where the file system refused it)."""
        return self._closer is not None and self._closer.alive

    def release(self) -> None:
        """Drop the lock now (it is dropped anyway when the lease is garbage collected); idempotent."""
        if self._closer is not None:
            self._closer()


@contextlib.contextmanager
def unleased(path: Path) -> Iterator[bool]:
    """Hold the export folder at ``path`` exclusively for the block, where no process holds a lease on it.

    Yields:
        ``True`` with the exclusive lock held (the block may move the folder
        aside); ``False`` where a lease is held on it, the folder is gone, or
        the file system refuses locks (the block must leave it alone).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: leased; any other: locks unsupported, so leases cannot be seen
            yield False
            return
        yield _same_folder(path, descriptor)
    finally:
        os.close(descriptor)


def leased(path: Path) -> bool:
    """Whether a process holds a lease on the export folder at ``path`` now (``False`` when it is gone)."""
    with unleased(path) as free:
        return not free and path.is_dir()


def _same_folder(path: Path, descriptor: int) -> bool:
    """Whether ``path`` still names the folder open as ``descriptor`` (not moved aside or replaced)."""
    try:
        now, held = os.stat(path), os.fstat(descriptor)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
