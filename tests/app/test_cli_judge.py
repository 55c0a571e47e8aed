"""``semsearch judge add|import|list|remove`` on a real collection, and its errors (one line, exit 2)."""

from __future__ import annotations

import csv
import getpass
import json

import numpy as np
import pytest

from app.cli import main
from retriever import Collection

IDS = ("tea", "coffee", "rivers")


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def col(tmp_path, tiny_embedder):
    """A collection of three documents (vectors given: nothing to embed)."""
    path = tmp_path / "col"
    vectors = np.random.default_rng(0).normal(size=(len(IDS), tiny_embedder.dim))
    with Collection.create(path, tiny_embedder) as collection:
        collection.add([{"id": doc_id, "text": f"all about {doc_id}"} for doc_id in IDS], vectors=vectors)
    return path


def listed(capsys, col, *argv) -> list[dict]:
    code, out, _ = run(capsys, "judge", "list", "-c", col, "--json", *argv)
    assert code == 0
    return json.loads(out)["judgments"]


def test_add_list_and_remove(capsys, col):
    code, out, err = run(capsys, "judge", "add", "green tea", "tea", "-c", col, "--grade", "2", "--who", "ann")
    assert code == 0 and out == "" and "grade 2" in err
    code, out, _ = run(capsys, "judge", "add", "green tea", "coffee", "-c", col, "--grade", "0", "--json")
    assert code == 0 and json.loads(out)["grade"] == 0
    found = listed(capsys, col)
    assert [(j["id"], j["grade"], j["who"]) for j in found] == [("coffee", 0, getpass.getuser()), ("tea", 2, "ann")]
    code, out, err = run(capsys, "judge", "list", "-c", col, "--id", "tea")
    assert code == 0 and out.split("\t")[:3] == ["2", "tea", "green tea"] and "1 judgment(s)" in err

    code, _, err = run(capsys, "judge", "remove", "-c", col, "--query", "green tea", "--id", "coffee")
    assert code == 0 and "removed 1 judgment(s)" in err
    code, out, _ = run(capsys, "judge", "remove", "-c", col, "--all", "--json")
    assert code == 0 and json.loads(out) == {"removed": 1}
    assert listed(capsys, col) == []


def test_import_jsonl_reports_unknown_ids_with_their_lines(capsys, col, tmp_path):
    path = tmp_path / "judgments.jsonl"
    rows = [
        {"query": "drinks", "id": "tea", "grade": 3},
        {"query": "drinks", "id": "beer"},
        {"query": "x", "id": "rivers"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    code, out, err = run(capsys, "judge", "import", path, "-c", col, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["stored"] == 2 and "dry run" in err
    assert listed(capsys, col) == []
    code, out, err = run(capsys, "judge", "import", path, "-c", col, "--who", "bulk")
    assert code == 0 and "1 judgment(s) name no document" in err and "line 2: 'beer'" in err
    assert "stored 2 new judgment(s), replaced 0, over 2 queries" in err
    assert sorted((j["query"], j["id"], j["who"]) for j in listed(capsys, col)) == [
        ("drinks", "tea", "bulk"),
        ("x", "rivers", "bulk"),
    ]


def test_import_beir_qrels_with_queries(capsys, col, tmp_path):
    qrels = tmp_path / "test.tsv"
    with qrels.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerows(
            [["query-id", "corpus-id", "score"], ["q1", "tea", 1], ["q1", "coffee", 2], ["q2", "rivers", 1]]
        )
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "".join(json.dumps({"_id": qid, "text": t}) + "\n" for qid, t in [("q1", "hot drinks"), ("q2", "water")]),
        encoding="utf-8",
    )
    code, out, _ = run(capsys, "judge", "import", qrels, "--queries", queries, "-c", col, "--json")
    assert code == 0 and json.loads(out) == {"stored": 3, "replaced": 0, "unknown": [], "queries": 2, "dry_run": False}
    assert {(j["query"], j["id"], j["grade"]) for j in listed(capsys, col, "--query", "hot drinks")} == {
        ("hot drinks", "tea", 1),
        ("hot drinks", "coffee", 2),
    }


def test_an_import_storing_nothing_exits_1(capsys, col, tmp_path):
    path = tmp_path / "judgments.jsonl"
    path.write_text(json.dumps({"query": "q", "id": "nothing"}) + "\n", encoding="utf-8")
    code, _, err = run(capsys, "judge", "import", path, "-c", col)
    assert code == 1 and "stored 0 new" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["add", "q", "missing-doc"], "holds no document 'missing-doc'"),
        (["add", "q", "tea", "--grade", "5"], "invalid choice"),
        (["import", "BAD"], "bad.jsonl:2: grade must be one of"),
        (["import", "TSV"], "needs its queries file"),
        (["remove"], "--query and/or --id, or --all"),
        (["remove", "--all", "--id", "tea"], "--query and/or --id, or --all"),
        (["list", "--query", "  "], "query must not be empty"),
    ],
    ids=["unknown-id", "grade-choice", "bad-row", "tsv-without-queries", "remove-nothing", "remove-both", "empty-q"],
)
def test_errors_exit_2_with_one_line(capsys, col, tmp_path, argv, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"query": "a", "id": "tea"}) + "\n" + json.dumps({"query": "b", "id": "tea", "grade": 7}) + "\n",
        encoding="utf-8",
    )
    tsv = tmp_path / "qrels.tsv"
    with tsv.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle, delimiter="\t", lineterminator="\n").writerow(["q1", "tea", 1])
    argv = [str(bad) if a == "BAD" else str(tsv) if a == "TSV" else a for a in argv]
    code, _, err = run(capsys, "judge", *argv[:1], "-c", col, *argv[1:])
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert listed(capsys, col) == []
