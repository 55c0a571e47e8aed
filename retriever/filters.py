"""Metadata filters: a small Mongo-style language compiled to SQL.

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
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, false, not_, or_, true
from sqlalchemy.sql.elements import ColumnElement

from retriever.errors import FilterError
from retriever.json_types import typed

COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
LOGICAL = ("$and", "$or", "$not")


def parse_where(text: str | None) -> dict | None:
    """Parse a JSON filter given on the command line; ``None`` stays ``None``."""
    if text is None or not text.strip():
        return None
    try:
        where = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FilterError(f"filter is not valid JSON: {exc}") from None
    if not isinstance(where, dict):
        raise FilterError(f"filter must be a JSON object, got {type(where).__name__}")
    return where


def validate_where(where: Any) -> None:
    """Raise ``FilterError`` naming the first malformed part of ``where``; return quietly if sound."""
    from sqlalchemy import JSON, column

    compile_where(where, column("meta", JSON))


def compile_where(where: dict[str, Any], column) -> ColumnElement:
    """Compile ``where`` against a JSON ``column``; raises ``FilterError`` when malformed."""
    if not isinstance(where, dict):
        raise FilterError(f"filter must be an object, got {type(where).__name__}: {where!r}")
    if not where:
        return true()
    clauses = []
    for key, value in where.items():
        if not isinstance(key, str):
            raise FilterError(f"filter keys are field names or operators (strings), got {key!r}")
        if key in LOGICAL:
            clauses.append(_logical(key, value, column))
        elif key.startswith("$"):
            raise FilterError(
                f"unknown operator {key!r} at the top of a filter; use a field name or one of {', '.join(LOGICAL)}"
            )
        else:
            clauses.append(_field(key, value, column))
    return and_(*clauses) if len(clauses) > 1 else clauses[0]


def _logical(op: str, value: Any, column) -> ColumnElement:
    if op == "$not":
        # The complement: a document the inner filter cannot judge (a missing
        # field makes the inner condition NULL) matches, as with $ne and $nin.
        inner = compile_where(value, column)
        return or_(not_(inner), inner.is_(None))
    if not isinstance(value, list) or not value:
        raise FilterError(f"{op} takes a non-empty list of filters, got {value!r}")
    parts = [compile_where(item, column) for item in value]
    return and_(*parts) if op == "$and" else or_(*parts)


def _field(name: str, condition: Any, column) -> ColumnElement:
    if not name or any(not part for part in name.split(".")):
        raise FilterError(f"bad field name {name!r}")
    path = tuple(name.split(".")) if "." in name else name
    if not isinstance(condition, dict):
        return _compare(name, column, path, "$eq", condition)
    if not condition:
        raise FilterError(f"field {name!r}: empty condition")
    parts = []
    for op, operand in condition.items():
        if op not in COMPARISONS:
            raise FilterError(f"field {name!r}: unknown operator {op!r}; use one of {', '.join(COMPARISONS)}")
        parts.append(_compare(name, column, path, op, operand))
    return and_(*parts) if len(parts) > 1 else parts[0]


def _compare(name: str, column, path, op: str, operand: Any) -> ColumnElement:
    # A comparison is NULL where the field is missing or of another type; the
    # negations ($ne, $nin) match exactly those NULLs as well.
    if op in ("$in", "$nin"):
        if not isinstance(operand, list):
            raise FilterError(f"field {name!r}: {op} takes a list, got {operand!r}")
        if not operand:
            return false() if op == "$in" else true()
        matches = or_(*[_equals(name, column, path, value) for value in operand])
        return matches if op == "$in" else or_(not_(matches), matches.is_(None))
    if op in ("$eq", "$ne"):
        equal = _equals(name, column, path, operand)
        return equal if op == "$eq" else or_(not_(equal), equal.is_(None))
    value = _typed(name, column, path, operand, allow_bool=False)
    return {
        "$gt": value > operand,
        "$gte": value >= operand,
        "$lt": value < operand,
        "$lte": value <= operand,
    }[op]


def _equals(name: str, column, path, value: Any) -> ColumnElement:
    return _typed(name, column, path, value, allow_bool=True) == value


def _typed(name: str, column, path, value: Any, allow_bool: bool):
    if isinstance(value, bool):
        if not allow_bool:
            raise FilterError(f"field {name!r}: cannot order by a boolean ({value!r})")
        return typed(column, path, "boolean")
    if isinstance(value, (int, float)):
        return typed(column, path, "number")
    if isinstance(value, str):
        return typed(column, path, "string")
    raise FilterError(
        f"field {name!r}: value {value!r} is a {type(value).__name__}; use a string, number or boolean"
    )
