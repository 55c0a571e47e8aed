"""Metadata as an indexed table, so that filters are answered by index lookups.

Every scalar leaf of a document's metadata is one row of ``semsearch_fields``
(key, field, kind, num, str), with nested objects flattened to dotted names
(``{"a": {"b": 1}}`` gives field ``a.b``). A list gives one row per scalar
element, under the list's own name (``{"tags": ["a", "b"]}`` gives two rows of
field ``tags``), and an object inside a list is flattened as if it stood alone
(``{"authors": [{"name": "x"}, {"name": "y"}]}`` gives two rows of field
``authors.name``); a list directly inside a list, a null, and a field name a
filter cannot name (longer than ``filters.MAX_KEY_CHARS``) give none. A
document's identical rows are kept once. The reserved top-level key
``locations`` (``retriever.locations``: columns of offsets, often thousands of
numbers) is never indexed, nothing under it.

Indexes on ``(field, kind, num, key)`` and ``(field, kind, str, key)`` serve
equality, ranges and ``$in``. A comparison matches a document when any of its
rows for the field matches, so a list matches when any element does (as in
MongoDB), and each operator of one condition may be met by another element.

The table also holds one row that is no document's: key 0 (keys start at 1),
field ``$format`` (no filter can name a field starting with ``$``), kind
``v``, ``num`` the version of these rules, ``FIELDS_FORMAT``: 2 since lists are
indexed. A catalog without it was written when only scalars were (version 1):
its documents' list values have no rows until ``semsearch upgrade`` rebuilds
them (``retriever.storage.fields_upgrade``), and the catalog gets the row.

``FilterPlan`` turns a ``where`` filter (grammar in ``retriever.filters``)
into one index lookup per comparison, sent together as one flat
``UNION ALL`` (split only to stay under the database's limits on terms and
parameters), and combines their key sets in memory: ``$and`` intersects,
``$or`` unites, and a negation (``$ne``, ``$nin``, ``$not``) takes the
complement within all documents, so ``$ne`` matches a list none of whose
elements is equal. The SQL grows linearly with the filter and never nests,
however deep the filter.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np
from sqlalchemy import BigInteger, Column, Float, Index, String, Table, Text, and_, literal, or_, select, union_all

from retriever.filters import LOGICAL, MAX_KEY_CHARS, validate_where
from retriever.locations import LOCATIONS_KEY

NUMBER, STRING, BOOLEAN = "n", "s", "b"
FIELDS_FORMAT = 2  # 1: scalars only; 2: list elements too, `locations` left out
FORMAT_KEY, FORMAT_FIELD, FORMAT_KIND = 0, "$format", "v"
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
    """The rows of one document's metadata (the rules above): ``{"key", "field", "kind", "num", "str"}`` dicts,
    one per scalar and list element under its dotted name, each once, in the metadata's order."""
    leaves = (leaf for name, item in metadata.items() if name != LOCATIONS_KEY for leaf in _leaves(item, name))
    return [
        {"key": key, "field": name, "kind": kind, "num": num, "str": text}
        for name, kind, num, text in dict.fromkeys(leaves)
    ]


def format_row() -> dict[str, Any]:
    """The row that records ``FIELDS_FORMAT`` in the table (key 0 is no document's)."""
    return {"key": FORMAT_KEY, "field": FORMAT_FIELD, "kind": FORMAT_KIND, "num": float(FIELDS_FORMAT), "str": None}


def format_query(table: Table):
    """SELECT of the recorded format version (no row: version 1)."""
    return select(table.c.num).where(
        table.c.field == FORMAT_FIELD, table.c.kind == FORMAT_KIND, table.c.key == FORMAT_KEY
    )


def _leaves(item: Any, path: str, in_list: bool = False) -> Iterator[tuple[str, str, float | None, str | None]]:
    if len(path) > MAX_KEY_CHARS:
        return  # no filter can name it
    if isinstance(item, dict):
        for name, value in item.items():
            yield from _leaves(value, f"{path}.{name}")
    elif isinstance(item, (list, tuple)):
        if not in_list:  # a list of lists is not indexed
            for element in item:
                yield from _leaves(element, path, in_list=True)
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
