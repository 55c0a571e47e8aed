"""Record files as a stream of text lines: the encoding chosen from the first bytes, the rest decoded as read.

A JSONL or CSV file may be far larger than memory; only its first
``SAMPLE_BYTES`` are read to choose the encoding, then lines are decoded as
the loader asks for them, so a file is never held whole.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from indexer.loaders.common import Rejected, error_line
from indexer.loaders.text import choose_encoding

SAMPLE_BYTES = 256 * 1024


@contextmanager
def text_lines(path: Path, newline: str) -> Iterator[tuple[Iterator[str], str | None]]:
    """The lines of a text file, decoded as they are read, and the encoding to record.

    Args:
        path: A regular file.
        newline: As for ``open``: ``"\\n"`` splits on line feeds only (JSONL),
            ``""`` on any line ending, kept untranslated (CSV).

    Yields:
        ``(lines, encoding)``: an iterator of lines (ends kept) that raises
        ``Rejected`` where the bytes stop fitting the encoding, and the
        encoding when it is not UTF-8 (else None).

    Raises:
        Rejected: the file cannot be opened, looks binary, or fits no encoding.
    """
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    with raw:
        sample = raw.read(SAMPLE_BYTES)
        codec, recorded = choose_encoding(sample, complete=len(sample) < SAMPLE_BYTES)
        del sample
        raw.seek(0)
        with io.TextIOWrapper(raw, encoding=codec, errors="strict", newline=newline) as text:
            yield _checked(text, codec), recorded


def _checked(lines: Iterable[str], codec: str) -> Iterator[str]:
    """``lines``, with a decoding failure turned into ``Rejected`` naming the line it came after.

    Raises:
        Rejected: the bytes stop fitting ``codec``.
    """
    count = 0
    try:
        for count, line in enumerate(lines, start=1):  # noqa: B007 - count is read after the loop
            yield line
    except UnicodeDecodeError as exc:
        raise Rejected(f"not valid {codec} after line {count} ({exc.reason}); the lines before it were read") from None
