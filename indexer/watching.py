"""``watch``: keep a collection in step with folders, from a first full pass, then from file-system events.

The watcher first reconciles (``indexer.reconciling``: files added, changed or
removed while no watcher ran are found; an unchanged file is read, never
embedded again), then follows the folders' events (``watchfiles``: inotify on
Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows, no polling of
its own). Events are debounced per path (``indexer.watch_events.Settling``);
the paths that settled together form one batch (``indexer.syncing.SyncPass``):
their files are read again and the changed documents written in bounded
batches through the one batch writer, one commit each, then the documents of
what is gone (deleted files, records gone from changed files, the old path
of a renamed file) are deleted in one commit. Every write goes through the
collection's write lock; a batch that cannot take it in time is tried again
later, and any other writer (``semsearch index``, a server) goes on unharmed.

The folders are watched before the first pass starts, so nothing that
happens during it is missed. A watcher stopped by its ``stop`` event finishes
the commit in progress and abandons the rest; a watcher killed outright
leaves the collection at its last commit; either way the next start's first
pass finds what was left.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from indexer.loaders import shown_path
from indexer.reconciling import reconcile
from indexer.runs import IndexReport
from indexer.syncing import SyncOptions, SyncPass
from indexer.watch_events import Settling, WatchedFolders
from retriever import Collection, WriteReport
from retriever.errors import BadInputError, CollectionLockedError, DeadlineExceededError, SemsearchError
from retriever.storage.faults import StorageFaultError

__all__ = ["DEFAULT_SETTLE_S", "SyncOptions", "WatchEvent", "watch"]

DEFAULT_SETTLE_S = 1.0
MAX_WAIT_FACTOR = 10  # a path written to without pause is read after this many settle periods
POLL_MS = 200  # how often the event loop looks at its settling paths when nothing happens
RETRY_S = (2.0, 5.0, 15.0, 30.0, 60.0)  # waits before trying a batch again that could not be written
# what a write may meet that passes: another writer holding the lock, a full disk, a deadline
PASSING_ERRORS = (CollectionLockedError, StorageFaultError, DeadlineExceededError)


@dataclass(frozen=True)
class WatchEvent:
    """What the watcher tells its ``on_event`` callback.

    Attributes:
        kind: ``"reconciling"`` (the first pass starts), ``"written"`` (a
            commit of the first pass changed something), ``"reconciled"`` (it
            ended), ``"watching"`` (events are followed from now), ``"batch"``
            (a batch of events was written), ``"retry"`` (a write could not be
            made and is tried again later) or ``"stopped"``.
        report: For ``"reconciled"`` and ``"batch"``, what was read, written,
            deleted and skipped; for ``"written"``, the commit's ids in ``report.written``.
        message: For ``"retry"``, the reason.
        folders: The watched folders (real paths).
    """

    kind: str
    report: IndexReport | None = None
    message: str = ""
    folders: tuple[str, ...] = field(default=())


def watch(
    folders: Sequence[str | os.PathLike],
    collection: Collection,
    *,
    stop: threading.Event | None = None,
    options: SyncOptions = SyncOptions(),
    settle_s: float = DEFAULT_SETTLE_S,
    on_event: Callable[[WatchEvent], None] | None = None,
    once: bool = False,
) -> IndexReport | None:
    """Keep ``collection`` in step with ``folders`` until ``stop`` is set.

    Args:
        folders: Directories to watch, recursively (a file, or a folder that
            does not exist, is a ``BadInputError``).
        collection: An open collection; the watcher writes it, the caller closes it.
        stop: Set it (from any thread, or a signal handler) to stop; ``None``
            watches until the process ends.
        options: Patterns, record fields, size limit and batch size, as for
            ``semsearch index`` (default: every file).
        settle_s: A file is read once it has had no event for this many
            seconds (default 1.0), or ``10 * settle_s`` after its first event
            when it is written to without pause.
        on_event: Told what the watcher does (``WatchEvent``); called from the
            watching thread.
        once: Reconcile, then return without watching.

    Returns:
        With ``once``, the first pass's report (``None`` when ``stop`` ended it
        early); otherwise ``None`` once stopped.

    Raises:
        BadInputError: A folder is missing or not a directory, a setting is out
            of range, or ``watchfiles`` is not installed.
        SemsearchError: The collection failed in a way another try cannot mend (it is damaged, say).
    """
    roots = check_folders(folders)
    if not settle_s > 0:
        raise BadInputError(f"settle_s must be positive, got {settle_s}")
    if options.batch_docs < 1:
        raise BadInputError(f"batch size must be at least 1, got {options.batch_docs}")
    watcher = _Watcher(collection, roots, options, stop or threading.Event(), settle_s, on_event or (lambda _: None))
    return watcher.run(once)


def check_folders(folders: Sequence[str | os.PathLike]) -> list[Path]:
    """``folders`` as real absolute paths, each once.

    Raises:
        BadInputError: None given, or one is missing or not a directory.
    """
    if isinstance(folders, (str, os.PathLike)) or not folders:
        raise BadInputError("watch needs a list of one or more folders")
    roots: list[Path] = []
    for folder in folders:
        path = Path(os.path.realpath(Path(folder).expanduser()))
        if not path.is_dir():
            raise BadInputError(f"{shown_path(folder)}: {'not a directory' if path.exists() else 'no such directory'}")
        if path not in roots:
            roots.append(path)
    return roots


class _Watcher:
    """One run of ``watch``: the event source, the settling paths, the passes."""

    def __init__(
        self,
        collection: Collection,
        roots: list[Path],
        options: SyncOptions,
        stop: threading.Event,
        settle_s: float,
        on_event: Callable[[WatchEvent], None],
    ) -> None:
        self.collection = collection
        self.roots = roots
        self.options = options
        self.stop = stop
        self.tell = on_event
        self.own = Path(os.path.realpath(collection.root))
        self.chooser = WatchedFolders(roots, options.include, options.exclude, leave_out=[self.own])
        self.settling = Settling(settle_s, settle_s * MAX_WAIT_FACTOR)
        self.failures = 0
        self.names = tuple(str(root) for root in roots)

    def run(self, once: bool) -> IndexReport | None:
        """Watch (unless ``once``), reconcile, then follow the events until stopped."""
        if once:
            return self._reconcile()
        events = _events(self.roots, self.stop)
        try:
            self._note(next(events, set()))  # the first answer comes once the folders are watched
            if self._reconcile() is None:
                return None
            self.tell(WatchEvent("watching", folders=self.names))
            for changes in events:
                self._note(changes)
                if self.stop.is_set():
                    break
                ready = self.settling.ready(time.monotonic())
                if ready:
                    self._batch(ready)
        finally:
            events.close()
            self.tell(WatchEvent("stopped", folders=self.names))
        return None

    def _reconcile(self) -> IndexReport | None:
        """The first pass, tried again while another writer holds the lock (or the disk is full)."""
        self.tell(WatchEvent("reconciling", folders=self.names))
        while not self.stop.is_set():
            try:
                report = reconcile(
                    self.collection,
                    self.roots,
                    self.options,
                    stop=self.stop,
                    leave_out=[self.own],
                    on_write=self._written,
                    on_path=self.chooser.remember,
                )
            except PASSING_ERRORS as exc:
                self.stop.wait(self._retry(str(exc)))
                continue
            self.failures = 0
            if report is not None:
                self.tell(WatchEvent("reconciled", report, folders=self.names))
            return report
        return None

    def _batch(self, ready: list[tuple[str, bool]]) -> None:
        """Read the settled paths again, write what changed, delete what is gone; try again later if blocked."""
        work = self.chooser.work(ready)
        if not work:
            return
        sync = SyncPass(self.collection, self.options, self.stop)
        sync.skipped(work.skipped)
        try:
            if not sync.read(work.read):
                return  # stopping: the next start's first pass reads what is left
            report = sync.finish(work.files, work.folders)
        except PASSING_ERRORS as exc:
            delay = self._retry(str(exc))
            self.settling.again(ready, time.monotonic(), delay)
            return
        self.failures = 0
        self.chooser.done(work)
        if (
            report.written.added
            or report.written.updated
            or report.written.deleted
            or report.skipped
            or report.not_read
        ):
            self.tell(WatchEvent("batch", report, folders=self.names))

    def _retry(self, reason: str) -> float:
        """Tell why a write waits, and return how long it waits (longer after each failure in a row)."""
        delay = RETRY_S[min(self.failures, len(RETRY_S) - 1)]
        self.failures += 1
        self.tell(WatchEvent("retry", message=f"{reason}; trying again in {delay:g} s", folders=self.names))
        return delay

    def _written(self, result: WriteReport) -> None:
        self.tell(WatchEvent("written", IndexReport(written=result), folders=self.names))

    def _note(self, changes: set) -> None:
        """Record a set of ``watchfiles`` changes as settling paths."""
        from watchfiles import Change

        if changes:
            self.settling.note(((path, change == Change.added) for change, path in changes), time.monotonic())


def _events(roots: list[Path], stop: threading.Event) -> Iterator[set]:
    """``watchfiles.watch`` over ``roots``: a set of changes at least every ``POLL_MS`` milliseconds, empty when
    nothing happened; it ends when ``stop`` is set.

    Raises:
        BadInputError: ``watchfiles`` is not installed, or the folders cannot be watched (too many of them
            for the system's limit on watches, say).
    """
    try:
        from watchfiles import watch as watch_changes
    except ImportError:
        raise BadInputError("watching folders needs watchfiles: pip install watchfiles") from None
    changes = watch_changes(
        *roots,
        watch_filter=None,
        debounce=POLL_MS * 2,
        step=50,
        stop_event=stop,
        rust_timeout=POLL_MS,
        yield_on_timeout=True,
        raise_interrupt=False,
        ignore_permission_denied=True,
    )
    try:
        yield from changes
    except OSError as exc:
        raise SemsearchError(
            f"cannot watch {', '.join(map(str, roots))}: {exc} (on Linux, a tree with many "
            "folders may need a higher fs.inotify.max_user_watches)"
        ) from None
    finally:
        changes.close()
