"""Copying a collection's files as its own: regular files opened without following links, never waiting on FIFOs.

A collection directory or a snapshot may come from someone else, so a copy
opens each file with ``O_NOFOLLOW | O_NONBLOCK`` and checks it is a regular
file (a symbolic link, FIFO, device or folder is a ``CorruptCollectionError``
naming it), hard-links the very file it opened (never what a link points to),
and copies from the open descriptor where links cannot be made.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

from retriever.errors import CorruptCollectionError
from retriever.storage.atomic import fsync_path


class FileGone(Exception):
    """A file to copy is missing: a later commit or merge removed it (the copy of that generation starts again)."""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path``, opened without following a link or waiting on a FIFO."""
    descriptor = open_regular(path)
    with os.fdopen(descriptor, "rb") as stream:
        return stream.read()


def open_regular(path: Path) -> int:
    """A read-only descriptor of ``path``, which must be a regular file itself.

    Raises:
        FileNotFoundError: Nothing is there.
        CorruptCollectionError: A symbolic link, FIFO, device or folder is there.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CorruptCollectionError(f"{path} is a symbolic link; a collection's files must be its own") from None
        if exc.errno == errno.EISDIR:
            raise CorruptCollectionError(f"{path} is not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise CorruptCollectionError(f"{path} is not a regular file")
    return descriptor


def copy_tree(source: Path, target: Path, counts: dict[str, int], link: bool = True) -> None:
    """The folders and regular files under ``source`` (names starting with ``.``, temporaries, left out)
    into the new folder ``target``, linked (``link``) or copied; nothing when there is no ``source``.

    Raises:
        CorruptCollectionError: ``source`` or anything under it is a symbolic link or no folder or regular file.
    """
    try:
        mode = os.lstat(source).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise CorruptCollectionError(f"{source} is not a folder of the collection's own (a link, or a file)")
    target.mkdir()
    with os.scandir(source) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                copy_tree(Path(entry.path), target / entry.name, counts, link)
            else:
                link_or_copy(Path(entry.path), target / entry.name, counts, link)


def link_or_copy(source: Path, target: Path, counts: dict[str, int], link: bool = True) -> None:
    """The regular file ``source`` at ``target``: hard-linked (``link``) where the file system allows, copied
    otherwise; a link, FIFO or device at ``source`` is refused, never followed.

    Raises:
        FileGone: ``source`` is missing (a later commit or merge removed it).
        CorruptCollectionError: ``source`` is no regular file of its own.
    """
    try:
        descriptor = open_regular(source)
    except FileNotFoundError:
        raise FileGone(source) from None
    try:
        opened = os.fstat(descriptor)
        if link and _linked(source, target, opened):
            counts["linked"] += 1
        else:
            with os.fdopen(os.dup(descriptor), "rb") as reader, open(target, "xb") as writer:
                shutil.copyfileobj(reader, writer)
            fsync_path(target)
            counts["copied"] += 1
    finally:
        os.close(descriptor)
    counts["bytes"] += opened.st_size


def _linked(source: Path, target: Path, opened: os.stat_result) -> bool:
    """Whether ``target`` is now a hard link of the file ``opened`` (the one at ``source`` when it was opened).

    The link is made of ``source`` itself, never of what a link there points to; a ``source`` replaced since
    it was opened is unlinked again (False: the caller copies what it opened).
    """
    try:
        os.link(source, target, follow_symlinks=False)
    except FileNotFoundError:
        raise FileGone(source) from None
    except OSError:
        return False  # another file system, or links refused
    made = os.lstat(target)
    if (made.st_dev, made.st_ino) != (opened.st_dev, opened.st_ino):
        target.unlink()
        return False
    return True
