"""From file-system events to the work of one batch: which paths settled, what to read, what to check.

``Settling`` debounces: a path is ready once it has had no event for
``settle_s`` seconds (or, written to without pause, ``max_wait_s`` after its
first event), so a burst of events on one file is read once. ``WatchedFolders``
turns the ready paths into a ``Work``: the files to read again (the ones
``indexer.loaders.walk`` would yield: regular files and BEIR folders, not
hidden, kept by the include and exclude patterns matched against the path
relative to its folder, not through a link leaving it), the folders that appeared (walked),
and the paths whose stored documents the batch checks (the files read, the
folders that appeared, and the paths that are gone, which take their
documents with them, and those below them when they were folders that held
something read: the known folders, noted as files are read).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from indexer.loaders import LoadError, is_beir_dir, walk
from indexer.loaders.walking import link_outside, selected


@dataclass
class Work:
    """What one batch does.

    Attributes:
        read: Files and BEIR folders to read again.
        files: Files whose stored documents the batch checks (real, absolute paths).
        folders: Paths whose stored documents, and those below them, the batch
            checks: folders that appeared, and paths that are gone.
        skipped: What was left out with a reason (a link leaving its folder, an unreadable folder).
        vanished: Known folders that are gone (forgotten by ``WatchedFolders.done`` once the batch is written).
    """

    read: list[Path] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    skipped: list[LoadError] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.read or self.files or self.folders or self.skipped)


class Settling:
    """Paths with recent events, until they have been quiet for ``settle_s`` seconds.

    Args:
        settle_s: Quiet time after a path's last event before it is ready.
        max_wait_s: A path written to without pause is ready this long after its first event.
    """

    def __init__(self, settle_s: float, max_wait_s: float) -> None:
        self.settle_s = settle_s
        self.max_wait_s = max_wait_s
        self.pending: dict[str, tuple[float, float, bool]] = {}  # path -> (first event, last event, appeared)
        self.not_before = 0.0

    def note(self, paths: Iterable[tuple[str, bool]], now: float) -> None:
        """Record an event on each ``(path, appeared)``; ``appeared``: it was created or moved in."""
        for path, appeared in paths:
            first, _, before = self.pending.get(path, (now, now, False))
            self.pending[path] = (first, now, before or appeared)

    def ready(self, now: float) -> list[tuple[str, bool]]:
        """Take the paths that settled, ``(path, appeared)`` each, in path order."""
        if now < self.not_before:
            return []
        done = sorted(
            path
            for path, (first, last, _) in self.pending.items()
            if now - last >= self.settle_s or now - first >= self.max_wait_s
        )
        return [(path, self.pending.pop(path)[2]) for path in done]

    def again(self, paths: Iterable[tuple[str, bool]], now: float, delay_s: float) -> None:
        """Put back the paths of a batch that could not be written; nothing is ready for ``delay_s`` seconds."""
        for path, appeared in paths:
            _, last, before = self.pending.get(path, (now, now, False))
            self.pending[path] = (now, last, before or appeared)
        self.not_before = now + delay_s

    def __len__(self) -> int:
        return len(self.pending)


class WatchedFolders:
    """The watched folders and the rules that choose their files, as ``indexer.loaders.walk`` applies them.

    Args:
        folders: Real (symlink-free) absolute paths of directories.
        include: Glob patterns a file must match (default: every file).
        exclude: Glob patterns that leave a file out.
        leave_out: Folders never read (the collection's own directory).
    """

    def __init__(
        self,
        folders: Sequence[Path],
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        leave_out: Sequence[Path] = (),
    ) -> None:
        self.folders = [Path(folder) for folder in folders]
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self.leave_out = tuple(Path(folder) for folder in leave_out)
        self.known: set[str] = set()  # the folders below the watched ones that hold something read

    def remember(self, path: Path) -> None:
        """Note the folders from ``path`` (itself when a folder: a BEIR corpus) up to its watched folder."""
        here = path if path.is_dir() else path.parent
        while str(here) not in self.known and any(folder in here.parents for folder in self.folders):
            self.known.add(str(here))
            here = here.parent

    def forget(self, path: str) -> None:
        """Drop ``path`` and the folders below it from the known folders."""
        below = path.rstrip(os.sep) + os.sep
        self.known = {known for known in self.known if known != path and not known.startswith(below)}

    def work(self, ready: Iterable[tuple[str, bool]]) -> Work:
        """What the batch of ``ready`` paths (``(path, appeared)`` each) reads and checks.

        A file (or BEIR folder) that ``walk`` would yield is read and checked;
        a folder that appeared is walked, and checked; a path that is gone is
        checked (its documents, and those below it, are deleted); anything
        else (a folder whose contents changed, a file ``walk`` leaves out) is
        neither.
        """
        work = Work()
        for name, appeared in ready:
            path = Path(name)
            folder = self.folder_of(path)
            if folder is None or self._hidden(path, folder):
                continue
            unit = self._beir_folder(path, folder) or path
            if not os.path.lexists(unit) and str(unit) in self.known:  # a folder gone, with what it held
                work.folders.append(str(unit))
                work.vanished.append(str(unit))
            elif not os.path.lexists(unit):  # a file gone
                work.files.append(str(unit))
            elif unit.is_dir() and not is_beir_dir(unit):
                if appeared:
                    work.folders.append(str(unit))
                    work.read += self._walk(unit, folder, work.skipped)
            elif self.chosen(unit, folder, work.skipped):
                (work.folders if unit.is_dir() else work.files).append(os.path.realpath(unit))
                work.read.append(unit)
        work.read = list(dict.fromkeys(work.read))
        return work

    def done(self, work: Work) -> None:
        """Note what a written batch changed in the known folders: the ones that vanished, the files it read."""
        for path in work.vanished:
            self.forget(path)
        for path in work.read:
            self.remember(path)

    def folder_of(self, path: Path) -> Path | None:
        """The first watched folder holding ``path`` (not the collection's own directory), or ``None``."""
        if any(path == out or out in path.parents for out in self.leave_out):
            return None
        return next((folder for folder in self.folders if folder in path.parents), None)

    def chosen(self, path: Path, folder: Path, skipped: list[LoadError]) -> bool:
        """Whether ``walk`` over ``folder`` would yield the file or BEIR folder ``path``.

        A link whose real path leaves ``folder`` is reported in ``skipped``,
        as the walk reports it, and not chosen.
        """
        if path == folder:
            return True  # a BEIR folder watched itself: walk yields it unfiltered
        if not is_beir_dir(path) and not path.is_file():
            return False  # walk yields regular files, whatever their names (load_path decides what they are)
        if not selected(path.relative_to(folder).as_posix(), path.name, self.include, self.exclude):
            return False
        outside = link_outside(path, str(folder))
        if outside is not None:
            skipped.append(outside)
        return outside is None

    def _walk(self, directory: Path, folder: Path, skipped: list[LoadError]) -> list[Path]:
        """The files below a folder that appeared which ``walk`` over ``folder`` would yield."""
        found = [path for _root, path in walk([directory], (), (), skipped)]
        return [path for path in found if self.folder_of(path) == folder and self.chosen(path, folder, skipped)]

    @staticmethod
    def _hidden(path: Path, folder: Path) -> bool:
        """Whether a name between ``folder`` and ``path`` starts with ".", or ``path`` lies behind a linked folder."""
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            return True
        parent = path.parent
        return parent.exists() and os.path.realpath(parent) != str(parent)

    @staticmethod
    def _beir_folder(path: Path, folder: Path) -> Path | None:
        """The outermost BEIR folder from ``folder`` down to ``path``'s parent (``walk`` reads it whole), or None."""
        here = folder
        for part in path.relative_to(folder).parts:
            if is_beir_dir(here):
                return here
            here = here / part
        return None
