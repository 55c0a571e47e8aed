"""Temporary files a killed process left behind, and when one may be removed.

``atomic.atomic_write`` fills ``.{name}.{pid}.tmp`` next to its target and
renames it; a process killed in between leaves it. Such a file is left over
when its process is gone from this host and it is older than ``GRACE_S``
(the grace covers a process of the same number on another host sharing the
folder), or when it is older than ``MAX_AGE_S`` whoever wrote it.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

GRACE_S = 3600.0  # a write in progress is done long before this
MAX_AGE_S = 24 * 3600.0  # no write takes this long
ATOMIC_TEMPORARY = re.compile(r"\..+\.(?P<pid>[0-9]+)\.tmp")


def process_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs on this host (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def left_over(path: Path, pid: int | None, now: float | None = None) -> bool:
    """Whether ``path``, written by process ``pid`` (``None``: unknown), was left by a killed process."""
    try:
        age = (time.time() if now is None else now) - path.lstat().st_mtime
    except OSError:
        return False
    if age > MAX_AGE_S:
        return True
    return pid is not None and pid != os.getpid() and age > GRACE_S and process_gone(pid)


def sweep_temporaries(folder: Path) -> list[Path]:
    """Remove the ``atomic_write`` temporaries that killed processes left in ``folder``.

    Returns:
        The files removed.
    """
    removed = []
    for path in Path(folder).glob(".*.tmp"):
        match = ATOMIC_TEMPORARY.fullmatch(path.name)
        if match and not path.is_dir() and left_over(path, int(match["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
