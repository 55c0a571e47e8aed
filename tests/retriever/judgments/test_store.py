"""The ``semsearch_judgments`` table on a real SQLite catalog: writes replace, reads filter, old catalogs read empty."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from retriever.judgments import store
from retriever.judgments.records import Judgment, query_key
from retriever.storage.catalog import Catalog, DocumentRow, Publish


@pytest.fixture()
def catalog(tmp_path):
    """A new catalog holding documents ``a`` and ``b``."""
    found = Catalog(f"sqlite:///{tmp_path / 'catalog.sqlite3'}")
    found.create(str(uuid.uuid4()))
    rows = [DocumentRow(doc_id, key, doc_id, {}, "h", "t", 1) for key, doc_id in enumerate(("a", "b"), start=1)]
    found.publish(0, Publish(segments=[], next_key=3, next_segment=1, insert=rows))
    yield found
    found.close()


def test_a_second_judgment_of_a_pair_replaces_the_first(catalog):
    assert store.write_judgments(catalog, [Judgment("q one", "a", 1, "ann", 10.0)]) == (1, 0)
    assert store.write_judgments(catalog, [Judgment("q one", "a", 3, "bob", 20.0), Judgment("q one", "b", 0)]) == (1, 1)
    listed = store.list_judgments(catalog)
    assert [(j.doc_id, j.grade, j.who) for j in listed] == [("b", 0, ""), ("a", 3, "bob")]  # newest first
    assert listed[0].at > 20.0  # 0 became the time of storing
    assert store.count_judgments(catalog) == (2, 1)


def test_items_for_the_same_pair_in_one_write_keep_the_last(catalog):
    assert store.write_judgments(catalog, [Judgment("q", "a", 1), Judgment("q", "a", 2)]) == (1, 0)
    assert [j.grade for j in store.list_judgments(catalog)] == [2]


def test_reads_filter_by_query_and_id(catalog):
    store.write_judgments(
        catalog, [Judgment("q1", "a", 1, at=1.0), Judgment("q1", "b", 0, at=2.0), Judgment("q2", "a", 2, at=3.0)]
    )
    assert [(j.query, j.doc_id) for j in store.list_judgments(catalog, query="q1")] == [("q1", "b"), ("q1", "a")]
    assert [j.query for j in store.list_judgments(catalog, doc_id="a")] == ["q2", "q1"]
    assert [j.grade for j in store.list_judgments(catalog, "q2", "a")] == [2]
    judged = store.judged_set(catalog)
    assert judged.queries == {query_key("q1"): "q1", query_key("q2"): "q2"}
    assert judged.qrels[query_key("q1")] == {"a": 1, "b": 0}  # grade 0 kept
    assert len(judged) == 2 and judged.judgments == 3
    assert store.preview_judgments(catalog, [Judgment("q1", "a"), Judgment("q3", "a")]) == (1, 1)


def test_remove_by_query_by_id_by_pair_and_everything(catalog):
    store.write_judgments(catalog, [Judgment(q, d) for q in ("q1", "q2", "q3") for d in ("a", "b")])
    assert store.remove_judgments(catalog, query="q1", doc_id="a") == 1
    assert store.remove_judgments(catalog, query="q1") == 1
    assert store.remove_judgments(catalog, doc_id="b") == 2
    assert store.remove_judgments(catalog, everything=True) == 2
    assert store.list_judgments(catalog) == []
    with pytest.raises(ValueError):
        store.remove_judgments(catalog)


def test_judgments_of_deleted_documents_are_counted_as_dangling(catalog):
    store.write_judgments(catalog, [Judgment("q", "a"), Judgment("q", "b"), Judgment("r", "b")])
    assert store.dangling_count(catalog) == 0
    catalog.publish(1, Publish(segments=[], next_key=3, next_segment=1, remove=["b"]))
    assert store.dangling_count(catalog) == 2
    assert len(store.list_judgments(catalog)) == 3  # kept


def test_a_catalog_without_the_table_reads_empty_and_the_first_write_creates_it(catalog):
    with catalog.engine.begin() as conn:
        conn.execute(text("DROP TABLE semsearch_judgments"))
    assert not store.has_table(catalog)
    assert store.list_judgments(catalog) == [] and store.count_judgments(catalog) == (0, 0)
    assert len(store.judged_set(catalog)) == 0 and store.dangling_count(catalog) == 0
    assert store.remove_judgments(catalog, everything=True) == 0
    assert store.preview_judgments(catalog, [Judgment("q", "a")]) == (1, 0)
    assert store.write_judgments(catalog, [Judgment("q", "a")]) == (1, 0)
    assert store.has_table(catalog) and store.count_judgments(catalog) == (1, 1)
