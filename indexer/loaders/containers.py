"""Containers: compressed files (.gz, .bz2, .xz) read inside, archives (.zip, .tar and compressed tars) by member.

A compressed file is one document (or the records of a compressed JSONL or
CSV file), read by the reader of what is inside: ``README.gz`` is text. An
archive gives the documents of its members, each with the source
``"<archive source>::<member path>"`` (its id, as a file's id is its path)
and the metadata ``archive`` (the archive's source).

Nothing is trusted before it is checked. An archive is refused whole, before
anything is taken out, when it declares more than ``MAX_MEMBERS`` members or
more than ``MAX_EXPANDED_BYTES`` in all (a tar's headers are read first, for
that), or sits inside an archive inside an archive (one level of nesting is
read). A member is refused, with a reason naming the archive and the member,
when it declares more than the size limit or more than ``MAX_RATIO`` times its
compressed size (past ``RATIO_FLOOR``), when its path
leaves the archive (absolute, ``..``), when it is a link or a device, or when
it is encrypted. Declared sizes can lie, so every byte taken out is counted
against the same limits as it streams. A member is taken out into a
temporary file of its own (so the path-based readers can open it), removed
once read.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import IO

from indexer.loaders.common import (
    STREAMING_FORMATS,
    LoadError,
    NotRead,
    ReadContext,
    Rejected,
    error_line,
    member_source,
    too_big,
)
from indexer.loaders.detect import decompressed_head, detect_bytes, format_of_name, inner_name
from retriever.documents import Document

MAX_MEMBERS = 10_000
MAX_EXPANDED_BYTES = 2 * 1024**3  # all of one archive's (or compressed file's) content, expanded
MAX_RATIO = 200  # expanded size over compressed size, for content past RATIO_FLOOR
RATIO_FLOOR = 1024 * 1024  # small content may compress well: the ratio is checked past this size
MAX_ARCHIVE_DEPTH = 2  # an archive, and archives inside it; not deeper
_COPY_BYTES = 1024 * 1024
_OPENERS = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}
# What a damaged or truncated stream raises while it is read.
STREAM_ERRORS = (
    OSError,
    EOFError,
    ValueError,
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
    tarfile.TarError,
    NotImplementedError,
    RuntimeError,
)


def read_gzip(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """What a gzip file holds (see ``read_compressed``)."""
    return read_compressed(path, source, context, "gzip")


def read_bzip2(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """What a bzip2 file holds (see ``read_compressed``)."""
    return read_compressed(path, source, context, "bzip2")


def read_xz(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """What an xz file holds (see ``read_compressed``)."""
    return read_compressed(path, source, context, "xz")


def read_compressed(path: Path, source: str, context: ReadContext, compression: str) -> Iterator[Document | LoadError]:
    """The documents of the file inside a compressed file, under ``source``, with the metadata ``compression``.

    The file inside is named as the compressed one without its suffix, and
    its format is detected again. It may expand to ``context.max_bytes`` when
    it is one document, to ``MAX_EXPANDED_BYTES`` when it holds many, and past
    ``RATIO_FLOOR`` to ``MAX_RATIO`` times its own size. A compressed file
    declares no size to trust (gzip's trailer counts modulo 4 GiB and is
    garbage in a truncated file), so these limits hold as it streams.

    Raises:
        Rejected: the file is inside another compressed file, expands past
            its limit, or is damaged or truncated.
    """
    if context.compressed:
        raise Rejected(f"{compression} inside a compressed file; not read")
    name = inner_name(path.name)
    inner = detect_bytes(decompressed_head(path, compression), name).format
    limit = MAX_EXPANDED_BYTES if inner in STREAMING_FORMATS else context.max_bytes
    packed = path.stat().st_size
    with _opened(path, compression) as stream, _taken_out(stream, name, limit, packed) as copy:
        inside = replace(context, compressed=True)
        yield from _tagged(
            context.read_member(copy, source, PurePosixPath(name).stem, inside), "compression", compression
        )


def read_zip(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """The documents of a ZIP archive's members, in the archive's order (see the module docstring).

    Raises:
        Rejected: the archive is too deeply nested, malformed, or declares
            too many members or too many bytes.
    """
    _check_depth(context)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise Rejected(f"malformed zip: {error_line(exc)}") from None
    with archive:
        members = [info for info in archive.infolist() if not info.is_dir()]
        _check_totals(len(members), sum(info.file_size for info in members))
        inside = replace(context, archives=(*context.archives, source), compressed=False)
        for info in members:
            where = member_source(source, info.filename)
            yield from _member(
                where,
                source,
                inside,
                lambda info=info: _zip_member(archive, info, context.max_bytes),
                PurePosixPath(info.filename),
            )


def _zip_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, max_bytes: int) -> tuple[IO[bytes], int, int]:
    """``(stream, limit, packed size)`` of a ZIP member that passed its checks.

    Raises:
        Rejected: the member is a link, encrypted, or declares too much.
    """
    _check_path(info.filename)
    if stat.S_ISLNK(info.external_attr >> 16):
        raise Rejected("a link inside the archive; not read")
    if info.flag_bits & 0x1:
        raise Rejected("encrypted member, needs a password")
    limit = _member_limit(info.filename, info.file_size, max_bytes)
    _check_declared(info.file_size, info.compress_size, limit)
    return archive.open(info), limit, info.compress_size


def read_tar(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """The documents of a tar archive's regular members (compressed or not), read as one stream.

    Its headers are read first (``_check_tar``); then each member is taken
    out in turn. Folders are structure and give nothing.

    Raises:
        Rejected: the archive is too deeply nested, malformed, or declares
            too many members or too many bytes.
    """
    _check_depth(context)
    packed = path.stat().st_size
    _check_tar(path, packed)
    inside = replace(context, archives=(*context.archives, source), compressed=False)
    try:
        with tarfile.open(path, mode="r|*") as archive:
            for info in archive:
                if not info.isdir():
                    where = member_source(source, info.name)
                    yield from _member(
                        where,
                        source,
                        inside,
                        lambda info=info: _tar_member(archive, info, context),
                        PurePosixPath(info.name),
                    )
    except STREAM_ERRORS as exc:
        raise Rejected(f"malformed tar: {error_line(exc)}") from None


def _tar_member(archive: tarfile.TarFile, info: tarfile.TarInfo, context: ReadContext) -> tuple[IO[bytes], int, int]:
    """``(stream, limit, packed size)`` of a tar member that passed its checks.

    Raises:
        Rejected: the member is a link, a device or FIFO, or declares too much.
    """
    _check_path(info.name)
    if info.issym() or info.islnk():
        raise Rejected("a link inside the archive; not read")
    if not info.isreg():
        raise Rejected("a device or FIFO inside the archive; not read")
    limit = _member_limit(info.name, info.size, context.max_bytes)
    _check_declared(info.size, info.size, limit)
    stream = archive.extractfile(info)
    if stream is None:
        raise Rejected("no content in the archive")
    return stream, limit, info.size


def _check_tar(path: Path, packed: int) -> None:
    """Read a tar's headers (nothing is taken out) and refuse it before extraction when it declares too much.

    Raises:
        Rejected: more than ``MAX_MEMBERS`` members or ``MAX_EXPANDED_BYTES``
            in all, content expanding more than ``MAX_RATIO`` times, or a
            malformed archive.
    """
    members = expanded = 0
    try:
        with tarfile.open(path, mode="r|*") as archive:
            for info in archive:
                members += 1
                expanded = info.offset_data + max(info.size, 0)
                _check_totals(members, expanded)
                _check_declared(expanded, packed, MAX_EXPANDED_BYTES)
    except STREAM_ERRORS as exc:
        raise Rejected(f"malformed tar: {error_line(exc)}") from None


def _member(
    where: str, archive: str, context: ReadContext, open_member, path: PurePosixPath
) -> Iterator[Document | LoadError]:
    """The documents of one member, ``open_member()`` giving its checked stream; a ``LoadError`` when refused."""
    if any(part.startswith(".") and part not in (".", "..") for part in path.parts):
        yield LoadError(where, "hidden, not read", unread=True)
        return
    try:
        stream, limit, packed = open_member()
        with stream, _taken_out(stream, path.name, limit, packed) as copy:
            yield from _tagged(context.read_member(copy, where, path.stem, context), "archive", archive)
    except NotRead as exc:
        yield LoadError(where, str(exc), unread=True)
    except Rejected as exc:
        yield LoadError(where, str(exc))
    except STREAM_ERRORS as exc:
        yield LoadError(where, f"damaged member: {type(exc).__name__}: {error_line(exc)}")


@contextmanager
def _opened(path: Path, compression: str) -> Iterator[IO[bytes]]:
    """The decompressed stream of a compressed file."""
    try:
        stream = _OPENERS[compression](path, "rb")
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    with stream:
        yield stream


@contextmanager
def _taken_out(stream: IO[bytes], name: str, limit: int, packed: int) -> Iterator[Path]:
    """A temporary copy of ``stream`` named ``name`` (made safe), removed on exit.

    At most ``limit`` bytes are taken out, and past ``RATIO_FLOOR`` no more
    than ``MAX_RATIO`` times ``packed``: a stream that goes further is
    refused as it is read, whatever it declared.

    Raises:
        Rejected: the stream goes past a limit, ends early or is damaged.
    """
    folder = Path(tempfile.mkdtemp(prefix="semsearch-member-"))
    try:
        copy = folder / _safe_name(name)
        written = 0
        with copy.open("wb") as out:
            try:
                while chunk := stream.read(_COPY_BYTES):
                    written += len(chunk)
                    _check_expanding(written, packed, limit)
                    out.write(chunk)
            except EOFError as exc:
                raise Rejected(f"truncated: {error_line(exc)}") from None
            except (OSError, ValueError, zlib.error, lzma.LZMAError, zipfile.BadZipFile) as exc:
                raise Rejected(f"damaged: {error_line(exc)}") from None
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_expanding(written: int, packed: int, limit: int) -> None:
    """Refuse content taken out once it passes ``limit`` or the ratio to its ``packed`` size."""
    if written > limit:
        raise Rejected(f"expands past the {_size(limit)} limit; not read")
    if written > RATIO_FLOOR and written > MAX_RATIO * max(packed, 1):
        raise Rejected(f"expands over {MAX_RATIO} times its compressed {_size(packed)} (a compression bomb?); not read")


def _check_declared(declared: int, packed: int, limit: int) -> None:
    """Refuse, before anything is taken out, content that declares more than ``limit`` or the ratio allows."""
    if declared > limit:
        raise Rejected(f"declares {_size(declared)} expanded, over the {_size(limit)} limit; not read")
    if declared > RATIO_FLOOR and declared > MAX_RATIO * max(packed, 1):
        raise Rejected(
            f"declares {_size(declared)} from {_size(packed)} compressed, over {MAX_RATIO} times "
            "(a compression bomb?); not read"
        )


def _check_totals(members: int, expanded: int) -> None:
    """Refuse a whole archive that declares too many members or too many bytes."""
    if members > MAX_MEMBERS:
        raise Rejected(f"archive has over {MAX_MEMBERS:,} members; not read")
    if expanded > MAX_EXPANDED_BYTES:
        raise Rejected(
            f"archive declares {_size(expanded)} expanded, over the {_size(MAX_EXPANDED_BYTES)} limit; not read"
        )


def _check_depth(context: ReadContext) -> None:
    if len(context.archives) >= MAX_ARCHIVE_DEPTH:
        raise Rejected(f"an archive nested {len(context.archives)} archives deep; one level of nesting is read")


def _check_path(name: str) -> None:
    """Refuse a member path that leaves the archive: absolute, with a drive, or through ``..``."""
    posix = PurePosixPath(name.replace("\\", "/"))
    if posix.is_absolute() or ".." in posix.parts or (len(name) > 1 and name[1] == ":"):
        raise Rejected("member path leaves the archive (absolute or '..'); not read")


def _member_limit(name: str, declared: int, max_bytes: int) -> int:
    """The most a member may expand to: ``max_bytes`` when its name says it is one document, else the archive's.

    Raises:
        Rejected: a one-document member declares more than ``max_bytes``.
    """
    fmt, _ = format_of_name(PurePosixPath(name).name)
    if fmt is None or fmt in STREAMING_FORMATS:
        return MAX_EXPANDED_BYTES
    if declared > max_bytes:
        raise Rejected(too_big(declared, max_bytes))
    return max_bytes


def _tagged(items: Iterator[Document | LoadError], key: str, value: str) -> Iterator[Document | LoadError]:
    """``items``, each document with ``metadata[key] = value`` unless an inner container set it already."""
    for item in items:
        if isinstance(item, Document) and key not in item.metadata:
            item = replace(item, metadata={**item.metadata, key: value})
        yield item


def _safe_name(name: str) -> str:
    """A member's file name usable in a temporary folder: no separators or NUL, at most 200 bytes, suffix kept."""
    cleaned = name.replace("/", "_").replace("\\", "_").replace("\x00", "_").strip() or "member"
    if cleaned in (".", ".."):
        cleaned = "member"
    encoded = cleaned.encode("utf-8", "surrogateescape")
    if len(encoded) <= 200:
        return cleaned
    suffix = PurePosixPath(cleaned).suffix[:20]
    return encoded[: 200 - len(suffix.encode("utf-8", "surrogateescape"))].decode("utf-8", "ignore") + suffix


def _size(size: int) -> str:
    """A byte count for messages: ``"812 bytes"``, ``"3.1 MB"``, ``"2.0 GB"``."""
    if size < 1024 * 1024:
        return f"{size:,} bytes"
    if size < 1024**3:
        return f"{size / 1024**2:.1f} MB"
    return f"{size / 1024**3:.1f} GB"
