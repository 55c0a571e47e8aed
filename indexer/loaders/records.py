"""Record files: a document per line of a JSONL file or per row of a CSV file, streamed.

Ids, titles and texts come from the fields a ``FieldMap`` names (or the
usual names); a bad record is a ``LoadError`` for its line, and the rest of
the file goes on. A record with a title and no text is indexed by its title.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Container, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from indexer.loaders.common import FieldMap, LoadError, ReadContext, Rejected, error_line
from indexer.loaders.streams import text_lines
from retriever.documents import Document, coerce_document
from retriever.errors import BadInputError
from retriever.jsonl import json_type, parse_json_object

_AUTO_ID = ("id", "_id")
_AUTO_TITLE = "title"
_AUTO_TEXT = ("text", "body", "content")
_RECORD_SOURCE = "record_source"  # where a record's own "source" field goes: "source" is its file
# At most 18 integer digits, no leading zeros: "02134" or a 20-digit code stays a string.
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def read_jsonl(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """A document or error per record of a JSONL file of any size, decoded and parsed as it is read.

    Raises:
        Rejected: the file cannot be opened, fits no encoding, or holds no records.
    """
    with text_lines(path, newline="\n") as (lines, encoding):
        defaults = {"source": source} | ({"encoding": encoding} if encoding else {})
        yield from jsonl_documents(lines, source, context.fields, defaults)


def read_csv(path: Path, source: str, stem: str, context: ReadContext) -> Iterator[Document | LoadError]:
    """A document or error per row of a CSV file of any size; no field longer than ``context.max_bytes``.

    Raises:
        Rejected: the file cannot be opened or fits no encoding, its header is
            malformed or lacks the id or text column, or it holds no rows.
    """
    with text_lines(path, newline="") as (lines, encoding):
        defaults = {"source": source} | ({"encoding": encoding} if encoding else {})
        yield from csv_documents(lines, source, context.fields, defaults, context.max_bytes)


def jsonl_documents(
    lines: Iterable[str], source: str, fields: FieldMap, defaults: dict[str, Any]
) -> Iterator[Document | LoadError]:
    """A document or error per non-blank line of a JSONL file, streamed.

    Args:
        lines: The file's lines, read as they are asked for.

    Raises:
        Rejected: the file holds no records.
    """
    first_line: dict[str, int] = {}
    records = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        records += 1
        try:
            record = _json_object(line)
            doc = _record_document(record, _record_keys(record, fields, title_alone=True), defaults)
            _claim_id(doc.id, lineno, first_line)
        except Rejected as exc:
            yield LoadError(f"{source}:{lineno}", str(exc))
        else:
            yield doc
    if not records:
        raise Rejected("no records")


def _json_object(line: str) -> dict[str, Any]:
    """One JSONL line parsed as a JSON object.

    Raises:
        Rejected: the line is not valid JSON or not an object.
    """
    try:
        return parse_json_object(line)
    except ValueError as exc:
        raise Rejected(str(exc)) from None


def csv_documents(
    lines: Iterable[str], source: str, fields: FieldMap, defaults: dict[str, Any], max_bytes: int
) -> Iterator[Document | LoadError]:
    """A document or error per row of a CSV file with a header row, streamed.

    Metadata values that look like numbers become numbers. Rows are numbered
    by the line they end on.

    Args:
        lines: The file's lines with their endings (opened with ``newline=""``).
        max_bytes: The longest field accepted (a field can be as long as the file).

    Raises:
        Rejected: the header is malformed or lacks the id or text column, or
            the file holds no rows.
    """
    # A field can be as long as the file; the default 128 KiB limit would cut long texts.
    csv.field_size_limit(max(csv.field_size_limit(), min(max_bytes, 2**31 - 1)))
    reader = csv.reader(lines, strict=True)
    header = _csv_header(reader)
    try:
        keys = _record_keys(header, fields)
    except Rejected as exc:
        raise Rejected(f"{exc}; the columns are {', '.join(map(repr, header))}") from None
    first_line: dict[str, int] = {}
    rows = 0
    while True:
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            rows += 1
            yield LoadError(f"{source}:{reader.line_num}", f"malformed CSV: {error_line(exc)}")
            continue
        if not values:
            continue
        rows += 1
        try:
            doc = _record_document(_csv_record(header, values, keys), keys, defaults)
            _claim_id(doc.id, reader.line_num, first_line)
        except Rejected as exc:
            yield LoadError(f"{source}:{reader.line_num}", str(exc))
        else:
            yield doc
    if not rows:
        raise Rejected("no records")


def _csv_header(reader: Iterator[list[str]]) -> list[str]:
    """The first non-blank row of a CSV reader.

    Raises:
        Rejected: the file has no rows or the header row is malformed.
    """
    try:
        for row in reader:
            if row:
                return row
    except csv.Error as exc:
        raise Rejected(f"malformed CSV header: {error_line(exc)}") from None
    raise Rejected("no records")


def _csv_record(header: list[str], values: list[str], keys: tuple[str, str, str]) -> dict[str, Any]:
    """A CSV row as a record; values outside the id, title and text columns may become numbers.

    Raises:
        Rejected: the row has more or fewer fields than the header.
    """
    if len(values) != len(header):
        raise Rejected(f"row has {len(values)} fields, the header has {len(header)}")
    return {name: value if name in keys else _number_or_string(value) for name, value in zip(header, values)}


def _number_or_string(value: str) -> str | int | float:
    """``value`` as an int or float when it is written as one, else unchanged."""
    number = _NUMBER.fullmatch(value)
    if number is None:
        return value
    return float(value) if number.group(1) or number.group(2) else int(value)


def _record_keys(available: Container[str], fields: FieldMap, title_alone: bool = False) -> tuple[str, str, str]:
    """``(id, title, text)`` field names for a record or CSV header.

    Args:
        title_alone: Accept a title field in place of a missing text field
            (a JSONL record; default False: a CSV header needs its text column).

    Raises:
        Rejected: no id field, or no text field (nor, with ``title_alone``, a title field) is present.
    """
    id_key = _first_present(available, (fields.id,) if fields.id else _AUTO_ID, "--id-field")
    title_key, text_keys = fields.title or _AUTO_TITLE, (fields.text,) if fields.text else _AUTO_TEXT
    if title_alone and title_key in available and not any(name in available for name in text_keys):
        return id_key, title_key, text_keys[0]  # a record of a title alone: its text is ""
    return id_key, title_key, _first_present(available, text_keys, "--text-field")


def _first_present(available: Container[str], candidates: Sequence[str], option: str) -> str:
    """The first of ``candidates`` in ``available``.

    Raises:
        Rejected: none is present; the reason names them and ``option``.
    """
    for name in candidates:
        if name in available:
            return name
    quoted = [repr(name) for name in candidates]
    names = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    raise Rejected(f"no {names} field (name one with {option})")


def _record_document(record: dict[str, Any], keys: tuple[str, str, str], defaults: dict[str, Any]) -> Document:
    """A document from a JSONL or CSV record; its other fields join ``defaults`` in its metadata.

    ``source`` stays the file's path (``prune`` and the report go by it); a
    record's own ``source`` field is kept as ``record_source``.

    Raises:
        Rejected: the id is not a non-empty string or an integer, the text is
            not a string, the title is neither a string nor null, or text
            and title are both blank.
    """
    id_key, title_key, text_key = keys
    doc_id, text, title = record[id_key], record.get(text_key, ""), record.get(title_key)
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str):
        raise Rejected(f"{id_key!r} is {json_type(doc_id)}, not a string or integer")
    if not doc_id.strip():
        raise Rejected(f"{id_key!r} is empty")
    if not isinstance(text, str):
        raise Rejected(f"{text_key!r} is {json_type(text)}, not a string")
    if title is not None and not isinstance(title, str):
        raise Rejected(f"{title_key!r} is {json_type(title)}, not a string")
    if not text.strip() and not (title or "").strip():  # a title alone is enough: the document is found by it
        raise Rejected(f"{text_key!r} and {title_key!r} are empty" if title_key in record else f"{text_key!r} is empty")
    if "source" in record and _RECORD_SOURCE in record:
        raise Rejected(f"both 'source' and {_RECORD_SOURCE!r} fields; 'source' is set to the file's path")
    extra = {_RECORD_SOURCE if name == "source" else name: value for name, value in record.items() if name not in keys}
    try:  # the rules every write path applies (id characters, UTF-8, plain JSON metadata)
        return coerce_document(Document(id=doc_id, text=text, title=title or "", metadata=defaults | extra))
    except BadInputError as exc:
        raise Rejected(str(exc)) from None


def _claim_id(doc_id: str, lineno: int, first_line: dict[str, int]) -> None:
    """Record that ``doc_id`` is used on ``lineno``.

    Raises:
        Rejected: an earlier line of the same file already used it.
    """
    if doc_id in first_line:
        raise Rejected(f"duplicate id {doc_id!r} (first on line {first_line[doc_id]})")
    first_line[doc_id] = lineno
