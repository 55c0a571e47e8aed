"""One Unicode policy for every entry point: text must be encodable as UTF-8.

Python strings can hold lone surrogates (``"\\ud800"``, from a JSON escape or
a file name that is not UTF-8); no tokenizer, catalog or JSON answer can carry
them. Every entry point (HTTP, Python API, command line, loaders) refuses such
text with an error that names where it was found.
"""

from __future__ import annotations

from retriever.errors import BadInputError


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_utf8(text: str, where: str) -> None:
    """Raise ``BadInputError`` naming ``where`` when ``text`` is not encodable as UTF-8."""
    if not is_utf8(text):
        raise BadInputError(f"{where} cannot be encoded as UTF-8 (it holds a lone surrogate such as \\ud800)")


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (C0, DEL or C1: newline, tab, NUL, ...)."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in text)


def printable(text: str, limit: int = 80) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters: safe to print or send as JSON."""
    shown = repr(text[:limit])
    return shown + ("..." if len(text) > limit else "")
