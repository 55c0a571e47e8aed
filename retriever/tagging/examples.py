"""Labelled examples for a tagger: documents of the collection by id, or free text, each with a label.

An examples file is JSON Lines (one object a line) or CSV (a header row), by
its suffix; each record has ``label`` and either ``id`` (a document of the
collection) or ``text`` (with an optional ``title``)::

    {"id": "doc-17", "label": "billing"}
    {"text": "the invoice was charged twice", "label": "billing"}

Labels are strings or integers, one type for the whole set; at least two
labels are needed. An id given twice with two labels is an error; given
twice with one label, it counts once.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Union

from retriever.documents import check_id
from retriever.errors import BadInputError
from retriever.jsonl import read_jsonl
from retriever.unicode_policy import check_utf8, printable

Label = Union[str, int]
MAX_EXAMPLES = 100_000  # a tagger learns from a handful to a few thousand; more is a mistake
MAX_TEXT_CHARS = 1_000_000
MAX_FILE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Example:
    """One labelled example.

    Attributes:
        label: The class, a string or an integer.
        doc_id: A document of the collection (``None`` for free text).
        text: Free text (``None`` when ``doc_id`` is given).
        title: Title of the free text (default empty).
        where: Where the example came from, for errors (``"file.jsonl:3"``).
    """

    label: Label
    doc_id: str | None = None
    text: str | None = None
    title: str = ""
    where: str = ""


def read_examples(path: str | Path) -> list[Example]:
    """The examples of a ``.jsonl``/``.json`` or ``.csv`` file, checked (see the module docstring).

    Raises:
        BadInputError: The file is unreadable, malformed, not UTF-8, or breaks a rule.
    """
    path = Path(path)
    if not path.is_file():
        raise BadInputError(f"examples file {path} does not exist")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise BadInputError(f"examples file {path} has {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        records = ((f"{path.name}:{number}", record) for number, record in read_jsonl(path, "an example object"))
    elif suffix in (".csv", ".tsv"):
        records = _csv_records(path, "\t" if suffix == ".tsv" else ",")
    else:
        raise BadInputError(f"examples file {path}: expected .jsonl or .csv, got {suffix or 'no suffix'!r}")
    return check_examples(records)


def check_examples(records: Iterable[Example | dict[str, Any] | tuple[str, Any]]) -> list[Example]:
    """Examples from ``Example``s, mappings (``label`` plus ``id`` or ``text``) or ``(where, mapping)`` pairs.

    Returns:
        The examples in order, an id repeated with the same label kept once.

    Raises:
        BadInputError: A record breaks a rule of the module docstring.
    """
    examples: list[Example] = []
    label_of_id: dict[str, tuple[Label, str]] = {}
    for number, item in enumerate(records, start=1):
        where, record = item if isinstance(item, tuple) else (f"example {number}", item)
        example = item if isinstance(item, Example) else _example(record, where)
        if example.doc_id is not None:
            seen = label_of_id.get(example.doc_id)
            if seen is not None:
                if seen[0] != example.label:
                    raise BadInputError(
                        f"{example.where}: document {printable(example.doc_id)} is labelled "
                        f"{example.label!r} here and {seen[0]!r} at {seen[1]}"
                    )
                continue
            label_of_id[example.doc_id] = (example.label, example.where)
        examples.append(example)
        if len(examples) > MAX_EXAMPLES:
            raise BadInputError(f"more than {MAX_EXAMPLES:,} examples; a tagger needs far fewer")
    _check_labels(examples)
    return examples


def _example(record: Any, where: str) -> Example:
    if not isinstance(record, dict):
        raise BadInputError(f"{where}: an example must be a mapping, got {type(record).__name__}")
    unknown = set(record) - {"id", "text", "title", "label"}
    if unknown:
        raise BadInputError(f"{where}: unknown field(s) {sorted(map(str, unknown))}; expected label and id or text")
    label = _label(record.get("label"), where)
    doc_id, text = record.get("id"), record.get("text")
    if (doc_id is None) == (text is None):
        raise BadInputError(
            f"{where}: give either 'id' (a document of the collection) or 'text', not "
            + ("both" if doc_id is not None else "neither")
        )
    if doc_id is not None:
        check_id(doc_id, f"{where}: id")
        return Example(label, doc_id=doc_id, where=where)
    title = record.get("title") or ""
    for name, value in (("text", text), ("title", title)):
        if not isinstance(value, str):
            raise BadInputError(f"{where}: {name} must be a string, got {type(value).__name__}")
        check_utf8(value, f"{where}: {name}")
    if not text.strip():
        raise BadInputError(f"{where}: text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise BadInputError(f"{where}: text has {len(text):,} characters; an example may have {MAX_TEXT_CHARS:,}")
    return Example(label, text=text, title=title, where=where)


def _label(value: Any, where: str) -> Label:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        shown = "missing" if value is None else f"a {type(value).__name__}"
        raise BadInputError(f"{where}: label must be a string or an integer, got {shown}")
    if isinstance(value, str):
        check_utf8(value, f"{where}: label")
        if not value.strip():
            raise BadInputError(f"{where}: label is empty")
    elif not -(2**63) <= value < 2**63:
        raise BadInputError(f"{where}: label is out of the 64-bit range")
    return value


def _check_labels(examples: list[Example]) -> None:
    """At least two labels, all of one type."""
    if not examples:
        raise BadInputError("no examples given")
    kinds = {type(example.label) for example in examples}
    if len(kinds) > 1:
        first_int = next(e for e in examples if isinstance(e.label, int))
        raise BadInputError(f"{first_int.where}: labels mix strings and integers; use one type")
    labels = {example.label for example in examples}
    if len(labels) < 2:
        raise BadInputError(f"every example has the label {next(iter(labels))!r}; a tagger needs at least two labels")


def _csv_records(path: Path, delimiter: str) -> Iterable[tuple[str, dict[str, Any]]]:
    """``(where, record)`` per data row of a CSV file with a header row."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = [name.strip() for name in next(reader, [])]
        if "label" not in header or ("id" not in header and "text" not in header):
            raise BadInputError(f"{path}: the header row must name 'label' and 'id' or 'text', got {header[:6]}")
        records = []
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            where = f"{path.name}:{reader.line_num}"
            if len(row) != len(header):
                raise BadInputError(f"{where}: {len(row)} fields, the header has {len(header)}")
            record = {name: value for name, value in zip(header, row) if value != "" or name == "label"}
            records.append((where, record))
    except csv.Error as exc:
        raise BadInputError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None
    return records
