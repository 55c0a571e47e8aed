"""Generated filters: each is refused with a FilterError naming its place, or it runs, in SQL linear in its size."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from sqlalchemy.dialects import sqlite

from retriever.errors import FilterError
from retriever.filters import MAX_CLAUSES, MAX_DEPTH, validate_where
from retriever.storage.catalog import documents, fields
from retriever.storage.metadata_index import FilterPlan
from tests.hostile.conftest import case, examples
from tests.hostile.strategies import filters, nested


def _sql(where) -> str:
    statements = FilterPlan(where, fields, documents).statements()
    return "; ".join(str(statement.compile(dialect=sqlite.dialect())) for statement in statements)


def matching_ids(col, where) -> set[str]:
    return {row.id for row in col.catalog.by_keys(col.catalog.matching_keys(where)).values()}


@settings(max_examples=examples(150))
@given(where=filters)
def test_a_filter_is_refused_by_name_or_runs_with_linear_sql(col, where):
    with case("filters"):
        try:
            validate_where(where)
        except FilterError as exc:
            assert str(exc).strip()
            with pytest.raises(FilterError):
                matching_ids(col, where)
            return
        size = len(json.dumps(where))
        assert len(_sql(where)) <= 40 * size + 400
        matched = matching_ids(col, where)
        assert matched <= set(col.ids())
        complement = {"$not": where}
        try:
            validate_where(complement)
        except FilterError:
            return  # where sits at a limit already
        others = matching_ids(col, complement)
        assert matched | others == set(col.ids()) and not matched & others  # $not is the exact complement


@settings(max_examples=examples(40))
@given(where=nested(40))
def test_deep_nesting_is_refused_before_any_sql(col, where):
    with case("filters"):
        try:
            validate_where(where)
        except FilterError as exc:
            assert str(exc).strip()
        else:
            matching_ids(col, where)


def test_sql_grows_linearly_with_not_depth():
    where, sizes = {"lang": "en"}, []
    for _ in range(MAX_DEPTH):
        where = {"$not": where}
        sizes.append(len(_sql(where)))
    steps = {b - a for a, b in zip(sizes, sizes[1:])}
    assert len(steps) == 1  # each level adds the same few characters


def test_limits_are_named():
    deep = {"lang": "en"}
    for _ in range(MAX_DEPTH + 1):
        deep = {"$not": deep}
    cases = [
        (deep, "nest at most"),
        ({"$or": [{"a": i} for i in range(MAX_CLAUSES + 1)]}, "more than"),
        ({"year": {"$in": list(range(1001))}}, "year.$in"),
        ({"year": 2**64}, "64-bit"),
        ({"year": float("inf")}, "finite"),
        ({'a"b': 1}, "bad field name"),
        ({"a\x00": 1}, "bad field name"),
        ({"lang": "\ud800"}, "UTF-8"),
        ({"$or": [{"lang": "en"}, {"year": {"$gt": True}}]}, "$or[1].year.$gt"),
    ]
    for where, words in cases:
        with pytest.raises(FilterError) as info:
            validate_where(where)
        assert words in str(info.value), (where, str(info.value))


def test_a_long_in_list_runs(col):
    assert matching_ids(col, {"year": {"$in": list(range(1000, 1999)) + [2019]}}) == {"coffee"}
    assert "tea" in matching_ids(col, {"lang": {"$in": [f"v{i}" for i in range(999)] + ["en"]}})
    assert matching_ids(col, {"year": {"$in": ["x", 2021, True]}}) == {"tea"}
