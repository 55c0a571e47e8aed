"""Crash-safe file writes: write a temporary file, fsync, rename, fsync the folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def fsync_path(path: Path) -> None:
    """Flush a file's data, or a folder's entries (a rename or unlink inside it), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


fsync_dir = fsync_path


def write_durably(path: Path, write: Callable[[Path], None]) -> None:
    """Fill a new file through ``write(path)`` and fsync it (no rename: for files not yet referenced)."""
    write(path)
    fsync_path(path)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Publish ``path`` whole or not at all.

    ``write`` receives a temporary path next to ``path`` and fills it; the file
    is then fsynced and renamed over ``path``, so a reader or a crash sees the
    old file or the complete new one, never a torn one.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_durably(tmp, write)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """``atomic_write`` for a UTF-8 text file."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
