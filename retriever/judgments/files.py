"""Judgments read from files: JSON Lines, or a BEIR qrels TSV with its queries file.

The format is told by the content: a file whose first non-blank line starts
with ``{`` is JSON Lines, one judgment a line::

    {"query": "how do I renew a passport", "id": "docs/passport.md", "grade": 2}
    {"query": "how do I renew a passport", "id": "docs/visa.md", "grade": 0}

(``grade`` optional, default 1; ``who`` and ``at`` optional). Anything else is
a BEIR qrels TSV, ``query-id<TAB>corpus-id<TAB>score`` (a header row
``query-id corpus-id score`` is skipped), whose query ids are named by a BEIR
``queries.jsonl`` (``{"_id": "q1", "text": "..."}`` a line). Every error
names the file and line; a file is read whole before anything is stored.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Mapping, Union

from retriever.errors import BadInputError
from retriever.jsonl import parse_json_object, read_jsonl
from retriever.judgments.records import Judgment, check_grade, judgment_from, make_judgment

QueriesSource = Union[str, os.PathLike, Mapping[str, str]]  # a BEIR queries.jsonl, or {query id: text}
QRELS_HEADER = ("query-id", "corpus-id", "score")


def read_judgments(path: str | os.PathLike, queries: QueriesSource | None = None, who: str = "") -> list[Judgment]:
    """The judgments of a JSON Lines file or a BEIR qrels TSV (with ``queries``).

    Args:
        path: The file.
        queries: For a qrels TSV: a BEIR ``queries.jsonl`` (or ``{query id: text}``) naming each query id's text.
        who: Who judged, for rows that do not say.

    Raises:
        BadInputError: ``"FILE:LINE: reason"`` for a bad row; the file cannot be read, is empty, or is a TSV
            without ``queries``.
    """
    return [judgment for _, judgment in read_numbered_judgments(path, queries, who)]


def read_numbered_judgments(
    path: str | os.PathLike, queries: QueriesSource | None = None, who: str = ""
) -> list[tuple[int, Judgment]]:
    """``(line number, judgment)`` of each row of the file, as ``read_judgments`` reads them."""
    path = Path(path)
    text = _read_text(path)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise BadInputError(f"{path} holds no judgments")
    if first.startswith("{"):
        return _jsonl_rows(path, text, who)
    if queries is None:
        raise BadInputError(
            f"{path}: not JSON Lines, so read as a BEIR qrels TSV, which needs its queries file "
            "(a queries.jsonl naming each query id's text)"
        )
    return _qrels_rows(path, text, read_queries(queries), who)


def read_queries(queries: QueriesSource) -> dict[str, str]:
    """``{query id: text}`` of a BEIR ``queries.jsonl`` (``{"_id", "text"}`` a line), or of a mapping given.

    Raises:
        BadInputError: A line is not such a record (``FILE:LINE``), the file cannot be read, or a mapping
            holds a value that is not a string.
    """
    if isinstance(queries, Mapping):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in queries.items()):
            raise BadInputError("queries must map query ids to query texts (strings)")
        return dict(queries)
    found: dict[str, str] = {}
    for number, record in read_jsonl(queries, "a BEIR query record"):
        if "_id" not in record or not isinstance(record.get("text"), str):
            raise BadInputError(f'{queries}:{number}: not a BEIR query record (needs "_id" and a "text" string)')
        found[str(record["_id"])] = record["text"]
    return found


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BadInputError(f"{path}:{line}: not UTF-8 text ({exc.reason})") from None


def _jsonl_rows(path: Path, text: str, who: str) -> list[tuple[int, Judgment]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, judgment_from(parse_json_object(line), who)))
        except (BadInputError, ValueError) as exc:
            raise BadInputError(f"{path}:{number}: {exc}") from None
    return rows


def _qrels_rows(path: Path, text: str, queries: dict[str, str], who: str) -> list[tuple[int, Judgment]]:
    rows = []
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    for number, fields in enumerate(reader, start=1):
        if not any(field.strip() for field in fields):
            continue
        fields = [field.strip() for field in fields]
        if not rows and tuple(name.lower() for name in fields) == QRELS_HEADER:
            continue
        if len(fields) != 3:
            raise BadInputError(
                f"{path}:{number}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}"
            )
        query_id, doc_id, score = fields
        try:
            grade = check_grade(int(score))
        except ValueError as exc:  # int() of a non-integer, or a grade out of range
            reason = exc if isinstance(exc, BadInputError) else f"score {score!r} is not an integer"
            raise BadInputError(f"{path}:{number}: {reason}") from None
        if query_id not in queries:
            raise BadInputError(f"{path}:{number}: query id {query_id!r} is not in the queries file")
        try:
            rows.append((number, make_judgment(queries[query_id], doc_id, grade, who)))
        except BadInputError as exc:
            raise BadInputError(f"{path}:{number}: {exc}") from None
    return rows
