"""``semsearch tag`` on a real collection: train and tag, evaluate, dry-run, stale, list, and its errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli import main
from retriever import Collection


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def tagged_setup(tmp_path, tiny_embedder):
    """A collection of 16 documents around two directions, and an examples file naming three of each."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(scale=0.3, size=(16, tiny_embedder.dim))
    vectors[:8, 0] += 2.0
    vectors[8:, 1] += 2.0
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder) as col:
        col.add([{"id": f"d{i}", "text": f"document {i}"} for i in range(16)], vectors=vectors)
    examples = tmp_path / "examples.csv"
    examples.write_text(
        "id,label\n" + "".join(f"d{i},{'a' if i < 8 else 'b'}\n" for i in (0, 1, 2, 8, 9, 10)), encoding="utf-8"
    )
    return path, examples


def test_evaluate_tag_and_filter(capsys, tagged_setup):
    col, examples = tagged_setup
    code, out, _ = run(capsys, "tag", "-c", col, "--field", "group", "--examples", examples, "--evaluate")
    assert code == 0 and "3-fold stratified cross-validation" in out and "tag would use:" in out
    assert "embedding" in out and "tfidf" in out

    code, out, _ = run(capsys, "tag", "-c", col, "--field", "group", "--examples", examples, "--dry-run", "--json")
    report = json.loads(out)
    assert code == 0 and report["dry_run"] and report["written"] == 0 and sum(report["labels"].values()) == 16

    code, out, _ = run(
        capsys, "tag", "-c", col, "--field", "group", "--examples", examples, "--method", "embedding", "-q"
    )
    assert code == 0 and "a: 8" in out and "b: 8" in out and "wrote 'group'" in out
    code, out, _ = run(capsys, "search", "document", "-c", col, "--where", '{"group": "b"}', "-k", "20", "--json")
    assert sorted(hit["id"] for hit in json.loads(out)) == sorted(f"d{i}" for i in range(8, 16))

    code, out, err = run(capsys, "tag", "-c", col, "--field", "group", "--stale")
    assert code == 0 and out == "" and "0 document(s)" in err
    code, out, _ = run(capsys, "tag", "-c", col, "--list", "--json")
    assert json.loads(out)["group"]["labels"] == ["a", "b"]
    code, out, _ = run(capsys, "info", "-c", col)
    assert "taggers  group (embedding: a, b)" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--field", "g"], "--examples FILE is required"),
        ([], "--field is required"),
        (["--field", "g", "--stale"], "no tagger for field 'g'"),
        (["--field", "g", "--examples", "missing.csv"], "does not exist"),
        (["--field", "g", "--examples", "EXAMPLES", "--min-probability", "2"], "min_probability"),
        (["--field", "g", "--examples", "EXAMPLES", "--stale", "--dry-run"], "not allowed with"),
    ],
    ids=["no-examples", "no-field", "no-tagger", "missing-file", "bad-probability", "two-actions"],
)
def test_usage_errors_exit_2_with_one_line(capsys, tagged_setup, argv, message):
    col, examples = tagged_setup
    argv = [str(examples) if a == "EXAMPLES" else a for a in argv]
    code, _, err = run(capsys, "tag", "-c", col, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
