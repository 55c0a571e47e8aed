"""What a file is: its format recognised by its content (libmagic) and its name, ``detect``.

The first ``HEAD_BYTES`` of a file go to libmagic (python-magic); ZIP files
are told apart by their member names (a docx holds ``word/document.xml``, a
pptx ``ppt/``, an xlsx ``xl/``; OpenDocument and EPUB files name their type in
a ``mimetype`` member), and a compressed file by the first bytes inside it.
Content wins where the name lies: a ``.pdf`` that is a docx is a docx, a
``.txt`` that is a PNG is an image. Where the content is text the name picks
among the text formats (``.md``, ``.csv``, ``.jsonl``...), and text under any
other name, or none (README, CHANGES, ``.rst``, ``.tex``, ``.log``, source
code), is plain text. Where libmagic knows nothing (``application/octet-stream``)
the name decides, so that the reader of the format it claims can say what is
wrong with it.
"""

from __future__ import annotations

import bz2
import codecs
import lzma
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from indexer.loaders.common import Rejected, error_line

try:
    import magic
except ImportError:  # libmagic missing: a few signatures below stand in for it
    magic = None

HEAD_BYTES = 8192
UNKNOWN = "unknown"
EMPTY_MIME = "application/x-empty"
OCTET_STREAM = "application/octet-stream"
COMPRESSIONS = ("gzip", "bzip2", "xz")
ZIP_FORMATS = frozenset({"docx", "pptx", "xlsx", "odt", "ods", "odp", "epub", "zip"})
# Formats whose files are text: where the content is text, the name chooses among them.
TEXT_FORMATS = frozenset({"txt", "md", "html", "jsonl", "csv", "eml", "mbox"})
IMAGE_KINDS = {"image/png": "png", "image/jpeg": "jpeg", "image/tiff": "tiff"}

_SUFFIX_FORMATS = {
    ".txt": "txt",
    ".text": "txt",
    ".rst": "txt",
    ".tex": "txt",
    ".log": "txt",
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".xht": "html",
    ".pdf": "pdf",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".odt": "odt",
    ".ods": "ods",
    ".odp": "odp",
    ".epub": "epub",
    ".rtf": "rtf",
    ".eml": "eml",
    ".mbox": "mbox",
    ".msg": "msg",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
    ".gz": "gzip",
    ".bz2": "bzip2",
    ".xz": "xz",
    ".zip": "zip",
    ".tar": "tar",
}
_TAR_SUFFIXES = {
    ".tgz": "gzip",
    ".tar.gz": "gzip",
    ".tbz2": "bzip2",
    ".tar.bz2": "bzip2",
    ".txz": "xz",
    ".tar.xz": "xz",
}
_SUFFIX_IMAGE_KINDS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".tif": "tiff", ".tiff": "tiff"}
_MIME_FORMATS = {
    "application/pdf": "pdf",
    "application/gzip": "gzip",
    "application/x-gzip": "gzip",
    "application/x-bzip2": "bzip2",
    "application/x-xz": "xz",
    "application/x-tar": "tar",
    "application/x-gtar": "tar",
    "text/rtf": "rtf",
    "application/rtf": "rtf",
    "application/vnd.ms-outlook": "msg",
    "application/zip": "zip",
    "application/x-zip-compressed": "zip",
    "application/epub+zip": "zip",
    "application/java-archive": "zip",
}
_ZIP_MIME_PREFIXES = ("application/vnd.openxmlformats-officedocument.", "application/vnd.oasis.opendocument.")
_OLE_MIMES = frozenset({"application/x-ole-storage", "application/CDFV2", "application/vnd.ms-office"})
_MEDIA_PREFIXES = ("image/", "audio/", "video/", "font/", "model/")
_TEXT_MIMES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/javascript",
        "application/x-subrip",
        "application/mbox",
        "message/rfc822",
        "message/news",
    }
)
_XML_MIMES = frozenset({"text/html", "text/xml", "application/xml", "application/xhtml+xml"})
_PACKAGE_MIMETYPES = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.presentation": "odp",
    "application/epub+zip": "epub",
}
_SIGNATURES = (
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"{\\rtf", "text/rtf"),
)


@dataclass(frozen=True)
class Detected:
    """A file's format as ``detect`` found it.

    Attributes:
        format: One of txt, md, html, pdf, jsonl, csv, docx, pptx, xlsx, odt,
            ods, odp, epub, rtf, eml, mbox, msg, image, gzip, bzip2, xz,
            zip, tar, or ``"unknown"``.
        mime: The MIME type libmagic gives the content
            (``"application/x-empty"`` for an empty file).
        kind: The concrete kind of an image: ``"png"``, ``"jpeg"`` or
            ``"tiff"``; "" otherwise.
        compression: ``"gzip"``, ``"bzip2"`` or ``"xz"`` for a compressed
            tar (format ``"tar"``) or a compressed file (format the same as
            the compression, ``inner`` saying what is inside); "" otherwise.
        inner: For a compressed file, what its first bytes inside are (from
            the name without the compression suffix and the content); None
            otherwise.
    """

    format: str
    mime: str
    kind: str = ""
    compression: str = ""
    inner: Detected | None = None


def detect(path: Path) -> Detected:
    """The format of the file at ``path``, from its first bytes, its name and, for a ZIP, its member names.

    Raises:
        Rejected: the file cannot be opened or read.
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    found = detect_bytes(head, path.name)
    if found.format in ZIP_FORMATS:
        return _zip_package(path, found)
    if found.format in COMPRESSIONS:
        return _compressed(path, found)
    return found


def detect_bytes(head: bytes, name: str) -> Detected:
    """The format of a file named ``name`` whose first bytes are ``head``, without looking further into it.

    A ZIP's format comes from ``name`` alone here (``detect`` reads its member
    names), and a compressed file's ``inner`` is None.
    """
    by_name, compression = format_of_name(name)
    if not head:
        return Detected(by_name or "txt", EMPTY_MIME, _image_kind(EMPTY_MIME, name), compression)
    mime = mime_type(head)
    content = _MIME_FORMATS.get(mime) or ("zip" if mime.startswith(_ZIP_MIME_PREFIXES) else None)
    if content is None and mime in IMAGE_KINDS:
        content = "image"
    if content is None and mime in _OLE_MIMES and by_name == "msg":
        content = "msg"
    if content == "zip" and by_name in ZIP_FORMATS:
        content = by_name  # until ``detect`` reads the member names
    if content is not None:
        return Detected(content, mime, _image_kind(mime, name))
    if _is_text(mime, head):
        return Detected(by_name if by_name in TEXT_FORMATS else _text_format(mime, head), mime)
    if mime == OCTET_STREAM and by_name is not None:
        return Detected(by_name, mime, _image_kind(mime, name), compression)
    return Detected(UNKNOWN, mime)


def format_of_name(name: str) -> tuple[str | None, str]:
    """``(format, compression)`` a file name claims, e.g. ``("tar", "gzip")`` for ``x.tar.gz``; ``(None, "")``
    for a name without a known suffix."""
    lower = name.lower()
    for suffix, compression in _TAR_SUFFIXES.items():
        if lower.endswith(suffix) and len(lower) > len(suffix):
            return "tar", compression
    return _SUFFIX_FORMATS.get(Path(lower).suffix), ""


def inner_name(name: str) -> str:
    """A compressed file's name without its compression suffix (``README.gz`` -> ``README``; ``x.tgz`` -> ``x.tar``)."""
    lower = name.lower()
    for suffix, replacement in (
        (".tgz", ".tar"),
        (".tbz2", ".tar"),
        (".txz", ".tar"),
        (".gz", ""),
        (".bz2", ""),
        (".xz", ""),
    ):
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)] + replacement
    return name


def mime_type(head: bytes) -> str:
    """libmagic's MIME type of ``head`` (a few signatures, and text or not, where libmagic is missing)."""
    if magic is not None:
        return magic.from_buffer(head, mime=True)
    for signature, mime in _SIGNATURES:
        if head.startswith(signature):
            return mime
    if len(head) > 262 and head[257:262] == b"ustar":
        return "application/x-tar"
    return "text/plain" if _decodes(head) else OCTET_STREAM


def _is_text(mime: str, head: bytes) -> bool:
    """Whether content of ``mime`` starting with ``head`` is text to read (an SVG or other media is not)."""
    if mime.startswith(_MEDIA_PREFIXES):
        return False
    return mime.startswith("text/") or mime in _TEXT_MIMES or _decodes(head)


def _decodes(head: bytes) -> bool:
    """Whether ``head`` has no NUL byte and is UTF-8 (a character cut at its end allowed) or starts with a BOM."""
    if head.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return True
    if b"\x00" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _text_format(mime: str, head: bytes) -> str:
    """The format of text whose name names no text format: HTML (XML too), an e-mail, a mailbox, else plain."""
    if mime in _XML_MIMES:
        return "html"
    if mime == "message/rfc822":
        return "eml"
    if mime == "application/mbox" or (head.startswith(b"From ") and b"\nFrom: " in head[:4096]):
        return "mbox"
    return "txt"


def _image_kind(mime: str, name: str) -> str:
    """``png``, ``jpeg`` or ``tiff`` from the MIME type, else from the name's suffix; "" for neither."""
    return IMAGE_KINDS.get(mime) or _SUFFIX_IMAGE_KINDS.get(Path(name.lower()).suffix, "")


def _zip_package(path: Path, found: Detected) -> Detected:
    """A ZIP's format from its members: docx, pptx, xlsx, odt, ods, odp, epub, else zip.

    A ZIP whose member list cannot be read keeps the format its name claims
    (its reader then says what is wrong), or ``zip``.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            declared = ""
            if "mimetype" in names and archive.getinfo("mimetype").file_size <= 200:
                with archive.open("mimetype") as member:
                    declared = member.read(200).decode("ascii", "replace").strip()
    except Exception:  # noqa: BLE001 - zipfile raises many types on damaged archives
        return found
    if declared in _PACKAGE_MIMETYPES:
        fmt = _PACKAGE_MIMETYPES[declared]
    elif "word/document.xml" in names:
        fmt = "docx"
    elif any(name.startswith("ppt/") for name in names):
        fmt = "pptx"
    elif any(name.startswith("xl/") for name in names):
        fmt = "xlsx"
    else:
        fmt = "zip"
    return Detected(fmt, found.mime)


def _compressed(path: Path, found: Detected) -> Detected:
    """A compressed file: a compressed tar, or ``found`` with what the first bytes inside it are."""
    inner = detect_bytes(decompressed_head(path, found.format), inner_name(path.name))
    if inner.format == "tar":
        return Detected("tar", found.mime, compression=found.format)
    return Detected(found.format, found.mime, compression=found.format, inner=inner)


def decompressed_head(path: Path, compression: str) -> bytes:
    """Up to ``HEAD_BYTES`` from inside a compressed file (fewer, or none, when it is short, truncated or damaged)."""
    decompressor = {
        "gzip": lambda: zlib.decompressobj(wbits=31),
        "bzip2": bz2.BZ2Decompressor,
        "xz": lzma.LZMADecompressor,
    }[compression]()
    out = b""
    try:
        with path.open("rb") as handle:
            while len(out) < HEAD_BYTES and (chunk := handle.read(64 * 1024)):
                out += decompressor.decompress(chunk, HEAD_BYTES - len(out))
                if getattr(decompressor, "eof", False):
                    break
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        pass
    return out[:HEAD_BYTES]
