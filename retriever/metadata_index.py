"""Metadata as an indexed table, so that filters are answered by index lookups.

Every scalar leaf of a document's metadata is one row of ``semsearch_fields``
(key, field, kind, num, str), with nested objects flattened to dotted names
(``{"a": {"b": 1}}`` gives field ``a.b``). Indexes on ``(field, num)`` and
``(field, str)`` serve equality, ranges and ``$in``; lists and nulls are not
indexed, so they match no comparison (and every negation), as before.

``matching_keys_query`` compiles a ``where`` filter (grammar in
``retriever.filters``) to one SELECT of document keys. Positive conditions
start from an index lookup; a negation (``$ne``, ``$nin``, ``$not``) takes
the complement within all documents. Each filter node appears once in the
SQL, so the statement grows linearly with the filter.
"""

from __future__ import annotations

from typing import Any, Iterator

from sqlalchemy import BigInteger, Column, Float, Index, String, Table, Text, and_, false, or_, select, union
from sqlalchemy.sql import Select

from retriever.filters import LOGICAL, validate_where

NUMBER, STRING, BOOLEAN = "n", "s", "b"
_RANGES = {"$gt": "__gt__", "$gte": "__ge__", "$lt": "__lt__", "$lte": "__le__"}
_UNION_LIMIT = 400  # SQLite allows 500 terms in one compound SELECT


def fields_table(metadata_obj) -> Table:
    """The ``semsearch_fields`` table, registered on ``metadata_obj``."""
    table = Table(
        "semsearch_fields",
        metadata_obj,
        Column("key", BigInteger, nullable=False, index=True),
        Column("field", String(512), nullable=False),
        Column("kind", String(1), nullable=False),
        Column("num", Float, nullable=True),
        Column("str", Text, nullable=True),
    )
    Index("ix_semsearch_fields_num", table.c.field, table.c.num, table.c.key)
    Index("ix_semsearch_fields_str", table.c.field, table.c.str, table.c.key)
    return table


def field_rows(key: int, metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one document's metadata (scalars only, dotted names for nesting)."""
    return [
        {"key": key, "field": name, "kind": kind, "num": num, "str": text}
        for name, kind, num, text in _leaves(metadata, "")
    ]


def _leaves(value: dict, prefix: str) -> Iterator[tuple[str, str, float | None, str | None]]:
    for name, item in value.items():
        path = f"{prefix}{name}"
        if isinstance(item, dict):
            yield from _leaves(item, f"{path}.")
        elif isinstance(item, bool):
            yield path, BOOLEAN, float(item), None
        elif isinstance(item, (int, float)):
            yield path, NUMBER, float(item), None
        elif isinstance(item, str):
            yield path, STRING, None, item


def matching_keys_query(where: dict[str, Any], fields: Table, documents: Table) -> Select:
    """A SELECT of the keys of documents whose metadata satisfies ``where``.

    Raises:
        FilterError: ``where`` is malformed (see ``retriever.filters``).
    """
    validate_where(where)
    return _Compiler(fields, documents).keys(where)


class _Compiler:
    def __init__(self, fields: Table, documents: Table) -> None:
        self.f = fields
        self.documents = documents

    def everything(self) -> Select:
        return select(self.documents.c.key)

    def keys(self, where: dict) -> Select:
        """Keys matching a filter object (an implicit ``$and`` of its entries)."""
        parts = []
        for name, value in where.items():
            if name in LOGICAL:
                parts.append(self.logical(name, value))
            else:
                parts.append(self.field(name, value))
        return self.both(parts) if parts else self.everything()

    def logical(self, op: str, value: Any) -> Select:
        if op == "$not":
            return self.complement(self.keys(value))
        parts = [self.keys(item) for item in value]
        return self.both(parts) if op == "$and" else self.either(parts)

    def field(self, name: str, condition: Any) -> Select:
        if not isinstance(condition, dict):
            return self.compare(name, "$eq", condition)
        return self.both([self.compare(name, op, operand) for op, operand in condition.items()])

    def compare(self, name: str, op: str, operand: Any) -> Select:
        if op in ("$ne", "$nin"):
            return self.complement(self.compare(name, "$eq" if op == "$ne" else "$in", operand))
        if op == "$in":
            return self.lookup(name, [self.equals(value) for value in operand])
        if op == "$eq":
            return self.lookup(name, [self.equals(operand)])
        kind, column = self.typed(operand)
        return self.lookup(name, [and_(self.f.c.kind == kind, getattr(column, _RANGES[op])(operand))])

    def equals(self, value: Any):
        kind, column = self.typed(value)
        return and_(self.f.c.kind == kind, column == (float(value) if kind != STRING else value))

    def typed(self, value: Any):
        if isinstance(value, bool):
            return BOOLEAN, self.f.c.num
        if isinstance(value, (int, float)):
            return NUMBER, self.f.c.num
        return STRING, self.f.c.str

    def lookup(self, name: str, conditions: list) -> Select:
        """Keys having field ``name`` with a value meeting any of ``conditions``."""
        if not conditions:
            return select(self.f.c.key).where(false())
        return select(self.f.c.key).where(self.f.c.field == name, or_(*conditions) if len(conditions) > 1 else conditions[0])

    def both(self, parts: list[Select]) -> Select:
        if len(parts) == 1:
            return parts[0]
        first, rest = parts[0].subquery(), parts[1:]
        return select(first.c.key).where(*[first.c.key.in_(part) for part in rest])

    def either(self, parts: list[Select]) -> Select:
        if len(parts) == 1:
            return parts[0]
        if len(parts) <= _UNION_LIMIT:
            combined = union(*parts).subquery()
            return select(combined.c.key)
        return self.everything().where(or_(*[self.documents.c.key.in_(part) for part in parts]))

    def complement(self, part: Select) -> Select:
        return self.everything().where(self.documents.c.key.not_in(part))

