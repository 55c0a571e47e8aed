"""Strict JSON Lines reading for files the product depends on (BEIR files, training pairs).

Blank lines are skipped; any other line must be a JSON object, or reading
stops with an error naming the file and line. (Indexing documents is
lenient instead: ``indexer.loaders`` reports a bad record and goes on.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

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
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise BadInputError(f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            if not line.strip():
                continue
            try:
                record = parse_json_object(line)
            except ValueError as exc:
                raise BadInputError(f"{path}:{number}: not {what} ({exc})") from None
            yield number, record


def parse_json_object(line: str) -> dict[str, Any]:
    """One JSON Lines line parsed as a JSON object.

    Raises:
        ValueError: The line is not valid JSON or not an object; the message
            says why ("invalid JSON: ... (column N)", "record is an array, not an object").
    """
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None
    if not isinstance(record, dict):
        raise ValueError(f"record is {json_type(record)}, not an object")
    return record


def json_type(value: Any) -> str:
    """The JSON type of a value, with its article: "an array", "a number", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
