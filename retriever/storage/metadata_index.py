"""Metadata as an indexed table, so that filters are answered by index lookups.

Every scalar leaf of a document's metadata is one row of ``semsearch_fields``
(key, field, kind, num, str), with nested objects flattened to dotted names
(``{"a": {"b": 1}}`` gives field ``a.b``). Indexes on ``(field, num)`` and
``(field, str)`` serve equality, ranges and ``$in``; lists and nulls are not
indexed, so they match no comparison (and every negation), as before.

``FilterPlan`` turns a ``where`` filter (grammar in ``retriever.filters``)
into one index lookup per comparison, sent together as one flat
``UNION ALL`` (split only to stay under the database's limits on terms and
parameters), and combines their key sets in memory: ``$and`` intersects,
``$or`` unites, and a negation (``$ne``, ``$nin``, ``$not``) takes the
complement within all documents. The SQL grows linearly with the filter and
never nests, however deep the filter.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np
from sqlalchemy import BigInteger, Column, Float, Index, String, Table, Text, and_, literal, or_, select, union_all

from retriever.filters import LOGICAL, validate_where

NUMBER, STRING, BOOLEAN = "n", "s", "b"
_RANGES = {"$gt": "__gt__", "$gte": "__ge__", "$lt": "__lt__", "$lte": "__le__"}
_MAX_TERMS = 400  # SQLite allows 500 terms in one compound SELECT
_MAX_PARAMETERS = 20_000  # SQLite allows 32,766 bound parameters, PostgreSQL 65,535


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
    # covering: a leaf lookup (field, kind, value) reads its keys from the index alone
    Index("ix_semsearch_fields_num", table.c.field, table.c.kind, table.c.num, table.c.key)
    Index("ix_semsearch_fields_str", table.c.field, table.c.kind, table.c.str, table.c.key)
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


class FilterPlan:
    """A checked filter as leaf lookups and the set algebra that combines them.

    Args:
        where: The filter; raises ``FilterError`` when malformed.
        fields, documents: The catalog's metadata and document tables.
    """

    def __init__(self, where: dict[str, Any], fields: Table, documents: Table) -> None:
        validate_where(where)
        self.f = fields
        self.documents = documents
        self.leaves: list = []  # SQL conditions on the fields table
        self.needs_all = False
        self.tree = self._filter(where)

    def statements(self) -> list:
        """Flat ``UNION ALL`` SELECTs of ``(leaf, key)`` rows; leaf -1 is every document."""
        terms, parameters, out = [], 0, []
        for i, condition in enumerate(self.leaves):
            term = select(literal(i).label("leaf"), self.f.c.key).where(condition)
            cost = len(term.compile().params)
            if terms and (len(terms) >= _MAX_TERMS or parameters + cost > _MAX_PARAMETERS):
                out.append(union_all(*terms) if len(terms) > 1 else terms[0])
                terms, parameters = [], 0
            terms.append(term)
            parameters += cost
        if self.needs_all:
            terms.append(select(literal(-1).label("leaf"), self.documents.c.key))
        if terms:
            out.append(union_all(*terms) if len(terms) > 1 else terms[0])
        return out

    def evaluate(self, rows: list[tuple[int, int]]) -> np.ndarray:
        """The sorted keys matching the filter, from the ``(leaf, key)`` rows of ``statements``."""
        flat = itertools.chain.from_iterable(rows)  # not np.asarray(rows): it probes each row object
        pairs = np.fromiter(flat, dtype=np.int64, count=2 * len(rows)).reshape(-1, 2)
        order = np.lexsort((pairs[:, 1], pairs[:, 0]))
        pairs = pairs[order]
        bounds = np.searchsorted(pairs[:, 0], np.arange(-1, len(self.leaves) + 1))
        sets = {leaf: np.unique(pairs[bounds[leaf + 1] : bounds[leaf + 2], 1]) for leaf in range(-1, len(self.leaves))}
        return _evaluate(self.tree, sets)

    # -- building the tree ----------------------------------------------------
    def _filter(self, where: dict) -> tuple:
        parts = [self._logical(k, v) if k in LOGICAL else self._field(k, v) for k, v in where.items()]
        if not parts:
            self.needs_all = True  # {} matches every document
        return ("and", parts) if len(parts) != 1 else parts[0]

    def _logical(self, op: str, value: Any) -> tuple:
        if op == "$not":
            return self._not(self._filter(value))
        return ("and" if op == "$and" else "or", [self._filter(item) for item in value])

    def _field(self, name: str, condition: Any) -> tuple:
        if not isinstance(condition, dict):
            return self._compare(name, "$eq", condition)
        parts = [self._compare(name, op, operand) for op, operand in condition.items()]
        return ("and", parts) if len(parts) != 1 else parts[0]

    def _compare(self, name: str, op: str, operand: Any) -> tuple:
        if op in ("$ne", "$nin"):
            return self._not(self._compare(name, "$eq" if op == "$ne" else "$in", operand))
        if op == "$in":
            conditions = self._one_of(operand)
        elif op == "$eq":
            conditions = [self._equals(operand)]
        else:
            kind, column = self._typed(operand)
            conditions = [and_(self.f.c.kind == kind, getattr(column, _RANGES[op])(operand))]
        if not conditions:
            return ("or", [])  # matches nothing
        self.leaves.append(and_(self.f.c.field == name, or_(*conditions) if len(conditions) > 1 else conditions[0]))
        return ("leaf", len(self.leaves) - 1)

    def _not(self, node: tuple) -> tuple:
        self.needs_all = True
        return ("not", node)

    def _one_of(self, values: list) -> list:
        """One ``kind = ? AND column IN (...)`` per value type: a long list stays one shallow clause."""
        groups: dict[str, tuple[Any, list]] = {}
        for value in values:
            kind, column = self._typed(value)
            groups.setdefault(kind, (column, []))[1].append(value if kind == STRING else float(value))
        return [and_(self.f.c.kind == kind, column.in_(group)) for kind, (column, group) in groups.items()]

    def _equals(self, value: Any):
        kind, column = self._typed(value)
        return and_(self.f.c.kind == kind, column == (float(value) if kind != STRING else value))

    def _typed(self, value: Any):
        if isinstance(value, bool):
            return BOOLEAN, self.f.c.num
        if isinstance(value, (int, float)):
            return NUMBER, self.f.c.num
        return STRING, self.f.c.str


def _evaluate(node: tuple, sets: dict[int, np.ndarray]) -> np.ndarray:
    kind, arg = node
    if kind == "leaf":
        return sets[arg]
    if kind == "not":
        return np.setdiff1d(sets[-1], _evaluate(arg, sets), assume_unique=True)
    parts = [_evaluate(child, sets) for child in arg]
    if kind == "or":
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    result = parts[0] if parts else sets[-1]
    for part in parts[1:]:
        result = np.intersect1d(result, part, assume_unique=True)
    return result
