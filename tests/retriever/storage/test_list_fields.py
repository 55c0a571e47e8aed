"""List values as filter rows (``metadata_index``), and collections written before lists were indexed.

An "old" catalog is made as a semsearch from before wrote it: every document's
rows by the rules of then (scalar leaves of nested objects only, lists
skipped, ``locations`` included) and no format row. Before ``upgrade`` it
answers as documented (its documents' lists match nothing, their negations
match them; a document written since filters by its lists), ``check`` reports
it, and after ``upgrade`` every row is what a write gives now.
"""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import delete, insert, select

from retriever import Collection
from retriever.storage.catalog import Catalog, fields
from retriever.storage.fields_upgrade import fields_format, stale_documents
from retriever.storage.metadata_index import FIELDS_FORMAT, field_rows
from retriever.upgrading import upgrade
from tests.retriever.storage.test_upgrade import write_format_1

OLD_DOCS = {
    "mail": {"to": ["ann@example.org", "bob@example.org"], "subject": "tea", "attachments": [{"name": "a.pdf"}]},
    "sheet": {"sheets": ["Summary", "Q1"], "year": 2021},
    "note": {"tags": ["a", "b"], "year": 2020},
    "tagless": {"tags": [], "year": 2019},
    "city": {"locations": {"city": "Paris"}, "year": 2018},  # the caller's own object under the reserved key
    "plain": {"year": 2017, "nested": {"a": 1}},
}


def rows_of(key: int, metadata: dict) -> set[tuple]:
    return {(r["field"], r["kind"], r["num"], r["str"]) for r in field_rows(key, metadata)}


def test_list_elements_are_rows_under_the_lists_name():
    assert rows_of(1, {"tags": ["a", "b", "a"], "year": 2020}) == {
        ("tags", "s", None, "a"),
        ("tags", "s", None, "b"),
        ("year", "n", 2020.0, None),
    }
    assert len(field_rows(1, {"tags": ["a", "a", "a"]})) == 1  # a document's identical rows once
    assert rows_of(1, {"v": [1, "1", True, 1.0, None, []]}) == {
        ("v", "n", 1.0, None),
        ("v", "s", None, "1"),
        ("v", "b", 1.0, None),
    }


def test_objects_in_lists_are_flattened_and_lists_of_lists_are_not_indexed():
    meta = {
        "authors": [{"name": "x", "roles": ["editor"]}, {"name": "y", "roles": [["nested"]]}],
        "grid": [[1, 2], 3],
        "empty": [],
        "none": None,
    }
    assert rows_of(1, meta) == {
        ("authors.name", "s", None, "x"),
        ("authors.name", "s", None, "y"),
        ("authors.roles", "s", None, "editor"),
        ("grid", "n", 3.0, None),
    }


def test_locations_are_never_indexed_and_names_no_filter_can_name_are_left_out():
    locations = {"start": list(range(0, 50_000, 10)), "page": list(range(1, 5_001))}
    meta = {"locations": locations, "source": "/d/r.pdf", "nested": {"locations": "kept"}}
    assert rows_of(1, meta) == {("source", "s", None, "/d/r.pdf"), ("nested.locations", "s", None, "kept")}
    assert rows_of(1, {"locations": {"city": "Paris"}}) == set()
    assert rows_of(1, {"x" * 300: 1, "y" * 250: {"abcdefgh": 1}, "y" * 250 + "z": 2}) == {
        ("y" * 250 + "z", "n", 2.0, None)
    }


def table_rows(catalog: Catalog) -> dict[int, set[tuple]]:
    """Every row of ``semsearch_fields``, by key."""
    found: dict[int, set[tuple]] = {}
    with catalog.engine.connect() as conn:
        for key, *row in conn.execute(select(fields.c.key, fields.c.field, fields.c.kind, fields.c.num, fields.c.str)):
            found.setdefault(key, set()).add(tuple(row))
    return found


def test_a_new_catalog_records_the_format_and_keeps_locations_out(catalog_url, tiny_embedder, tmp_path):
    with Collection.create(tmp_path / "col", tiny_embedder, catalog_url=catalog_url) as col:
        pdf = {
            "locations": {"start": list(range(0, 30_000, 10)), "page": list(range(1, 3_001))},
            "tags": ["x"],
            "lang": "en",
        }
        col.add({"id": "pdf", "text": "a long report " * 40, "metadata": pdf})
        assert fields_format(col.catalog) == FIELDS_FORMAT and stale_documents(col.catalog) == 0
        key = col.catalog.lookup(["pdf"])["pdf"].key
        assert table_rows(col.catalog)[key] == {("tags", "s", None, "x"), ("lang", "s", None, "en")}  # none of 6,000
        assert list(col.ids(where={"tags": "x"})) == ["pdf"] and list(col.ids(where={"locations.page": 2})) == []
        assert col.check().ok
        snapshot = tmp_path / "snapshot"
        col.snapshot(snapshot)
    with Collection.open(snapshot, tiny_embedder) as copy:  # a PostgreSQL catalog copied into SQLite too
        assert fields_format(copy.catalog) == FIELDS_FORMAT and list(copy.ids(where={"tags": "x"})) == ["pdf"]


def old_rules(key: int, metadata: dict, prefix: str = "") -> list[dict]:
    """The rows a semsearch from before lists were indexed wrote: scalars of nested objects, nothing else."""
    rows = []
    for name, item in metadata.items():
        path = f"{prefix}{name}"
        if isinstance(item, dict):
            rows += old_rules(key, item, f"{path}.")
        elif isinstance(item, bool):
            rows.append({"key": key, "field": path, "kind": "b", "num": float(item), "str": None})
        elif isinstance(item, (int, float)):
            rows.append({"key": key, "field": path, "kind": "n", "num": float(item), "str": None})
        elif isinstance(item, str):
            rows.append({"key": key, "field": path, "kind": "s", "num": None, "str": item})
    return rows


def write_as_before(catalog: Catalog) -> None:
    """Every document's rows as a semsearch from before lists were indexed wrote them, and no format row."""
    rows = [row for doc_id in list(catalog.iter_ids()) for row in old_rules(*_key_and_meta(catalog, doc_id))]
    with catalog.engine.begin() as conn:
        conn.execute(delete(fields))
        conn.execute(insert(fields), rows)


def _key_and_meta(catalog: Catalog, doc_id: str) -> tuple[int, dict]:
    row = catalog.lookup([doc_id])[doc_id]
    return row.key, row.meta


@pytest.fixture
def old(catalog_url, tiny_embedder, tmp_path):
    """A collection whose catalog was written before lists were indexed, and one document written since."""
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, catalog_url=catalog_url) as col:
        col.add({"id": doc_id, "text": f"{doc_id} about tea", "metadata": meta} for doc_id, meta in OLD_DOCS.items())
        write_as_before(col.catalog)
        col.add({"id": "since", "text": "written since lists were indexed", "metadata": {"tags": ["a", "c"]}})
    return path


def ids(col, where) -> set[str]:
    return set(col.ids(where=where))


def test_before_upgrade_old_documents_lists_match_nothing_and_check_says_so(old, tiny_embedder):
    with Collection.open(old, tiny_embedder) as col:
        assert fields_format(col.catalog) == 1
        assert ids(col, {"tags": "a"}) == {"since"}
        assert ids(col, {"to": "ann@example.org"}) == set()
        assert ids(col, {"tags": {"$ne": "a"}}) == set(OLD_DOCS)  # the old note's ["a", "b"] is not seen
        assert ids(col, {"locations.city": "Paris"}) == {"city"}  # as it was written
        assert ids(col, {"year": {"$gte": 2020}, "subject": {"$ne": "x"}}) == {"sheet", "note"}  # scalars as ever
        assert {h.id for h in col.search("tea", k=10, where={"tags": {"$in": ["a"]}}, mode="dense")} == {"since"}
        assert stale_documents(col.catalog) == 4  # mail, sheet, note and city; tagless's [] gives no row
        report = col.check()
        assert not report.ok
        [damage] = report.damaged
        assert (damage.segment, damage.file) == ("catalog", "semsearch_fields")
        assert "4 document(s)" in damage.reason and "semsearch upgrade" in damage.reason
        repaired = col.check(repair=True)
        assert not repaired.repaired and len(col) == len(OLD_DOCS) + 1  # a repair drops nothing for it


def test_upgrade_indexes_old_lists_once(old, tiny_embedder):
    message = upgrade(old, progress=False)
    assert "indexed the list values of 4 document(s)" in message
    with Collection.open(old, tiny_embedder) as col:
        assert fields_format(col.catalog) == FIELDS_FORMAT and stale_documents(col.catalog) == 0
        assert ids(col, {"tags": "a"}) == {"note", "since"}
        assert ids(col, {"tags": {"$ne": "a"}}) == set(OLD_DOCS) - {"note"}
        assert ids(col, {"tags": {"$nin": ["b", "c"]}}) == set(OLD_DOCS) - {"note"}
        assert ids(col, {"to": "bob@example.org"}) == ids(col, {"attachments.name": "a.pdf"}) == {"mail"}
        assert ids(col, {"$or": [{"sheets": "Q1"}, {"tags": "c"}]}) == {"sheet", "since"}
        assert ids(col, {"$not": {"tags": {"$in": ["a", "b"]}}}) == set(OLD_DOCS) - {"note"}
        assert ids(col, {"locations.city": "Paris"}) == set()  # the reserved key is not indexed any more
        expected = {row.key: rows_of(row.key, row.meta) for row in col.catalog.lookup(list(col.ids())).values()}
        held = table_rows(col.catalog)
        assert held.pop(0) == {("$format", "v", float(FIELDS_FORMAT), None)}
        assert held == {key: rows for key, rows in expected.items() if rows}  # as a write gives them now
        assert col.check().ok
    assert "nothing to do" in upgrade(old, progress=False)


def test_an_upgrade_taken_up_again_rebuilds_only_the_rest(old, tiny_embedder):
    """What a killed run leaves: some documents rebuilt, no format row; the next run finishes."""
    with Collection.open(old, tiny_embedder) as col:
        key, meta = _key_and_meta(col.catalog, "mail")
        with col.catalog.engine.begin() as conn:
            conn.execute(delete(fields).where(fields.c.key == key))
            conn.execute(insert(fields), field_rows(key, meta))
        assert stale_documents(col.catalog) == 3
    assert "indexed the list values of 3 document(s)" in upgrade(old, progress=False)
    with Collection.open(old, tiny_embedder) as col:
        assert ids(col, {"to": "ann@example.org"}) == {"mail"} and ids(col, {"tags": "b"}) == {"note"}


def test_an_old_collection_without_lists_only_gets_the_format_row(catalog_url, tiny_embedder, tmp_path):
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, catalog_url=catalog_url) as col:
        col.add({"id": "plain", "text": "tea", "metadata": OLD_DOCS["plain"]})
        write_as_before(col.catalog)
        assert fields_format(col.catalog) == 1 and col.check().ok  # nothing is missing
    assert "nothing to do" in upgrade(path, progress=False)
    with Collection.open(path, tiny_embedder) as col:
        assert fields_format(col.catalog) == FIELDS_FORMAT and list(col.ids(where={"nested.a": 1})) == ["plain"]


def test_a_format_1_conversion_records_the_format(tmp_path, tiny_embedder):
    path = tmp_path / "old"
    write_format_1(path, tiny_embedder)
    upgrade(path, progress=False)
    with Collection.open(path, tiny_embedder) as col:
        assert fields_format(col.catalog) == FIELDS_FORMAT and col.check().ok
    db = sqlite3.connect(path / "catalog.sqlite")
    assert db.execute("SELECT count(*) FROM semsearch_fields WHERE key = 0").fetchone() == (1,)
    db.close()
