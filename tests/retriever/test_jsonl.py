"""Strict JSON Lines reading: every bad line is named by file and line number."""

from __future__ import annotations

import pytest

from retriever.errors import BadInputError
from retriever.jsonl import read_jsonl


def test_objects_come_with_line_numbers_skipping_blank_lines_and_a_bom(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}\n\n   \n{"b": "x"}\n')  # starts with a byte-order mark
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (4, {"b": "x"})]


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"a": ', r"invalid JSON: Expecting value \(column 7\)"),
        ("[1, 2]", "record is an array, not an object"),
        ('"text"', "record is a string, not an object"),
        ("[" * 100_000 + "]" * 100_000, "invalid JSON: nested too deeply"),
    ],
)
def test_a_bad_line_names_file_line_and_cause(tmp_path, line, reason):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"ok": true}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=rf"bad\.jsonl:2: not a query record \({reason}"):
        list(read_jsonl(path, "a query record"))


def test_wrong_encoding_and_missing_files_are_named(tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"a": 1}\n{"text": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(BadInputError, match=r"latin\.jsonl:2: not UTF-8 text"):
        list(read_jsonl(latin))
    with pytest.raises(BadInputError, match=r"missing\.jsonl: cannot read"):
        list(read_jsonl(tmp_path / "missing.jsonl"))
