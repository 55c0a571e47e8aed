"""Filters over metadata fields holding lists, on SQLite and PostgreSQL catalogs.

Expected sets come from a Python oracle of MongoDB's semantics, written from
the documented grammar (``retriever.filters``): a comparison matches a list
when any scalar element matches, ``$ne`` / ``$nin`` when none does, objects in
a list are reached by dotted names, a list directly inside a list and the
reserved ``locations`` key match nothing. A few cases also spell out their
expected ids by hand, so the oracle cannot share a mistake with the catalog.
"""

from __future__ import annotations

import operator

import pytest

from retriever import Collection
from tests.postgres import catalog_url_for

PEOPLE = ["ann@example.org", "bob@example.org", "cy@example.org", "dee@example.org"]
TAGS = ["a", "b", "c", "d", "e"]


def make_metadata(i: int) -> dict:
    """Mails, workbooks and tagged notes: lists of strings, numbers, objects, lists and mixed values."""
    meta: dict = {"n": i}
    if i % 3 == 0:
        meta["to"] = [PEOPLE[i % 4], PEOPLE[(i + 1) % 4]]
        meta["cc"] = [PEOPLE[(i + 2) % 4]] if i % 2 else []
        meta["attachments"] = [{"name": f"f{i}.pdf", "size": 1000 * i}, {"name": "logo.png", "size": 20}]
    elif i % 3 == 1:
        meta["sheets"] = ["Summary", f"Q{i % 4 + 1}"]
        meta["to"] = PEOPLE[i % 4]  # a scalar in one document, a list in others
    if i % 4 != 3:
        meta["tags"] = [TAGS[j % 5] for j in range(i % 5, i % 5 + 1 + i % 3)]
    meta["years"] = [2000 + i, 2010 + i % 7]
    if i % 5 == 0:
        meta["authors"] = [{"name": "x", "roles": ["editor", "writer"]}, {"name": f"p{i}", "roles": "reader"}]
        meta["grid"] = [[i, i + 1], [f"r{i}"]]  # lists of lists are not indexed
        meta["mixed"] = [1, "1", True, None, {"k": i % 2}, 2.5]
    if i % 7 == 0:
        meta["locations"] = {"start": list(range(0, 3000 * 10, 10)), "page": list(range(1, 3001))}
    return meta


DOCS = {f"doc-{i:02d}": make_metadata(i) for i in range(36)}
MISSING = object()


def _same(value, operand) -> bool:
    """Equal and of the same JSON type (a boolean is no number)."""
    if isinstance(value, bool) or isinstance(operand, bool):
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    if isinstance(value, str) or isinstance(operand, str):
        return isinstance(value, str) and isinstance(operand, str) and value == operand
    return value == operand


def _ordered(value, operand, compare) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(operand, str):
        return isinstance(value, str) and compare(value, operand)
    return isinstance(value, (int, float)) and not isinstance(value, str) and compare(value, operand)


def candidates(meta: dict, field: str) -> list:
    """The scalars a comparison on ``field`` meets: MongoDB's path walk, one list level per step."""
    parts = field.split(".")
    if parts[0] == "locations":
        return []

    def walk(value, rest, in_list=False):
        if not rest:
            if isinstance(value, list):
                return [] if in_list else [v for item in value for v in walk(item, [], True)]
            return [] if isinstance(value, dict) or value is None else [value]
        if isinstance(value, dict):
            return walk(value[rest[0]], rest[1:]) if rest[0] in value else []
        if isinstance(value, list) and not in_list:
            return [v for item in value if isinstance(item, dict) for v in walk(item, rest, True)]
        return []

    return walk(meta, parts)


RANGES = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def oracle_matches(meta: dict, where: dict) -> bool:
    for key, condition in where.items():
        if key == "$and" and not all(oracle_matches(meta, w) for w in condition):
            return False
        if key == "$or" and not any(oracle_matches(meta, w) for w in condition):
            return False
        if key == "$not" and oracle_matches(meta, condition):
            return False
        if key.startswith("$"):
            continue
        values = candidates(meta, key)
        for op, operand in condition.items() if isinstance(condition, dict) else [("$eq", condition)]:
            if op in ("$eq", "$ne"):
                hit = any(_same(v, operand) for v in values)
            elif op in ("$in", "$nin"):
                hit = any(_same(v, o) for v in values for o in operand)
            else:
                hit = any(_ordered(v, operand, RANGES[op]) for v in values)
            if hit == (op in ("$ne", "$nin")):
                return False
    return True


def oracle(where: dict) -> set[str]:
    return {doc_id for doc_id, meta in DOCS.items() if oracle_matches(meta, where)}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def col(request, tiny_embedder, tmp_path_factory):
    collection = Collection.create(
        tmp_path_factory.mktemp("lists") / "col", tiny_embedder, catalog_url=catalog_url_for(request)
    )
    collection.add(
        {"id": doc_id, "text": f"message {doc_id} about tea and rivers", "metadata": meta}
        for doc_id, meta in DOCS.items()
    )
    yield collection
    collection.close()


def matched(col, where) -> set[str]:
    keys = col.catalog.matching_keys(where)
    assert len(set(keys.tolist())) == len(keys)
    return {row.id for row in col.catalog.by_keys(keys.tolist()).values()}


CASES = [
    {"to": "ann@example.org"},
    {"to": {"$eq": "bob@example.org"}},
    {"to": {"$ne": "ann@example.org"}},
    {"to": {"$in": ["cy@example.org", "nobody@example.org"]}},
    {"to": {"$nin": ["ann@example.org", "bob@example.org"]}},
    {"cc": "dee@example.org"},
    {"cc": {"$ne": "dee@example.org"}},  # an empty list and a missing field match
    {"tags": "a"},
    {"tags": {"$in": ["a"]}},
    {"tags": {"$in": ["b", "e"]}},
    {"tags": {"$nin": ["a", "c"]}},
    {"tags": {"$ne": "d"}},
    {"tags": {"$gt": "c"}},
    {"tags": {"$lte": "b"}},
    {"tags": "a", "to": "cy@example.org"},
    {"$and": [{"tags": "a"}, {"tags": "b"}]},
    {"$or": [{"tags": "e"}, {"sheets": "Q2"}]},
    {"$not": {"tags": "a"}},
    {"$not": {"tags": {"$in": ["a", "b"]}}},
    {"$not": {"$or": [{"tags": "c"}, {"to": "dee@example.org"}]}},
    {"years": 2010},
    {"years": {"$gte": 2030}},
    {"years": {"$gt": 2012, "$lt": 2014}},  # each bound may be met by another element
    {"years": {"$gte": 2013, "$lte": 2013}},
    {"years": {"$ne": 2010}},
    {"years": {"$in": [2003, 2016]}},
    {"$not": {"years": {"$lt": 2012}}},
    {"attachments.name": "logo.png"},
    {"attachments.name": "f9.pdf"},
    {"attachments.size": {"$gt": 20000}},
    {"attachments.size": {"$lt": 100}},
    {"attachments.name": {"$ne": "f3.pdf"}},
    {"authors.name": "x"},
    {"authors.name": "p10"},
    {"authors.roles": "editor"},
    {"authors.roles": "reader"},
    {"authors.roles": {"$nin": ["writer"]}},
    {"grid": 0},
    {"grid": "r5"},
    {"grid": {"$ne": 5}},
    {"mixed": 1},
    {"mixed": "1"},
    {"mixed": True},
    {"mixed": 2.5},
    {"mixed": {"$gt": 2}},
    {"mixed.k": 1},
    {"mixed": {"$ne": "1"}},
    {"locations.page": 1},
    {"locations.start": {"$gte": 0}},
    {"locations.page": {"$ne": 1}},
    {"sheets": "Summary", "$or": [{"to": "bob@example.org"}, {"tags": "e"}]},
]


@pytest.mark.parametrize("where", CASES, ids=[str(w) for w in CASES])
def test_list_fields_match_as_in_mongodb(col, where):
    assert matched(col, where) == oracle(where)


def test_the_cases_split_the_documents():
    """All but the fields never indexed select some documents and leave others out."""
    never = ("grid", "locations")
    for where in CASES:
        expected = oracle(where)
        if any(name.startswith(never) for name in where):
            assert expected in (set(), set(DOCS)), where
        else:
            assert 0 < len(expected) < len(DOCS), where


def test_expected_ids_spelled_out(col):
    mails_to_ann = {"doc-00", "doc-03", "doc-12", "doc-15", "doc-24", "doc-27"}  # ann first or second in the list
    assert matched(col, {"to": "ann@example.org"}) == mails_to_ann | {"doc-04", "doc-16", "doc-28"}  # or alone
    assert matched(col, {"authors.name": "x"}) == {f"doc-{i:02d}" for i in range(0, 36, 5)}
    assert matched(col, {"attachments.size": {"$gt": 30000}}) == {"doc-33"}
    assert matched(col, {"years": {"$gte": 2035}}) == {"doc-35"}
    # each bound met by another element: [2000, 2010], [2001, 2011], [2002, 2012]
    assert matched(col, {"years": {"$gt": 2005, "$lt": 2003}}) == {"doc-00", "doc-01", "doc-02"}
    assert matched(col, {"mixed.k": 1}) == {"doc-05", "doc-15", "doc-25", "doc-35"}
    assert matched(col, {"grid": 0}) == set()
    assert matched(col, {"locations.page": 1}) == set()
    assert matched(col, {"locations.page": {"$ne": 1}}) == set(DOCS)


SEARCHED = [
    {"to": "ann@example.org"},
    {"tags": {"$in": ["a"]}},
    {"tags": {"$nin": ["a", "c"]}},
    {"$not": {"attachments.name": "logo.png"}},
    {"years": {"$gt": 2012, "$lt": 2014}},
]


@pytest.mark.parametrize("where", SEARCHED, ids=[str(w) for w in SEARCHED])
def test_search_and_ids_return_every_matching_document(col, where):
    expected = oracle(where)
    for mode in ("dense", "hybrid"):
        hits = col.search("tea and rivers", k=len(DOCS), where=where, mode=mode)
        assert {h.id for h in hits} == expected and len(hits) == len(expected)
    assert list(col.ids(where=where)) == sorted(expected)


def test_a_metadata_change_replaces_the_list_rows(col):
    doc_id = "doc-00"
    assert doc_id in matched(col, {"to": "ann@example.org"})
    changed = {**DOCS[doc_id], "to": ["zed@example.org"], "tags": []}
    col.upsert({"id": doc_id, "text": f"message {doc_id} about tea and rivers", "metadata": changed})
    try:
        assert doc_id not in matched(col, {"to": "ann@example.org"})
        assert matched(col, {"to": "zed@example.org"}) == {doc_id}
        assert doc_id in matched(col, {"tags": {"$nin": TAGS}})
    finally:
        col.upsert({"id": doc_id, "text": f"message {doc_id} about tea and rivers", "metadata": DOCS[doc_id]})
    assert matched(col, {"to": "zed@example.org"}) == set()


def test_a_long_in_list_over_a_long_list_field(tiny_embedder, tmp_path):
    """A document with thousands of tags, and an $in of the largest size the grammar allows."""
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.add(
            [
                {"id": "many", "text": "tea", "metadata": {"tags": [f"t{i}" for i in range(5000)]}},
                {"id": "few", "text": "rivers", "metadata": {"tags": ["t1", "other"]}},
            ]
        )
        wanted = [f"t{i}" for i in range(4000, 5000)]
        assert matched(col, {"tags": {"$in": wanted}}) == {"many"}
        assert matched(col, {"tags": {"$nin": wanted}}) == {"few"}
        assert matched(col, {"tags": {"$gte": "t4999"}}) == {"many"}
        assert matched(col, {"tags": "t1"}) == {"many", "few"}
