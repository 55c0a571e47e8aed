"""``Collection``'s judgment verbs on a real small collection: store, replace, import, list, remove, and where
judgments live (the catalog: snapshots keep them, check notes those of deleted documents, old catalogs read empty)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import text

from retriever import Collection
from retriever.errors import BadInputError
from retriever.judgments.records import Judgment, query_key

IDS = ("tea", "coffee", "rivers")


@pytest.fixture()
def col(tmp_path, tiny_embedder):
    """A collection of three documents (vectors given: nothing to embed)."""
    vectors = np.random.default_rng(0).normal(size=(len(IDS), tiny_embedder.dim))
    with Collection.create(tmp_path / "col", tiny_embedder) as collection:
        collection.add([{"id": doc_id, "text": f"all about {doc_id}"} for doc_id in IDS], vectors=vectors)
        yield collection


def pairs(judgments) -> list[tuple[str, str, int]]:
    return sorted((j.query, j.doc_id, j.grade) for j in judgments)


def test_judge_stores_replaces_and_changes_no_generation(col):
    generation = col.catalog.state().generation
    first = col.judge("  green tea ", "tea", 2, who="ann")
    assert first.query == "green tea" and first.grade == 2 and first.who == "ann" and first.at > 0
    again = col.judge("green tea", "tea", 0)
    assert again.grade == 0 and again.who == "" and again.at >= first.at
    col.judge("green tea", "coffee")  # grade 1 by default
    assert pairs(col.judgments()) == [("green tea", "coffee", 1), ("green tea", "tea", 0)]
    assert col.judgments()[0].doc_id == "coffee"  # newest first
    assert col.judgment_count() == (2, 1)
    assert col.catalog.state().generation == generation
    assert col.info()["judgments"] == {"judgments": 2, "queries": 1}


@pytest.mark.parametrize("grade", [4, -1, True, "1", 1.0, None])
def test_judge_refuses_a_grade_outside_0_to_3(col, grade):
    with pytest.raises(BadInputError, match="grade must be one of"):
        col.judge("q", "tea", grade)
    assert col.judgments() == []


@pytest.mark.parametrize(
    "query, doc_id, message",
    [
        ("q", "nothing-here", "holds no document 'nothing-here'"),
        ("  ", "tea", "query must not be empty"),
        (7, "tea", "query must be a string"),
        ("q", "", "id must not be empty"),
    ],
)
def test_judge_refuses_unknown_ids_and_bad_queries(col, query, doc_id, message):
    with pytest.raises(BadInputError, match=message):
        col.judge(query, doc_id)
    assert col.judgments() == []


def test_import_a_list_reports_unknown_ids_and_stores_the_rest(col):
    col.judge("rivers", "rivers", 1)
    report = col.import_judgments(
        [
            {"query": "rivers", "id": "rivers", "grade": 3},
            {"query": "rivers", "id": "gone"},
            Judgment("drinks", "tea", 2),
            {"query": "drinks", "id": "coffee", "grade": 0},
        ],
        who="import",
    )
    assert (report.stored, report.replaced, report.queries) == (2, 1, 2)
    assert report.unknown == [(1, "gone")]
    assert pairs(col.judgments()) == [("drinks", "coffee", 0), ("drinks", "tea", 2), ("rivers", "rivers", 3)]
    assert {j.who for j in col.judgments()} == {"import"}
    judged = col.judged()
    assert judged.queries[query_key("drinks")] == "drinks" and judged.qrels[query_key("drinks")] == {
        "tea": 2,
        "coffee": 0,
    }
    assert len(judged.subset([query_key("rivers"), "q-unknown"])) == 1


def test_a_bad_row_stores_nothing_and_names_its_position(col):
    with pytest.raises(BadInputError, match=r"judgments\[2\]: grade must be one of"):
        col.import_judgments(
            [{"query": "a", "id": "tea"}, {"query": "b", "id": "coffee"}, {"query": "c", "id": "tea", "grade": 9}]
        )
    assert col.judgments() == []


def test_a_bad_file_line_stores_nothing_and_names_its_line(col, tmp_path):
    path = tmp_path / "judgments.jsonl"
    rows = [{"query": "a", "id": "tea"}, {"query": "b", "id": "coffee"}, {"query": "c", "grade": 1}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(BadInputError, match=r"judgments.jsonl:3: missing id"):
        col.import_judgments(path)
    assert col.judgments() == []


def test_import_a_file_names_unknown_ids_by_line_and_a_dry_run_writes_nothing(col, tmp_path):
    path = tmp_path / "judgments.jsonl"
    rows = [{"query": "a", "id": "tea"}, {"query": "a", "id": "nope"}, {"query": "b", "id": "coffee", "grade": 2}]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    dry = col.import_judgments(path, dry_run=True)
    assert dry.to_dict() == {
        "stored": 2,
        "replaced": 0,
        "unknown": [{"line": 2, "id": "nope"}],
        "queries": 2,
        "dry_run": True,
    }
    assert col.judgments() == []
    done = col.import_judgments(path, who="cli")
    assert (done.stored, done.replaced, done.unknown, done.dry_run) == (2, 0, [(2, "nope")], False)
    assert col.import_judgments(path).replaced == 2


def test_import_refuses_what_is_not_judgments(col):
    for source in ({"query": "a", "id": "tea"}, b"bytes", 3):
        with pytest.raises(BadInputError, match="a file path or a list of judgments"):
            col.import_judgments(source)
    with pytest.raises(BadInputError, match="queries names the query texts"):
        col.import_judgments([{"query": "a", "id": "tea"}], queries={"q1": "x"})


def test_remove_by_query_id_pair_and_everything(col):
    col.import_judgments([{"query": q, "id": d} for q in ("q1", "q2", "q3") for d in IDS])
    assert col.remove_judgments(" q1 ", doc_id="tea") == 1
    assert col.remove_judgments("q1") == 2
    assert col.remove_judgments(doc_id="coffee") == 2
    assert pairs(col.judgments(doc_id="rivers")) == [("q2", "rivers", 1), ("q3", "rivers", 1)]
    assert pairs(col.judgments("q3")) == [("q3", "rivers", 1), ("q3", "tea", 1)]
    with pytest.raises(BadInputError, match="name a query and/or an id"):
        col.remove_judgments()
    with pytest.raises(BadInputError, match="not both"):
        col.remove_judgments("q2", everything=True)
    assert col.remove_judgments(everything=True) == 4
    assert col.judgments() == [] and col.judgment_count() == (0, 0)


def test_deleted_documents_keep_their_judgments_and_check_notes_them(col):
    col.judge("drinks", "tea")
    col.judge("drinks", "coffee")
    assert col.check().notes == []
    col.delete(["tea"])
    report = col.check()
    assert report.ok and len(report.notes) == 1 and report.notes[0].startswith("1 judgment(s) name documents")
    assert report.to_dict()["notes"] == report.notes
    assert pairs(col.judgments()) == [("drinks", "coffee", 1), ("drinks", "tea", 1)]
    with pytest.raises(BadInputError, match="holds no document 'tea'"):
        col.judge("drinks", "tea", 2)


def test_a_catalog_made_before_judgments_reads_empty_and_the_first_judgment_creates_the_table(col):
    root = col.root
    col.judge("q", "tea")
    with col.catalog.engine.begin() as conn:
        conn.execute(text("DROP TABLE semsearch_judgments"))
    col.close()
    with Collection.open(root) as reopened:
        assert reopened.judgments() == [] and reopened.judgment_count() == (0, 0) and len(reopened.judged()) == 0
        assert reopened.info()["judgments"] == {"judgments": 0, "queries": 0}
        assert reopened.check().ok
        reopened.judge("q", "coffee", 3)
        assert pairs(reopened.judgments()) == [("q", "coffee", 3)]


def test_snapshots_keep_judgments(tmp_path, tiny_embedder, catalog_url):
    vectors = np.random.default_rng(1).normal(size=(2, tiny_embedder.dim))
    with Collection.create(tmp_path / "col", tiny_embedder, catalog_url=catalog_url) as source:
        source.add([{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}], vectors=vectors)
        source.import_judgments([{"query": "first", "id": "a", "grade": 2}, {"query": "first", "id": "b", "grade": 0}])
        assert source.remove_judgments("first", doc_id="b") == 1
        source.judge("second", "b", 3, who="ann")
        expected = pairs(source.judgments())
        source.snapshot(tmp_path / "snap")
    with Collection.open(tmp_path / "snap") as copy:
        assert pairs(copy.judgments()) == expected == [("first", "a", 2), ("second", "b", 3)]
        assert copy.judgments("second")[0].who == "ann"


def test_a_catalog_made_before_judgments_snapshots_and_restores(tmp_path, tiny_embedder, catalog_url):
    vectors = np.random.default_rng(2).normal(size=(1, tiny_embedder.dim))
    with Collection.create(tmp_path / "col", tiny_embedder, catalog_url=catalog_url) as source:
        source.add([{"id": "a", "text": "alpha"}], vectors=vectors)
        with source.catalog.engine.begin() as conn:
            conn.execute(text("DROP TABLE semsearch_judgments"))  # as a catalog written before judgments was
        source.snapshot(tmp_path / "snap")
    with Collection.open(tmp_path / "snap") as copy:
        assert copy.judgments() == [] and len(copy) == 1
        copy.judge("q", "a", 1)
        assert [(j.query, j.doc_id) for j in copy.judgments()] == [("q", "a")]
