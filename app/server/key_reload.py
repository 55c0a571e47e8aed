"""Keys that follow their file: ``semsearch serve --keys-file FILE`` reads FILE again when it changes.

A key removed with ``semsearch keys remove`` is refused within about a
second, without a restart. On a request, at most once every
``check_every_s`` seconds, the file's identity (device, inode, size,
modification time) is looked at; when it differs from the last read, the
file is read again. SIGHUP makes the next request read it whatever its
identity. A new file that cannot be read or parsed changes nothing: the keys
read before stay in force, and one error line names the file and the cause
(once per state of the file).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable

from app.server.access import ApiKey, KeyRing
from retriever.errors import BadInputError

KEYS_FILE_ENV = "SEMSEARCH_KEYS_FILE"  # the keys file, for the worker processes of ``serve --workers N``
CHECK_EVERY_S = 1.0

log = logging.getLogger("semsearch.server")

#: ``(device, inode, size, modification time in ns)`` of a file: a new one when it is replaced or rewritten.
FileIdentity = tuple[int, int, int, int]


def file_identity(path: Path) -> FileIdentity:
    """The file's identity now; ``OSError`` when it cannot be looked at."""
    seen = os.stat(path)
    return seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns


class ReloadingKeyRing:
    """The keys of a keys file, kept as the file is, beside keys that do not change.

    Used where a ``KeyRing`` is (``match``, ``keys``, ``merged``, ``len``).
    It is always true: a service given a keys file requires a key, even when
    the file holds none for the moment.

    Args:
        path: The keys file (read now: a missing, unreadable or malformed one raises ``BadInputError``).
        fixed: Keys from elsewhere (``$SEMSEARCH_KEYS``, ``--api-key``), kept as they are; their names must
            differ from the file's.
        check_every_s: Least seconds between two looks at the file (default 1).
        clock: Monotonic seconds (default ``time.monotonic``).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        fixed: KeyRing | None = None,
        *,
        check_every_s: float = CHECK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.fixed = Path(path), fixed or KeyRing()
        self.check_every_s, self.clock = check_every_s, clock
        try:
            identity = file_identity(self.path)
        except OSError as exc:
            raise BadInputError(f"keys file {self.path}: cannot read it ({exc.strerror or exc})") from None
        self._ring = self._read()
        self._identity: FileIdentity | None = identity  # the state of the file last read, well or not
        self._checked_at = clock()
        self._forced = False
        self._lock = threading.Lock()

    @property
    def keys(self) -> list[ApiKey]:
        """The keys in force: the fixed ones, then the file's as last read well."""
        return self._ring.keys

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return len(self._ring)

    def merged(self, other: KeyRing) -> "ReloadingKeyRing":
        """The same file, with ``other``'s keys added to the fixed ones."""
        return ReloadingKeyRing(self.path, self.fixed.merged(other), check_every_s=self.check_every_s, clock=self.clock)

    def text(self) -> str:
        """The keys in force, as a keys file."""
        return self._ring.text()

    def match(self, token: bytes) -> ApiKey | None:
        """The key whose hash is ``token``'s, after reading the file again if it is due (``refresh``)."""
        self.refresh()
        return self._ring.match(token)

    def reload_on(self, signum: int = signal.SIGHUP) -> None:
        """Have ``signum`` (SIGHUP by default) make the next request read the file; call from the main thread."""
        signal.signal(signum, lambda _signum, _frame: self.request_reload())

    def request_reload(self) -> None:
        """Read the file at the next ``refresh``, whatever its identity (safe in a signal handler)."""
        self._forced = True

    def refresh(self) -> None:
        """Read the file again when a reload was asked for, or ``check_every_s`` has passed and it changed.

        A file that cannot be read or parsed leaves the keys as they were and
        logs one error naming it (once for each state of the file); a request
        that comes while another thread reads the file gets the keys in force.
        """
        now = self.clock()
        if not self._forced and now - self._checked_at < self.check_every_s:
            return
        if not self._lock.acquire(blocking=False):
            return
        try:
            self._checked_at, forced, self._forced = now, self._forced, False
            try:
                identity: FileIdentity | None = file_identity(self.path)
            except OSError as exc:
                identity, problem = None, f"keys file {self.path}: cannot read it ({exc.strerror or exc})"
            if identity == self._identity and not forced:
                return
            self._identity = identity
            try:
                if identity is None:
                    raise BadInputError(problem)
                self._ring = self._read()
            except BadInputError as exc:
                log.error("semsearch: %s; the %d key(s) read before stay in force", exc, len(self._ring))
        finally:
            self._lock.release()

    def _read(self) -> KeyRing:
        """The fixed keys and the file's; ``BadInputError`` naming the file when it cannot be used."""
        source = f"keys file {self.path}"
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInputError(f"{source}: cannot read it ({exc})") from None
        try:
            return self.fixed.merged(KeyRing.parse(text, source))
        except BadInputError as exc:
            problem = str(exc)
            raise BadInputError(problem if problem.startswith(source) else f"{source}: {problem}") from None
