"""Metadata filters: a small Mongo-style language and its limits, checked before any SQL.

Grammar (keys are metadata fields; ``a.b`` reaches into nested objects)::

    {"lang": "en"}                              equality
    {"year": {"$gte": 2019, "$lt": 2024}}       several operators are ANDed
    {"tag": {"$in": ["a", "b"]}}                $in / $nin take a list
    {"lang": {"$ne": "de"}}                     $ne / $nin also match a missing field
    {"$or": [{"lang": "en"}, {"year": 2020}]}   $and / $or take a list of filters
    {"$not": {"lang": "en"}}                    the complement (missing fields match)

Values are strings, numbers or booleans, and a value matches only an operand
of its own JSON type: the number 2020 is not the string "2020", ``true`` is
not 1, and ``$gt`` never compares a number with a string (as with a missing
field, ``$ne`` / ``$nin`` / ``$not`` match them). Filtering happens in the catalog
before the vector search, so ``k`` hits come back whenever ``k`` documents match.

A field holding a list is compared element by element, as in MongoDB::

    {"to": "ann@example.org"}                   some element equals it
    {"tags": {"$in": ["a", "b"]}}               some element is one of them
    {"year": {"$gte": 2019, "$lt": 2024}}       each operator met by some element (maybe not the same one)
    {"tags": {"$ne": "a"}}                      no element equals it (and a missing field, an empty list)
    {"tags": {"$nin": ["a", "b"]}}              no element is one of them
    {"authors.name": "x"}                       objects in a list: some element's ``name`` is "x"

A filter value is never a list, so a list is never matched whole. A list
directly inside a list, and a null, match no comparison (and every negation),
and the reserved key ``locations`` (``retriever.locations``) is never matched:
none of them is indexed (``retriever.storage.metadata_index``).

Limits, checked on the whole filter before any SQL is built (a breach is a
``FilterError`` that names the place, e.g. ``$or[2].year.$in``):

- at most ``MAX_DEPTH`` (10) nested ``$and`` / ``$or`` / ``$not``;
- at most ``MAX_CLAUSES`` (256) operators and comparisons in one filter;
- at most ``MAX_LIST`` (1,000) values in one ``$in`` / ``$nin`` list;
- field names: 1 to ``MAX_KEY_CHARS`` (256) characters, dot-separated parts
  that are not empty, do not start with ``$`` and hold no control character,
  ``"``, ``\\``, ``[`` or ``]``;
- strings up to ``MAX_STRING_CHARS`` (4,096) characters, encodable as UTF-8;
  integers within 64 bits; floats finite.

A checked filter is compiled by ``retriever.storage.metadata_index`` into one query
over the catalog's indexed metadata rows; that SQL grows linearly with the
filter (each node appears once). The language is shared by the rooms: the
storage room compiles it, the search room and the servers check it first.
"""

from __future__ import annotations

import json
import math
from typing import Any

from retriever.errors import FilterError
from retriever.unicode_policy import has_control, is_utf8, printable

COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
LOGICAL = ("$and", "$or", "$not")
MAX_DEPTH = 10
MAX_CLAUSES = 256
MAX_LIST = 1_000
MAX_KEY_CHARS = 256
MAX_STRING_CHARS = 4_096
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_BAD_KEY_CHARS = set('"\\[]')


def parse_where(text: str | None) -> dict | None:
    """Parse a JSON filter given on the command line; ``None`` stays ``None``."""
    if text is None or not text.strip():
        return None
    try:
        where = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FilterError(f"filter is not valid JSON: {exc}") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise FilterError(f"filter holds a number too long to read: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise FilterError(f"filter is nested too deeply (the limit is {MAX_DEPTH} levels)") from None
    if not isinstance(where, dict):
        raise FilterError(f"filter must be a JSON object, got {type(where).__name__}")
    return where


def validate_where(where: Any) -> None:
    """Check ``where`` against the grammar and the limits; raises ``FilterError`` naming the place."""
    _Checker().filter(where, "", 0)


class _Checker:
    """Walks a filter once, counting clauses; every refusal names its place."""

    def __init__(self) -> None:
        self.clauses = 0

    def _count(self, place: str) -> None:
        self.clauses += 1
        if self.clauses > MAX_CLAUSES:
            raise FilterError(f"{_at(place)}the filter has more than {MAX_CLAUSES} operators and comparisons")

    def filter(self, where: Any, place: str, depth: int) -> None:
        if not isinstance(where, dict):
            raise FilterError(f"{_at(place)}a filter must be an object, got {_kind(where)}")
        for key, value in where.items():
            if not isinstance(key, str):
                raise FilterError(
                    f"{_at(place)}filter keys are field names or operators (strings), "
                    f"got {_kind(key)} {printable(repr(key), 40)}"
                )
            here = _join(place, key)
            if key in LOGICAL:
                self.logical(key, value, here, depth + 1)
            elif key.startswith("$"):
                raise FilterError(
                    f"{_at(here)}unknown operator {printable(key)} at the top of a filter; "
                    f"use a field name or one of {', '.join(LOGICAL)}"
                )
            else:
                self.field(key, value, here)

    def logical(self, op: str, value: Any, place: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise FilterError(f"{_at(place)}filters nest at most {MAX_DEPTH} levels of $and / $or / $not")
        self._count(place)
        if op == "$not":
            self.filter(value, place, depth)
            return
        if not isinstance(value, list) or not value:
            raise FilterError(f"{_at(place)}{op} takes a non-empty list of filters, got {_kind(value)}")
        for i, item in enumerate(value):
            self.filter(item, f"{place}[{i}]", depth)

    def field(self, name: str, condition: Any, place: str) -> None:
        _check_key(name, place)
        if not isinstance(condition, dict):
            self._count(place)
            _check_value(condition, place, allow_bool=True)
            return
        if not condition:
            raise FilterError(f"{_at(place)}empty condition")
        for op, operand in condition.items():
            here = _join(place, op) if isinstance(op, str) else place
            if op not in COMPARISONS:
                raise FilterError(
                    f"{_at(here)}unknown operator {printable(str(op))}; use one of {', '.join(COMPARISONS)}"
                )
            self._count(here)
            if op in ("$in", "$nin"):
                if not isinstance(operand, list):
                    raise FilterError(f"{_at(here)}{op} takes a list, got {_kind(operand)}")
                if len(operand) > MAX_LIST:
                    raise FilterError(f"{_at(here)}{op} takes at most {MAX_LIST:,} values, got {len(operand):,}")
                for i, item in enumerate(operand):
                    _check_value(item, f"{here}[{i}]", allow_bool=True)
            else:
                _check_value(operand, here, allow_bool=op in ("$eq", "$ne"))


def _check_key(name: str, place: str) -> None:
    if not name or len(name) > MAX_KEY_CHARS:
        raise FilterError(f"{_at(place)}bad field name: names have 1 to {MAX_KEY_CHARS} characters, got {len(name):,}")
    if not is_utf8(name):
        raise FilterError(f"{_at(place)}bad field name: it cannot be encoded as UTF-8")
    for part in name.split("."):
        if not part or part.startswith("$") or has_control(part) or _BAD_KEY_CHARS & set(part):
            raise FilterError(
                f"{_at(place)}bad field name {printable(name)}: dot-separated parts must be non-empty, "
                'must not start with $ and must not hold control characters, ", \\, [ or ]'
            )


def _check_value(value: Any, place: str, allow_bool: bool) -> None:
    if isinstance(value, bool):
        if not allow_bool:
            raise FilterError(f"{_at(place)}cannot order by a boolean ({value!r})")
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise FilterError(f"{_at(place)}integer out of the 64-bit range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise FilterError(f"{_at(place)}number must be finite, got {value!r}")
    elif isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise FilterError(f"{_at(place)}strings have at most {MAX_STRING_CHARS:,} characters, got {len(value):,}")
        if not is_utf8(value):
            raise FilterError(f"{_at(place)}text cannot be encoded as UTF-8 (a lone surrogate such as \\ud800)")
    else:
        raise FilterError(f"{_at(place)}value is {_kind(value)}; use a string, number or boolean")


def _at(place: str) -> str:
    return f"{place}: " if place else ""


def _join(place: str, key: str) -> str:
    shown = key if is_utf8(key) and not has_control(key) and len(key) <= 64 else printable(key, 32)
    return f"{place}.{shown}" if place else shown


def _kind(value: Any) -> str:
    return type(value).__name__
