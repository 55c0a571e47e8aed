"""Crash-safe file writes: write a temporary file, fsync, rename, fsync the folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Publish ``path`` whole or not at all.

    ``write`` receives a temporary path next to ``path`` and fills it; the file
    is then fsynced and renamed over ``path``, so a reader or a crash sees the
    old file or the complete new one, never a torn one.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """``atomic_write`` for a UTF-8 text file."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
