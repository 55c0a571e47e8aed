"""The JSON type of a metadata value, in SQL, for SQLite and PostgreSQL.

Filters compare a value only with an operand of its own JSON type: the number
2020 never equals the string "2020", and ``{"$gt": 5}`` never casts "unknown"
to a number (which PostgreSQL refuses with an error). ``json_is(column, path,
kind)`` is the SQL test; ``typed(column, path, kind)`` the value as that kind,
NULL when the stored value is of another kind or missing.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import Boolean, case, func, literal
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import FunctionElement

Kind = Literal["number", "string", "boolean"]

# what each database's type function answers for each kind
_SQLITE_KINDS = {"number": ("integer", "real"), "string": ("text",), "boolean": ("true", "false")}
_POSTGRES_KINDS = {"number": ("number",), "string": ("string",), "boolean": ("boolean",)}


class json_is(FunctionElement):
    """True when the JSON value at ``path`` in ``column`` is of ``kind`` (NULL when missing).

    Args:
        column: A JSON column.
        path: One key, or a tuple of keys into nested objects.
        kind: ``"number"``, ``"string"`` or ``"boolean"``.
    """

    type = Boolean()
    inherit_cache = False
    name = "json_is"

    def __init__(self, column, path: str | tuple[str, ...], kind: Kind):
        self.column, self.path, self.kind = column, path, kind
        super().__init__()


def _sqlite_path(path: str | tuple[str, ...]) -> str:
    """The JSON path SQLAlchemy's SQLite dialect uses for the same keys."""
    keys = path if isinstance(path, tuple) else (path,)
    return "$" + "".join(f'."{key}"' for key in keys)


@compiles(json_is, "sqlite")
def _json_is_sqlite(element: json_is, compiler, **kw) -> str:
    kind = func.json_type(element.column, literal(_sqlite_path(element.path)))
    return compiler.process(kind.in_(_SQLITE_KINDS[element.kind]), **kw)


@compiles(json_is, "postgresql")
def _json_is_postgresql(element: json_is, compiler, **kw) -> str:
    value = element.column[element.path]
    binary = isinstance(element.column.type.dialect_impl(compiler.dialect), JSONB)
    kind = (func.jsonb_typeof if binary else func.json_typeof)(value)
    return compiler.process(kind.in_(_POSTGRES_KINDS[element.kind]), **kw)


@compiles(json_is)
def _json_is_other(element: json_is, compiler, **kw) -> str:
    # Other databases: no type test; their casts decide.
    return compiler.process(element.column[element.path].as_string().is_not(None), **kw)


def typed(column, path: str | tuple[str, ...], kind: Kind) -> ColumnElement:
    """The value at ``path`` as ``kind`` (float, string or boolean); NULL when it is another kind."""
    element = column[path]
    value = {"number": element.as_float, "string": element.as_string, "boolean": element.as_boolean}[kind]()
    return case((json_is(column, path, kind), value))
