"""ZIP packages (OOXML, OpenDocument, EPUB) checked before a library opens them.

A package must be a readable ZIP whose parts that are read whole unpack to
at most ``MAX_PART_BYTES`` each and ``MAX_PACKAGE_BYTES`` together, so that
a small file cannot unpack into gigabytes of XML (a "zip bomb"). Python's
``zipfile`` never unpacks more than a member's recorded size, so the
recorded sizes bound the work.

``parse_xml_part`` parses a part without resolving entities.
``library_errors`` turns what a library raises on a damaged file into a
``Rejected`` that says so.

An Office file saved with a password is not a ZIP at all: it is an OLE2
compound file holding ``EncryptionInfo`` and ``EncryptedPackage`` streams,
and is refused as such.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from lxml import etree

from indexer.loaders.common import Rejected, error_line

MAX_PART_BYTES = 256 * 1024 * 1024  # the most one part read whole may unpack to
MAX_PACKAGE_BYTES = 1024 * 1024 * 1024  # the most all parts read whole may unpack to together
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
ENCRYPTED = "password-protected (encrypted) Office file"
_MB = 1024 * 1024


def open_package(path: Path, fmt: str, streamed: Callable[[str], bool] = lambda name: False) -> zipfile.ZipFile:
    """The ZIP package at ``path``, its part sizes checked; the caller closes it.

    Args:
        path: The file.
        fmt: Its format, for the reasons (``"docx"``, ``"epub"``...).
        streamed: Whether a member is read as a stream within other limits
            (a spreadsheet's sheets), so its size is not bounded here.

    Raises:
        Rejected: the file is an encrypted or legacy Office file, not a
            readable ZIP, or has a part over ``MAX_PART_BYTES``.
    """
    _refuse_ole2(path, fmt)
    try:
        package = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise Rejected(f"corrupt or truncated {fmt} file (not a readable ZIP package: {error_line(exc)})") from None
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    try:
        _check_sizes(package, fmt, streamed)
    except Rejected:
        package.close()
        raise
    return package


def _check_sizes(package: zipfile.ZipFile, fmt: str, streamed: Callable[[str], bool]) -> None:
    """Check the recorded sizes of the parts read whole, one by one and together.

    Raises:
        Rejected: a part passes ``MAX_PART_BYTES``, or all of them ``MAX_PACKAGE_BYTES``.
    """
    total = 0
    for member in package.infolist():
        if streamed(member.filename):
            continue
        total += member.file_size
        if member.file_size > MAX_PART_BYTES:
            raise Rejected(
                f"{fmt} part {member.filename!r} unpacks to {member.file_size / _MB:,.0f} MB, "
                f"over the {MAX_PART_BYTES // _MB} MB limit"
            )
    if total > MAX_PACKAGE_BYTES:
        raise Rejected(f"{fmt} file unpacks to {total / _MB:,.0f} MB, over the {MAX_PACKAGE_BYTES // _MB} MB limit")


def check_package(path: Path, fmt: str, streamed: Callable[[str], bool] = lambda name: False) -> None:
    """``open_package`` for a file a library opens itself: the checks alone.

    Raises:
        Rejected: as ``open_package``.
    """
    open_package(path, fmt, streamed).close()


def _refuse_ole2(path: Path, fmt: str) -> None:
    """Refuse an OLE2 compound file given as a ZIP package: encrypted, or a legacy binary Office file.

    Raises:
        Rejected: the file starts with the OLE2 signature.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(len(OLE2_MAGIC))
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    if head != OLE2_MAGIC:
        return
    if is_encrypted_office(path):
        raise Rejected(ENCRYPTED)
    raise Rejected(f"a legacy binary Office (OLE2) file, not a {fmt} package; save it as .{fmt} to index it")


def is_encrypted_office(path: Path) -> bool:
    """Whether ``path`` is an OLE2 file holding an encrypted Office package (False when it cannot be read)."""
    import olefile  # only for a file that is OLE2 already (olefile comes with extract-msg)

    try:
        with olefile.OleFileIO(str(path)) as ole:
            return ole.exists("EncryptionInfo") and ole.exists("EncryptedPackage")
    except Exception:  # noqa: BLE001 - a damaged OLE2 file is simply not a readable encrypted package
        return False


@contextmanager
def library_errors(fmt: str) -> Iterator[None]:
    """Within it, any exception but ``Rejected`` becomes ``Rejected("corrupt or truncated <fmt> file: ...")``.

    Libraries raise many types on damaged files (``KeyError`` for a missing
    part, ``XMLSyntaxError``, ``BadZipFile``, ``zlib.error``...); the reason
    keeps the library's first line.
    """
    try:
        yield
    except Rejected:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the library raises on a damaged file
        raise Rejected(f"corrupt or truncated {fmt} file ({type(exc).__name__}: {error_line(exc)})") from None


def parse_xml_part(data: bytes) -> etree._Element:
    """The root element of an XML part: entities never resolved, no network, libxml2's limits on depth and
    expansion kept (a parser per call: lxml parsers are not shared between threads).

    Raises:
        lxml.etree.XMLSyntaxError: the part is not well-formed XML.
    """
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)
    return etree.fromstring(data, parser)
