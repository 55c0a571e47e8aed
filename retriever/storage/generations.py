"""The ``HEAD`` file: which generation readers should load.

The catalog's generation is the truth; ``HEAD`` is a cheap signal beside it.
Each publish writes a new file (new inode), so a reader learns that a new
generation exists from one ``stat``, without asking the catalog.
"""

from __future__ import annotations

import os
from pathlib import Path

from retriever.storage.atomic import atomic_write_text

HEAD_FILE = "HEAD"


def write_head(root: Path, generation: int) -> None:
    """Point ``HEAD`` at ``generation``: a new file (new inode) that readers ``stat``."""
    atomic_write_text(Path(root) / HEAD_FILE, f"{generation}\n")


def read_head(root: Path) -> int | None:
    """The generation ``HEAD`` names, or ``None`` when it is missing or unreadable."""
    try:
        return int((Path(root) / HEAD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def head_stamp(root: Path) -> tuple[int, int, int] | None:
    """``(inode, mtime_ns, size)`` of ``HEAD``: changes whenever a generation is published."""
    return file_stamp(Path(root) / HEAD_FILE)


def file_stamp(path: Path) -> tuple[int, int, int] | None:
    """``(inode, mtime_ns, size)`` of a file written atomically (a new inode each time), or ``None`` when missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
