"""Examples files: JSONL and CSV read into checked examples, every bad record an error naming its line."""

from __future__ import annotations

import json

import pytest

from retriever.errors import BadInputError
from retriever.tagging.examples import Example, check_examples, read_examples


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_ids_and_free_text(tmp_path):
    path = write_jsonl(
        tmp_path / "ex.jsonl",
        [
            {"id": "a", "label": "x"},
            {"text": "free text", "title": "T", "label": "y"},
            {"id": "a", "label": "x"},  # the same pair again counts once
        ],
    )
    assert read_examples(path) == [
        Example("x", doc_id="a", where="ex.jsonl:1"),
        Example("y", text="free text", title="T", where="ex.jsonl:2"),
    ]


def test_csv_with_header_and_integer_labels_in_jsonl(tmp_path):
    csv_path = tmp_path / "ex.csv"
    csv_path.write_text('label,id,text\ngood,d1,\nbad,,"broken, and late"\n\n', encoding="utf-8")
    assert [(e.label, e.doc_id, e.text) for e in read_examples(csv_path)] == [
        ("good", "d1", None),
        ("bad", None, "broken, and late"),
    ]
    path = write_jsonl(tmp_path / "ints.jsonl", [{"id": "a", "label": 0}, {"id": "b", "label": 1}])
    assert [e.label for e in read_examples(path)] == [0, 1]


@pytest.mark.parametrize(
    "records, message",
    [
        ([{"id": "a", "text": "t", "label": "x"}], "not both"),
        ([{"label": "x"}], "not neither"),
        ([{"id": "a"}], "label must be a string or an integer, got missing"),
        ([{"id": "a", "label": 1.5}], "got a float"),
        ([{"id": "a", "label": True}], "got a bool"),
        ([{"id": "a", "label": " "}], "label is empty"),
        ([{"text": "  ", "label": "x"}], "text is empty"),
        ([{"id": "a", "label": "x", "lable": "y"}], "unknown field"),
        ([{"id": "a", "label": "x"}, {"id": "b", "label": "x"}], "at least two labels"),
        ([{"id": "a", "label": "x"}, {"id": "b", "label": 2}], "mix strings and integers"),
        ([{"id": "a", "label": "x"}, {"id": "a", "label": "y"}], "labelled 'y' here and 'x' at ex.jsonl:1"),
        ([{"id": "a\nb", "label": "x"}, {"id": "b", "label": "y"}], "control character"),
    ],
    ids=[
        "both",
        "neither",
        "no-label",
        "float-label",
        "bool-label",
        "blank-label",
        "blank-text",
        "typo",
        "one-label",
        "mixed-types",
        "conflict",
        "bad-id",
    ],
)
def test_bad_records_name_their_line(tmp_path, records, message):
    with pytest.raises(BadInputError, match=message) as caught:
        read_examples(write_jsonl(tmp_path / "ex.jsonl", records))
    assert "ex.jsonl:" in str(caught.value) or "labels" in str(caught.value)


def test_bad_files(tmp_path):
    with pytest.raises(BadInputError, match="does not exist"):
        read_examples(tmp_path / "missing.jsonl")
    (tmp_path / "ex.txt").write_text("label\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="expected .jsonl or .csv"):
        read_examples(tmp_path / "ex.txt")
    (tmp_path / "latin.csv").write_bytes("label,text\ncaf\xe9,x\n".encode("latin-1"))
    with pytest.raises(BadInputError, match="not UTF-8"):
        read_examples(tmp_path / "latin.csv")
    (tmp_path / "nohead.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="header row must name 'label'"):
        read_examples(tmp_path / "nohead.csv")
    (tmp_path / "ragged.csv").write_text("label,id\nx,a,extra\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="ragged.csv:2: 3 fields"):
        read_examples(tmp_path / "ragged.csv")
    (tmp_path / "broken.jsonl").write_text('{"id": "a", "label": "x"}\n[1]\n', encoding="utf-8")
    with pytest.raises(BadInputError, match="broken.jsonl:2"):
        read_examples(tmp_path / "broken.jsonl")


def test_records_from_python():
    examples = check_examples([{"id": "a", "label": "x"}, Example("y", text="t")])
    assert [e.label for e in examples] == ["x", "y"]
    with pytest.raises(BadInputError, match="no examples"):
        check_examples([])
    with pytest.raises(BadInputError, match="must be a mapping"):
        check_examples(["a"])
