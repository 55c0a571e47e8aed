"""Metadata filters compiled to SQL over the indexed metadata table of a real SQLite catalog.

Expected sets come from a Python oracle over the same metadata, written from
the documented semantics (not copied from a run).
"""

from __future__ import annotations

import pytest

from retriever import BadInputError, Collection, FilterError
from retriever.filters import parse_where, validate_where
from tests.postgres import catalog_url_for

MISSING = object()
REGIONS = ["en", "de", "fr"]


def make_metadata(i: int) -> dict:
    meta: dict = {"year": 2000 + i, "score": round(i * 0.25, 2), "n": i}
    if i % 7 != 6:
        meta["region"] = REGIONS[i % 3]
    if i % 5 != 4:
        meta["draft"] = i % 2 == 0
    if i % 3 != 2:
        meta["nested"] = {"a": i % 4, "b": {"c": f"v{i % 2}"}}
    if i % 10 == 0:
        meta["tags"] = ["x", "y"]
    return meta


DOCS = {f"doc-{i:02d}": make_metadata(i) for i in range(30)}


def get(meta: dict, field: str):
    value = meta
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def oracle(pred) -> set[str]:
    return {doc_id for doc_id, meta in DOCS.items() if pred(meta)}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def col(request, tiny_embedder, tmp_path_factory):
    collection = Collection.create(
        tmp_path_factory.mktemp("filters") / "col", tiny_embedder, catalog_url=catalog_url_for(request)
    )
    collection.add(
        [
            {"id": doc_id, "text": f"document number {doc_id} about tea and rivers", "metadata": meta}
            for doc_id, meta in DOCS.items()
        ]
    )
    # a long document, so some documents have several chunks
    collection.upsert({"id": "doc-00", "text": "tea and rivers " * 120, "metadata": DOCS["doc-00"]})
    assert collection.catalog.counts()[1] > len(DOCS)
    yield collection
    collection.close()


def matched(col, where) -> set[str]:
    keys = col.catalog.matching_keys(where)
    assert len(set(keys.tolist())) == len(keys)
    return {row.id for row in col.catalog.by_keys(keys).values()}


CASES = [
    ({}, lambda m: True),
    ({"region": "en"}, lambda m: get(m, "region") == "en"),
    ({"region": {"$eq": "de"}}, lambda m: get(m, "region") == "de"),
    ({"region": {"$ne": "en"}}, lambda m: get(m, "region") != "en"),  # missing region matches
    ({"region": {"$in": ["en", "fr"]}}, lambda m: get(m, "region") in ("en", "fr")),
    ({"region": {"$nin": ["en", "fr"]}}, lambda m: get(m, "region") not in ("en", "fr")),
    ({"region": {"$in": []}}, lambda m: False),
    ({"region": {"$nin": []}}, lambda m: True),
    ({"year": 2010}, lambda m: m["year"] == 2010),
    ({"year": {"$gt": 2010}}, lambda m: m["year"] > 2010),
    ({"year": {"$gte": 2010}}, lambda m: m["year"] >= 2010),
    ({"year": {"$lt": 2010}}, lambda m: m["year"] < 2010),
    ({"year": {"$lte": 2010}}, lambda m: m["year"] <= 2010),
    ({"year": {"$gte": 2005, "$lt": 2012}}, lambda m: 2005 <= m["year"] < 2012),
    ({"year": {"$gt": 2003, "$ne": 2008, "$lte": 2015}}, lambda m: 2003 < m["year"] <= 2015 and m["year"] != 2008),
    ({"score": {"$gte": 2.5}}, lambda m: m["score"] >= 2.5),
    ({"score": {"$lt": 1.25}}, lambda m: m["score"] < 1.25),
    ({"score": 1.75}, lambda m: m["score"] == 1.75),
    ({"year": {"$in": [2001, 2003, 2099]}}, lambda m: m["year"] in (2001, 2003)),
    ({"draft": True}, lambda m: get(m, "draft") is True),
    ({"draft": False}, lambda m: get(m, "draft") is False),
    ({"draft": {"$ne": True}}, lambda m: get(m, "draft") is not True),
    ({"nested.a": 2}, lambda m: get(m, "nested.a") == 2),
    ({"nested.a": {"$gte": 2}}, lambda m: get(m, "nested.a") is not MISSING and get(m, "nested.a") >= 2),
    ({"nested.a": {"$ne": 0}}, lambda m: get(m, "nested.a") != 0),
    ({"nested.b.c": "v1"}, lambda m: get(m, "nested.b.c") == "v1"),
    ({"region": "en", "draft": True}, lambda m: get(m, "region") == "en" and get(m, "draft") is True),
    ({"$and": [{"region": "fr"}, {"year": {"$gt": 2010}}]}, lambda m: get(m, "region") == "fr" and m["year"] > 2010),
    ({"$or": [{"region": "de"}, {"year": {"$lt": 2003}}]}, lambda m: get(m, "region") == "de" or m["year"] < 2003),
    (
        {"$or": [{"region": "de"}, {"$and": [{"draft": False}, {"nested.a": 1}]}]},
        lambda m: get(m, "region") == "de" or (get(m, "draft") is False and get(m, "nested.a") == 1),
    ),
    ({"$not": {"year": {"$gt": 2020}}}, lambda m: not m["year"] > 2020),
    # $not is the complement: documents without the field match, as with $ne
    ({"$not": {"region": "en"}}, lambda m: get(m, "region") != "en"),
    ({"$not": {"nested.a": {"$in": [0, 1]}}}, lambda m: get(m, "nested.a") not in (0, 1)),
    (
        {"$not": {"$or": [{"region": "en"}, {"draft": True}]}},
        lambda m: not (get(m, "region") == "en" or get(m, "draft") is True),
    ),
    ({"missing_field": "x"}, lambda m: False),
    ({"missing_field": {"$ne": "x"}}, lambda m: True),
    ({"missing_field": {"$gt": 1}}, lambda m: False),
]


@pytest.mark.parametrize("where, pred", CASES, ids=[str(w) for w, _ in CASES])
def test_filter_selects_exactly_the_matching_documents(col, where, pred):
    expected = oracle(pred)
    assert matched(col, where) == expected


TRIVIAL = [
    {},
    {"region": {"$in": []}},
    {"region": {"$nin": []}},
    {"missing_field": "x"},
    {"missing_field": {"$ne": "x"}},
    {"missing_field": {"$gt": 1}},
]


def test_oracle_cases_are_not_trivial():
    """Each other case splits the corpus, so a filter that ignored it would fail."""
    for where, pred in CASES:
        expected = oracle(pred)
        if where not in TRIVIAL:
            assert 0 < len(expected) < len(DOCS), where


SEARCH_WHERES = [
    {"region": {"$ne": "en"}},
    {"region": {"$nin": ["en", "fr"]}},
    {"$or": [{"region": "de"}, {"year": {"$lt": 2003}}]},
    {"$not": {"region": "en"}},
    {"nested.a": {"$gte": 2}},
]
SEARCH_CASES = [case for case in CASES if case[0] in SEARCH_WHERES]
assert len(SEARCH_CASES) == len(SEARCH_WHERES)


@pytest.mark.parametrize("where, pred", SEARCH_CASES, ids=[str(w) for w, _ in SEARCH_CASES])
def test_search_returns_all_matching_documents(col, where, pred):
    expected = oracle(pred)
    hits = col.search("tea and rivers", k=100, where=where)
    assert {h.id for h in hits} == expected
    assert len(hits) == len(expected)
    for hit in hits:  # the collection adds each document's language (`lang`)
        assert {k: v for k, v in hit.metadata.items() if k != "lang"} == DOCS[hit.id]


@pytest.mark.parametrize(
    "where, words",
    [
        ({"year": {"$foo": 1}}, ["$foo"]),
        ({"$nor": [{"lang": "en"}]}, ["$nor"]),
        ({"lang": {"$in": "en"}}, ["$in", "list"]),
        ({"lang": {"$nin": {"en": 1}}}, ["$nin", "list"]),
        ({"lang": {"$eq": {"a": 1}}}, ["dict"]),
        ({"lang": None}, ["NoneType"]),
        ({"lang": {"$in": ["en", None]}}, ["NoneType"]),
        ({"lang": ["en", "de"]}, ["list"]),
        ({"$or": []}, ["$or", "non-empty list"]),
        ({"$and": {"lang": "en"}}, ["$and", "list"]),
        ({"$or": ["lang"]}, ["filter must be an object"]),
        ({"year": {"$gt": True}}, ["boolean"]),
        ({"year": {}}, ["empty condition"]),
        ({"a..b": 1}, ["bad field name"]),
        ({"": 1}, ["bad field name"]),
        ({"$not": "lang"}, ["filter must be an object"]),
        ({1: "en"}, ["1"]),
    ],
    ids=lambda v: str(v),
)
def test_malformed_filters_raise_filter_error_naming_the_problem(col, where, words):
    with pytest.raises(FilterError) as info:
        col.catalog.matching_keys(where)
    for word in words:
        assert word in str(info.value)
    with pytest.raises(FilterError):
        col.search("tea", where=where)


@pytest.mark.parametrize("where", [["lang", "en"], "lang=en", 3, None])
def test_non_dict_filter_is_refused(where):
    with pytest.raises(FilterError, match="object"):
        validate_where(where)


def test_filter_error_is_bad_input():
    assert issubclass(FilterError, BadInputError)
    assert issubclass(FilterError, ValueError)


def test_parse_where():
    assert parse_where(None) is None
    assert parse_where("   ") is None
    assert parse_where('{"lang": "en", "year": {"$gte": 2019}}') == {"lang": "en", "year": {"$gte": 2019}}
    with pytest.raises(FilterError, match="not valid JSON"):
        parse_where("{lang: en}")
    with pytest.raises(FilterError, match="object.*list"):
        parse_where('["lang", "en"]')
    with pytest.raises(FilterError, match="object"):
        parse_where('"en"')


def test_field_names_with_spaces_dashes_and_non_ascii(tiny_embedder, tmp_path):
    col = Collection.create(tmp_path / "col", tiny_embedder)
    col.add(
        [
            {
                "id": "a",
                "text": "tea",
                "metadata": {"größe": 3, "file-name": "a.txt", "last modified": 1, "Sprache": "Français"},
            },
            {
                "id": "b",
                "text": "coffee",
                "metadata": {"größe": 5, "file-name": "b.txt", "last modified": 2, "Sprache": "Deutsch"},
            },
        ]
    )
    assert matched(col, {"größe": {"$gte": 4}}) == {"b"}
    assert matched(col, {"größe": 3}) == {"a"}
    assert matched(col, {"file-name": "b.txt"}) == {"b"}
    assert matched(col, {"last modified": {"$lt": 2}}) == {"a"}
    assert matched(col, {"Sprache": "Français"}) == {"a"}
    assert col.get("a").metadata["größe"] == 3


MIXED = {
    "number": 2020,
    "numeric-string": "2020",
    "word": "unknown",
    "true": True,
    "one": 1,
    "yes": "yes",
    "object": {"x": 1},
    "list": [1, 2],
    "null": None,
    "absent": MISSING,
}
OTHERS = set(MIXED)
TYPED_CASES = [  # the list [1, 2] matches by its elements
    ({"v": 2020}, {"number"}),
    ({"v": "2020"}, {"numeric-string"}),
    ({"v": {"$gte": 2000}}, {"number"}),
    ({"v": {"$lt": 5}}, {"one", "list"}),
    ({"v": True}, {"true"}),
    ({"v": 1}, {"one", "list"}),
    ({"v": 1.0}, {"one", "list"}),
    ({"v": 2}, {"list"}),
    ({"v": False}, set()),
    ({"v": {"$gt": "a"}}, {"word", "yes"}),
    ({"v": {"$in": [1, "yes"]}}, {"one", "yes", "list"}),
    ({"v": {"$ne": 2020}}, OTHERS - {"number"}),
    ({"v": {"$ne": 2}}, OTHERS - {"list"}),
    ({"v": {"$nin": [True, "2020"]}}, OTHERS - {"true", "numeric-string"}),
    ({"$not": {"v": {"$lte": 2020}}}, OTHERS - {"number", "one", "list"}),
]


@pytest.mark.parametrize("where, expected", TYPED_CASES, ids=[str(w) for w, _ in TYPED_CASES])
def test_values_match_only_operands_of_their_own_json_type(typed_col, where, expected):
    """On SQLite and PostgreSQL alike: 2020 is not "2020", true is not 1, a list's elements compare one by one,
    and no cast fails."""
    hits = typed_col.search("tea", k=50, where=where, mode="dense")
    assert {hit.id for hit in hits} == expected


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def typed_col(request, tiny_embedder, tmp_path_factory):
    collection = Collection.create(
        tmp_path_factory.mktemp("typed") / "col", tiny_embedder, catalog_url=catalog_url_for(request)
    )
    collection.add(
        {"id": doc_id, "text": f"tea number {i}", "metadata": {} if value is MISSING else {"v": value}}
        for i, (doc_id, value) in enumerate(MIXED.items())
    )
    yield collection
    collection.close()


def test_parse_where_refuses_a_number_too_long_to_read():
    """Python refuses to convert integers of more than 4,300 digits; the filter says so instead of a bare ValueError."""
    with pytest.raises(FilterError, match="number too long"):
        parse_where('{"year": ' + "7" * 5_000 + "}")
