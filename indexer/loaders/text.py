"""Text formats: bytes decoded to text, and the document of a plain text, Markdown or HTML file, with sections."""

from __future__ import annotations

import codecs
import re
from typing import Any

import charset_normalizer

from indexer.loaders.common import Rejected
from indexer.loaders.markup import html_parts
from indexer.loaders.sections import SectionPath
from retriever.documents import Document
from retriever.locations import LOCATIONS_KEY, LocatedText

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
_SETEXT_UNDERLINE = re.compile(r" {0,3}(=+|-+)[ \t]*")
# Lines whose next line's "---" is a rule or part of a table, not a setext underline.
_NOT_UNDERLINED = re.compile(r" {0,3}([-*+>|]|\d{1,9}[.)]([ \t]|$)|#)| {4}|\t")


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
    raise Rejected(f"not valid UTF-8 (invalid byte 0x{data[offset]:02x} at offset {offset}) and no other encoding fits")


def text_document(text: str, source: str, fmt: str, stem: str, defaults: dict[str, Any]) -> Document:
    """The document of a text, Markdown or HTML file, with ``defaults`` in its metadata.

    Markdown keeps its text as written; its ATX (``## Title``) and setext
    (``Title`` over ``---``) headings outside code fences give the
    ``section`` paths of ``metadata["locations"]``, and the first one is
    the title. HTML gives its text (``markup.parse_html``) split at
    ``<h1>``-``<h6>``, with the same sections. Locations are left out when
    there is no heading.

    Raises:
        Rejected: no text is left after extraction.
    """
    locations: dict[str, list] = {}
    if fmt == "html":
        title, body, locations = _html_text(text)
    elif fmt == "md":
        headings = _markdown_headings(text)
        title, body, locations = (headings[0][2] if headings else ""), text, _markdown_locations(text, headings)
    else:
        title, body = "", text
    if not body.strip():
        raise Rejected("empty document")
    metadata = defaults | {"format": fmt} | ({LOCATIONS_KEY: locations} if locations else {})
    return Document(id=source, text=body, title=title or stem, metadata=metadata)


def _html_text(markup: str) -> tuple[str, str, dict[str, list]]:
    """``(title, text, locations)`` of an HTML page; locations are {} when it has no heading."""
    title, parts = html_parts(markup)
    built, path = LocatedText(), SectionPath()
    for part in parts:
        built.add(part.text, section=path.enter(part.level, part.heading) if part.level else path.current)
    has_sections = any(part.level for part in parts)
    return title, built.text, built.locations() if has_sections else {}


def _markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """``(offset, level, text)`` of each non-blank ATX or setext heading outside code fences, in order.

    A setext heading is a paragraph line underlined by ``===`` (level 1) or
    ``---`` (level 2); its offset is that of the paragraph line. A line that
    starts a list, quote or table is not underlined (its ``---`` is a rule),
    and YAML front matter (between ``---`` lines at the top) holds no heading.
    """
    found: list[tuple[int, int, str]] = []
    fence, offset, previous, previous_offset = "", 0, "", -1
    lines = text.splitlines(keepends=True)
    if lines and lines[0].rstrip() == "---":  # YAML front matter: its closing "---" underlines nothing
        fence = "---"
        offset = len(lines[0])
        lines = lines[1:]
    for line in lines:
        bare = line.splitlines()[0]  # the line without its ending, whichever of splitlines' it is
        opener = _CODE_FENCE.match(bare)
        if fence == "---":
            fence = "" if bare.rstrip() in ("---", "...") else fence
            bare = ""
        elif fence:
            closing = bare.strip()
            if closing.startswith(fence) and closing == fence[0] * len(closing):
                fence = ""
            bare = ""
        elif opener:
            fence, bare = opener.group(1), ""
        elif (opening := _ATX_OPENING.match(bare)) and (heading := _heading_text(bare[opening.end() :])).strip():
            found.append((offset, len(opening.group().strip()), heading))  # "# \u3000" alone is blank: no heading
            bare = ""
        elif (underline := _SETEXT_UNDERLINE.fullmatch(bare)) and previous_offset >= 0:
            found.append((previous_offset, 1 if underline.group(1)[0] == "=" else 2, previous.strip()))
            bare = ""
        underlined = bare.strip() and not _NOT_UNDERLINED.match(bare)
        previous, previous_offset = (bare, offset) if underlined else ("", -1)
        offset += len(line)
    return found


def _markdown_locations(text: str, headings: list[tuple[int, int, str]]) -> dict[str, list]:
    """The ``start`` and ``section`` columns of a Markdown text: a part per heading (and one before the first)."""
    if not headings:
        return {}
    columns: dict[str, list] = {"start": [], "section": []}
    if text[: headings[0][0]].strip():
        columns["start"].append(0)
        columns["section"].append(None)
    path = SectionPath()
    for offset, level, heading in headings:
        columns["start"].append(offset)
        columns["section"].append(path.enter(level, " ".join(heading.split())))
    return columns


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
