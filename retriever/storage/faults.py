"""A write stopped by the file system: disk full, quota, or read-only, said as such.

Whichever layer meets it (NumPy, FAISS, SQLite, the OS), the error becomes
one ``StorageFaultError`` naming the collection and the cause. The write
changed nothing: the last committed generation stays whole, and the next
write succeeds once space is freed or the file system is writable again.
"""

from __future__ import annotations

import errno
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy.exc import OperationalError

from retriever.errors import SemsearchError

_CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
}
_MESSAGES = {  # how FAISS and SQLite say the same
    "No space left on device": errno.ENOSPC,
    "database or disk is full": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
    "readonly database": errno.EROFS,
}


class StorageFaultError(SemsearchError, OSError):
    """A write stopped because the disk is full, over quota, or read-only; nothing was committed."""


@contextmanager
def file_system_faults(root: Path, what: str) -> Iterator[None]:
    """Say a full, over-quota or read-only file system under ``root`` plainly when ``what`` (a write) meets it."""
    try:
        yield
    except StorageFaultError:
        raise
    except (OSError, RuntimeError, OperationalError) as exc:
        code = exc.errno if isinstance(exc, OSError) and exc.errno in _CAUSES else _code_in(str(exc))
        if code is None:
            raise
        raise StorageFaultError(
            code,
            f"{what} in {root} stopped: {_CAUSES[code]}; nothing was committed (the collection is as it was): "
            "free space or make it writable, then run the write again",
        ) from exc


def _code_in(message: str) -> int | None:
    return next((code for text, code in _MESSAGES.items() if text in message), None)
