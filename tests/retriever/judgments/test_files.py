"""Judgment files written with the json and csv modules: JSON Lines, and a BEIR qrels TSV with its queries.jsonl."""

from __future__ import annotations

import csv
import json
import re

import pytest

from retriever.errors import BadInputError
from retriever.judgments.files import read_judgments, read_numbered_judgments, read_queries
from retriever.judgments.records import Judgment


def write_jsonl(path, records) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(("" if record is None else json.dumps(record)) + "\n")  # None: a blank line


def write_beir(folder, qrels, queries, header=True):
    """``qrels/test.tsv`` and ``queries.jsonl`` as BEIR writes them."""
    (folder / "qrels").mkdir()
    tsv = folder / "qrels" / "test.tsv"
    with tsv.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        if header:
            writer.writerow(["query-id", "corpus-id", "score"])
        writer.writerows(qrels)
    write_jsonl(folder / "queries.jsonl", [{"_id": qid, "text": text, "metadata": {}} for qid, text in queries])
    return tsv, folder / "queries.jsonl"


def test_jsonl_rows_with_default_grade_who_and_blank_lines(tmp_path):
    path = tmp_path / "judgments.jsonl"
    write_jsonl(
        path,
        [
            {"query": "  renew a passport ", "id": "passport.md", "grade": 2},
            None,
            {"query": "renew a passport", "id": "visa.md", "grade": 0, "who": "ann"},
            {"query": "opening hours", "id": "hours.md"},
        ],
    )
    rows = read_numbered_judgments(path, who="cli-user")
    assert [number for number, _ in rows] == [1, 3, 4]
    assert [j for _, j in rows] == [
        Judgment("renew a passport", "passport.md", 2, "cli-user"),
        Judgment("renew a passport", "visa.md", 0, "ann"),
        Judgment("opening hours", "hours.md", 1, "cli-user"),
    ]
    assert read_judgments(path, who="cli-user") == [j for _, j in rows]


@pytest.mark.parametrize(
    "bad, reason",
    [
        ({"id": "x", "grade": 1}, "missing query"),
        ({"query": "q", "grade": 1}, "missing id"),
        ({"query": "q", "id": "x", "grade": 4}, "grade must be one of"),
        ({"query": "q", "id": "x", "grade": True}, "grade must be one of"),
        ({"query": "q", "id": "x", "grade": "1"}, "grade must be one of"),
        ({"query": "   ", "id": "x"}, "query must not be empty"),
        ({"query": "q", "id": 7}, "id must be a string"),
        ({"query": "q" * 2001, "id": "x"}, "at most 2000"),
        ({"query": "q", "id": "x", "relevance": 1}, "unknown field"),
        (["q", "x", 1], "not an object"),
    ],
    ids=[
        "no-query",
        "no-id",
        "grade-4",
        "grade-bool",
        "grade-text",
        "empty-query",
        "id-number",
        "long",
        "extra",
        "list",
    ],
)
def test_a_bad_jsonl_row_names_file_and_line(tmp_path, bad, reason):
    path = tmp_path / "judgments.jsonl"
    write_jsonl(path, [{"query": "fine", "id": "a"}, None, bad])
    with pytest.raises(BadInputError) as caught:
        read_judgments(path)
    assert str(caught.value).startswith(f"{path}:3: ") and reason in str(caught.value)


def test_beir_qrels_with_queries_file(tmp_path):
    tsv, queries = write_beir(
        tmp_path, [("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d1", 2)], [("q1", "first query"), ("q2", "second")]
    )
    rows = read_numbered_judgments(tsv, queries, who="beir")
    assert [(n, j.query, j.doc_id, j.grade, j.who) for n, j in rows] == [
        (2, "first query", "d1", 1, "beir"),
        (3, "first query", "d2", 0, "beir"),
        (4, "second", "d1", 2, "beir"),
    ]
    mapping = {"q1": "first query", "q2": "second"}  # the query texts given as a mapping instead of a file
    assert read_judgments(tsv, mapping, who="beir") == [j for _, j in rows]


def test_beir_qrels_without_a_header(tmp_path):
    tsv, queries = write_beir(tmp_path, [("q1", "d1", 3)], [("q1", "only")], header=False)
    assert read_judgments(tsv, queries) == [Judgment("only", "d1", 3)]


@pytest.mark.parametrize(
    "row, reason",
    [
        (("q1", "d1", 5), "grade must be one of"),
        (("q1", "d1", -1), "grade must be one of"),
        (("q1", "d1", "high"), "not an integer"),
        (("q9", "d1", 1), "query id 'q9' is not in the queries file"),
        (("q1", "d1"), "expected 3 tab-separated fields"),
    ],
    ids=["grade-5", "negative", "text-score", "unknown-query", "two-fields"],
)
def test_a_bad_qrels_row_names_file_and_line(tmp_path, row, reason):
    tsv, queries = write_beir(tmp_path, [("q1", "d2", 1), row], [("q1", "query one")])
    with pytest.raises(BadInputError) as caught:
        read_judgments(tsv, queries)
    assert str(caught.value).startswith(f"{tsv}:3: ") and reason in str(caught.value)


def test_a_qrels_file_needs_its_queries(tmp_path):
    tsv, _ = write_beir(tmp_path, [("q1", "d1", 1)], [("q1", "x")])
    with pytest.raises(BadInputError, match="needs its queries file"):
        read_judgments(tsv)


def test_a_bad_queries_file_names_its_line(tmp_path):
    tsv, queries = write_beir(tmp_path, [("q1", "d1", 1)], [("q1", "x")])
    write_jsonl(queries, [{"_id": "q1", "text": "x"}, {"_id": "q2"}])
    with pytest.raises(BadInputError, match=re.escape(f"{queries}:2: not a BEIR query record")):
        read_queries(queries)


def test_empty_missing_and_non_utf8_files_are_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(BadInputError, match="holds no judgments"):
        read_judgments(empty)
    with pytest.raises(BadInputError, match="cannot read"):
        read_judgments(tmp_path / "missing.jsonl")
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(
        (
            json.dumps({"query": "a", "id": "x"})
            + "\n"
            + json.dumps({"query": "café", "id": "y"}, ensure_ascii=False)
            + "\n"
        ).encode("latin-1")
    )
    with pytest.raises(BadInputError, match=r"latin.jsonl:2: not UTF-8"):
        read_judgments(latin)


def test_a_byte_order_mark_is_allowed(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_text(json.dumps({"query": "q", "id": "x", "grade": 2}) + "\n", encoding="utf-8-sig")
    assert read_judgments(path) == [Judgment("q", "x", 2)]
