"""Strict JSON Lines reading for files the product depends on (BEIR files, training pairs).

Blank lines are skipped; any other line must be a JSON object, or reading
stops with an error naming the file and line. (Indexing documents is
lenient instead: ``indexer.loaders`` reports a bad record and goes on.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from retriever.errors import BadInputError


def read_jsonl(path: str | Path, what: str = "a JSON object") -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of ``path``, streamed.

    Args:
        path: A UTF-8 JSON Lines file.
        what: How an error names the expected record, e.g. ``"a BEIR query record"``.

    Raises:
        BadInputError: The file cannot be opened, a line is not UTF-8 (a
            byte-order mark on the first line is allowed), or a line is not
            a JSON object (``path:line: not <what> (reason)``).
    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise BadInputError(f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                reason = f"invalid JSON: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                raise BadInputError(f"{path}:{number}: not {what} ({reason})") from None
            if not isinstance(record, dict):
                raise BadInputError(f"{path}:{number}: not {what} (a JSON {type(record).__name__}, not an object)")
            yield number, record
