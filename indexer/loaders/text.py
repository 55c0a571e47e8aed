"""Text formats: bytes decoded to text, and the document of a plain text, Markdown or HTML file."""

from __future__ import annotations

import codecs
import re
from typing import Any

import charset_normalizer

from indexer.loaders.common import Rejected
from indexer.loaders.markup import parse_html
from retriever.documents import Document

# UTF-32 first: its little-endian mark starts with the UTF-16 one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

_BINARY_SNIFF_BYTES = 8192

# The opening of an ATX heading; the rest of the line is trimmed by ``_heading_text`` in linear
# time (a pattern for the whole line backtracks quadratically over long runs of spaces).
_ATX_OPENING = re.compile(r" {0,3}#{1,6}[ \t]+")

_CODE_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def decode(data: bytes) -> tuple[str, str | None]:
    """Text from bytes, and the encoding used when it is not UTF-8.

    A byte-order mark decides first; then strict UTF-8; then the encoding
    ``charset_normalizer`` finds, if it decodes the bytes.

    Raises:
        Rejected: the bytes look binary or fit no encoding.
    """
    codec, recorded = choose_encoding(data)
    try:
        return data.decode(codec), recorded
    except UnicodeDecodeError as exc:  # only a byte-order mark's codec is chosen undecoded
        raise Rejected(f"not valid {codec} despite its byte-order mark ({exc.reason} at offset {exc.start})") from None


def choose_encoding(data: bytes, complete: bool = True) -> tuple[str, str | None]:
    """The codec for a file's bytes, and the encoding to record (None for UTF-8).

    Args:
        data: The whole file, or (``complete=False``) its first bytes, which
            may end inside a character.
        complete: Whether ``data`` is the whole file (default True).

    Returns:
        ``(codec, recorded)``: a byte-order mark's codec (not checked
        further), else ``"utf-8"`` when the bytes are strict UTF-8, else the
        encoding ``charset_normalizer`` finds, if it decodes them.

    Raises:
        Rejected: the bytes look binary or fit no encoding.
    """
    bom_codec = next((codec for bom, codec in _BOMS if data.startswith(bom)), None)
    if bom_codec is not None:
        return bom_codec, None if bom_codec == "utf-8-sig" else bom_codec
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise Rejected("binary file, not text")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
        return "utf-8", None
    except UnicodeDecodeError as exc:
        utf8_error = exc
    guess = charset_normalizer.from_bytes(data).best()
    if guess is not None:
        try:
            codecs.getincrementaldecoder(guess.encoding)().decode(data, final=complete)
            return guess.encoding, guess.encoding
        except (LookupError, UnicodeDecodeError):
            pass
    offset = utf8_error.start
    raise Rejected(
        f"not valid UTF-8 (invalid byte 0x{data[offset]:02x} at offset {offset}) and no other encoding fits"
    )


def text_document(
    text: str, source: str, fmt: str, stem: str, defaults: dict[str, Any]
) -> Document:
    """The document of a text, Markdown or HTML file, with ``defaults`` in its metadata.

    Raises:
        Rejected: no text is left after extraction.
    """
    if fmt == "html":
        title, body = parse_html(text)
    elif fmt == "md":
        title, body = _markdown_title(text), text
    else:
        title, body = "", text
    if not body.strip():
        raise Rejected("empty document")
    metadata = defaults | {"format": fmt}
    return Document(id=source, text=body, title=title or stem, metadata=metadata)


def _markdown_title(text: str) -> str:
    """The text of the first non-blank ATX heading outside code fences, or ""."""
    fence = ""
    for line in text.splitlines():
        opener = _CODE_FENCE.match(line)
        if fence:
            closing = line.strip()
            if closing.startswith(fence) and closing == fence[0] * len(closing):
                fence = ""
        elif opener:
            fence = opener.group(1)
        elif (opening := _ATX_OPENING.match(line)) and (title := _heading_text(line[opening.end():])).strip():
            return title  # a heading of Unicode blanks alone ("# \u3000") is blank too
    return ""


def _heading_text(rest: str) -> str:
    """An ATX heading's text from what follows its opening: trimmed, without a closing ``#`` run.

    A run of ``#`` ends the heading only after a space or tab (``# C#`` is
    "C#"); a heading of only ``#`` and blanks keeps them (``# ##`` is "##").
    Linear in ``len(rest)``; "" when ``rest`` is blank.
    """
    text = rest.rstrip(" \t")
    unclosed = text.rstrip("#")
    if unclosed != text and unclosed.endswith((" ", "\t")) and unclosed.strip(" \t"):
        return unclosed.rstrip(" \t")
    return text
