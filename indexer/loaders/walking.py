"""Finding the files to load: ``walk`` over the caller's roots, with include and exclude patterns."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from fnmatch import fnmatch
from pathlib import Path

from indexer.loaders.common import SUPPORTED_SUFFIXES, LoadError, is_beir_dir, real_path, shown_path
from retriever.errors import BadInputError


def walk(
    roots: Sequence[Path],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    skipped: list[LoadError] | None = None,
) -> Iterator[tuple[Path, Path]]:
    """``(root, path)`` for every file or BEIR directory to load, in sorted order.

    A root that is a file or a BEIR directory yields itself, unfiltered. A
    directory root is walked recursively, skipping hidden names (starting
    with "."), and yields the files with a supported suffix and the BEIR
    directories below it (whose other files are left to ``load_path``).
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
    return _walk_roots(roots, include, exclude, [] if skipped is None else skipped)


def _walk_roots(
    roots: list[Path], include: Sequence[str], exclude: Sequence[str], skipped: list[LoadError]
) -> Iterator[tuple[Path, Path]]:
    """``walk`` after its roots were checked: each path once, first root wins."""
    seen: set[str] = set()
    for root in roots:
        whole = not root.is_dir() or is_beir_dir(root)
        for entry in [root] if whole else _walk_dir(root, include, exclude, skipped):
            key = real_path(entry)
            if key not in seen:
                seen.add(key)
                yield root, entry


def _walk_dir(root: Path, include: Sequence[str], exclude: Sequence[str], skipped: list[LoadError]) -> list[Path]:
    """Loadable files and BEIR directories under ``root`` and inside it, sorted by relative path."""
    found: list[Path] = []
    linked_dirs: list[Path] = []

    def unreadable(error: OSError) -> None:
        where = real_path(Path(error.filename)) if error.filename else real_path(root)
        skipped.append(LoadError(shown_path(where), f"cannot read the directory: {error.strerror or error}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        here = Path(dirpath)
        beir = [name for name in dirnames if not name.startswith(".") and is_beir_dir(here / name)]
        linked_dirs.extend(here / name for name in dirnames
                           if not name.startswith(".") and name not in beir and (here / name).is_symlink())  # fmt: skip
        dirnames[:] = [name for name in dirnames if not name.startswith(".") and name not in beir]
        files = [
            name
            for name in filenames
            if not name.startswith(".") and Path(name).suffix.lower() in SUPPORTED_SUFFIXES
        ]
        found.extend(here / name for name in beir + files)
    kept = [
        path
        for path in found
        if _selected(path.relative_to(root).as_posix(), path.name, include, exclude)
    ]
    linked_dirs = [path for path in linked_dirs if _selected(path.relative_to(root).as_posix(), path.name, (), exclude)]
    inside = _inside(root, sorted(kept + linked_dirs, key=lambda path: path.relative_to(root).parts), skipped)
    return [path for path in inside if path not in linked_dirs]


def _inside(root: Path, paths: list[Path], skipped: list[LoadError]) -> list[Path]:
    """The ``paths`` whose real path lies inside ``root``'s; each other one is reported in ``skipped``."""
    top = real_path(root)
    kept = []
    for path in paths:
        real = real_path(path)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            kept.append(path)
        else:
            reason = f"a link to {shown_path(real)}, outside {shown_path(top)}; not read"
            skipped.append(LoadError(shown_path(path), reason))
    return kept


def _selected(relative: str, name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether a path matches any include (or there are none) and no exclude."""

    def matches(patterns: Sequence[str]) -> bool:
        return any(fnmatch(relative, pattern) or fnmatch(name, pattern) for pattern in patterns)

    return (not include or matches(include)) and not matches(exclude)
