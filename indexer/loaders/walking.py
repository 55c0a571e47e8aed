"""Finding the files to load: ``walk`` over the caller's roots, with include and exclude patterns."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from fnmatch import fnmatch
from pathlib import Path

from indexer.loaders.common import LoadError, is_beir_dir, real_path, shown_path
from retriever.errors import BadInputError

HIDDEN = "hidden, not walked"


def walk(
    roots: Sequence[Path],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    skipped: list[LoadError] | None = None,
    unread: list[LoadError] | None = None,
) -> Iterator[tuple[Path, Path]]:
    """``(root, path)`` for every file or BEIR directory to load, in sorted order.

    A root that is a file or a BEIR directory yields itself, unfiltered. A
    directory root is walked recursively and yields every regular file below
    it, whatever its name (``load_path`` decides what it is), and the BEIR
    directories (whose other files are left to ``load_path``). Hidden names
    (starting with ".") are not walked into; they and what is not a regular
    file (a FIFO, a socket, a device) are left out and, when ``unread`` is
    given, appended to it as a ``LoadError`` with ``unread=True`` (a hidden
    folder counts once, for all it holds).
    ``include`` and ``exclude`` are ``fnmatch`` patterns, matched against the
    path relative to the root (POSIX form) and against the bare name: an
    entry is kept when it matches any include (or include is empty, the
    default) and no exclude (default none). A path reached from two roots is
    yielded once. What a walk cannot or must not read is left out and, when
    ``skipped`` is given, appended to it as a ``LoadError``: a directory that
    cannot be listed (its real path as source), and a link (to a file, a
    BEIR directory or a directory) whose real path leaves its root (the
    link's path as source), which is never followed.

    Raises:
        BadInputError: a root does not exist (raised by the call, before any
            path is yielded).
    """
    roots = [Path(root) for root in roots]
    for root in roots:
        if not root.exists():
            raise BadInputError(f"{root}: no such file or directory")
    return _walk_roots(roots, include, exclude, [] if skipped is None else skipped, [] if unread is None else unread)


def _walk_roots(
    roots: list[Path], include: Sequence[str], exclude: Sequence[str], skipped: list[LoadError], unread: list[LoadError]
) -> Iterator[tuple[Path, Path]]:
    """``walk`` after its roots were checked: each path once, first root wins."""
    seen: set[str] = set()
    for root in roots:
        whole = not root.is_dir() or is_beir_dir(root)
        for entry in [root] if whole else _walk_dir(root, include, exclude, skipped, unread):
            key = real_path(entry)
            if key not in seen:
                seen.add(key)
                yield root, entry


def _walk_dir(
    root: Path, include: Sequence[str], exclude: Sequence[str], skipped: list[LoadError], unread: list[LoadError]
) -> list[Path]:
    """Regular files and BEIR directories under ``root`` and inside it, sorted by relative path."""
    found: list[Path] = []
    linked_dirs: list[Path] = []
    passed: list[tuple[Path, str]] = []

    def unreadable(error: OSError) -> None:
        where = real_path(Path(error.filename)) if error.filename else real_path(root)
        skipped.append(LoadError(shown_path(where), f"cannot read the directory: {error.strerror or error}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        here = Path(dirpath)
        passed.extend((here / name, HIDDEN) for name in dirnames + filenames if name.startswith("."))
        dirnames[:] = [name for name in dirnames if not name.startswith(".")]
        beir = [name for name in dirnames if is_beir_dir(here / name)]
        linked_dirs.extend(here / name for name in dirnames if name not in beir and (here / name).is_symlink())
        dirnames[:] = [name for name in dirnames if name not in beir]
        for name in filenames:
            if not name.startswith("."):
                kind = _not_regular(here / name)
                found.extend([here / name] if kind is None else [])
                passed.extend([(here / name, kind)] if kind else [])
        found.extend(here / name for name in beir)
    kept = [path for path in found if selected(path.relative_to(root).as_posix(), path.name, include, exclude)]
    linked_dirs = [path for path in linked_dirs if selected(path.relative_to(root).as_posix(), path.name, (), exclude)]
    unread.extend(
        LoadError(shown_path(path), reason, unread=True)
        for path, reason in sorted(passed)
        if selected(path.relative_to(root).as_posix(), path.name, (), exclude)
    )
    inside = _inside(root, sorted(kept + linked_dirs, key=lambda path: path.relative_to(root).parts), skipped)
    return [path for path in inside if path not in linked_dirs]


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it is no regular file (following links): a FIFO, a socket, a device; None else.

    A path that cannot be examined (a dangling link) is None: it is yielded,
    and loading it reports why.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"not a regular file ({kind})"


def _inside(root: Path, paths: list[Path], skipped: list[LoadError]) -> list[Path]:
    """The ``paths`` whose real path lies inside ``root``'s; each other one is reported in ``skipped``."""
    top = real_path(root)
    kept = []
    for path in paths:
        outside = link_outside(path, top)
        if outside is None:
            kept.append(path)
        else:
            skipped.append(outside)
    return kept


def link_outside(path: Path, top: str) -> LoadError | None:
    """The error of a path whose real path leaves the real folder ``top`` (a link a walk never follows);
    ``None`` for a path inside it."""
    real = real_path(path)
    if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
        return None
    return LoadError(shown_path(path), f"a link to {shown_path(real)}, outside {shown_path(top)}; not read")


def selected(relative: str, name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a path matches any include (or there are none) and no exclude."""

    def matches(patterns: Sequence[str]) -> bool:
        return any(fnmatch(relative, pattern) or fnmatch(name, pattern) for pattern in patterns)

    return (not include or matches(include)) and not matches(exclude)
