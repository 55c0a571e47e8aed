"""Every file a run finds is read, failed with a reason, or passed over with a reason: counted by type.

A folder like a system's documentation tree (text with and without suffixes,
compressed text, compressed binaries, binaries, hidden names, an empty file)
is indexed; the report's groups must account for every file in it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from app.cli import main
from indexer.job import index_paths
from indexer.loaders import LoadError, walk
from indexer.loaders.report import file_type, group_errors
from retriever import Collection

TEXT = "Green tea is steamed right after picking, which keeps its leaves green.\n"


@pytest.fixture
def col(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as opened:
        yield opened


def doc_tree(root: Path) -> dict[str, int]:
    """A documentation tree; returns how many files of each kind it holds."""
    binary = shutil.which("true")
    for package in ("tea", "coffee", "cocoa"):
        folder = root / package
        folder.mkdir(parents=True)
        (folder / "copyright").write_text(f"{package}: {TEXT}", encoding="utf-8")
        (folder / "changelog").write_text(f"{package} 1.0: {TEXT}", encoding="utf-8")
        subprocess.run(["gzip", "changelog"], cwd=folder, check=True)
        shutil.copy(binary, folder / "helper")
        shutil.copy(binary, folder / "helper.bin")
        subprocess.run(["gzip", "helper.bin"], cwd=folder, check=True)
    (root / "tea" / "README.md").write_text("# Tea\n\n" + TEXT, encoding="utf-8")
    (root / "tea" / "empty.txt").write_bytes(b"")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    (root / "tea" / ".hidden.txt").write_text(TEXT, encoding="utf-8")
    return {"read": 3 + 3 + 1, "binary": 3, "compressed binary": 3, "empty": 1, "hidden": 2}


def test_a_walk_yields_every_regular_file_and_counts_the_hidden(tmp_path):
    counts = doc_tree(tmp_path / "doc")
    unread: list[LoadError] = []
    found = [path for _, path in walk([tmp_path / "doc"], unread=unread)]
    assert len(found) == counts["read"] + counts["binary"] + counts["compressed binary"] + counts["empty"]
    assert len(unread) == counts["hidden"] and all(error.unread for error in unread)


def test_the_report_accounts_for_every_file_by_type_and_reason(col, tmp_path):
    counts = doc_tree(tmp_path / "doc")
    report = index_paths(col, [tmp_path / "doc"], progress=False)
    assert report.skipped == []  # nothing failed: what was not read is no fault of the files
    assert report.files == counts["read"] and report.indexed == counts["read"]
    assert len(report.not_read) == counts["binary"] + counts["compressed binary"] + counts["empty"] + counts["hidden"]
    groups = {(group.type, group.reason.split(" (")[0]): group for group in group_errors(report.not_read)}
    assert groups[("(no suffix)", "binary")].count == counts["binary"]
    assert groups[(".gz", "compressed, nothing inside to read")].count == counts["compressed binary"]
    assert groups[("hidden", "hidden, not walked")].count == counts["hidden"]
    assert groups[(".txt", "empty file")].count == counts["empty"]
    for group in groups.values():
        assert Path(group.example).name  # each group shows one of its files
    summary = report.summary()
    assert "not read 9" in summary
    assert f"{counts['compressed binary']} .gz: compressed, nothing inside to read" in summary


def test_the_index_command_prints_and_returns_the_grouped_report(capsys, tmp_path, tiny_model_dir):
    counts = doc_tree(tmp_path / "doc")
    code = main(
        [
            "index",
            str(tmp_path / "doc"),
            "-c",
            str(tmp_path / "col"),
            "--model",
            str(tiny_model_dir),
            "--quiet",
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0  # files passed over for what they are do not fail the run
    report = json.loads(out)
    assert report["added"] == counts["read"] and report["skipped"] == []
    not_read = {(group["type"], group["reason"].split(" (")[0]): group for group in report["not_read"]}
    assert not_read[("(no suffix)", "binary")]["count"] == counts["binary"]
    assert sum(group["count"] for group in report["not_read"]) == 9
    assert all(set(group) == {"type", "reason", "count", "example"} for group in report["not_read"])
    assert "nothing inside to read" in err and "hidden" in err


def test_a_failed_file_still_fails_the_command(capsys, tmp_path, tiny_model_dir):
    doc_tree(tmp_path / "doc")
    (tmp_path / "doc" / "broken.jsonl").write_text('{"id": "a", "text": "fine"}\n{not json\n', encoding="utf-8")
    code = main(
        [
            "index",
            str(tmp_path / "doc"),
            "-c",
            str(tmp_path / "col"),
            "--model",
            str(tiny_model_dir),
            "--quiet",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 2
    assert [group["type"] for group in report["skipped_by_type"]] == [".jsonl"]
    assert report["skipped_by_type"][0]["example"].endswith("broken.jsonl:2")


def test_prune_spares_files_it_could_not_read_and_members_of_a_failed_archive(col, tmp_path):
    root = tmp_path / "docs"
    (root / "inner").mkdir(parents=True)
    (root / "inner" / "a.txt").write_text(TEXT, encoding="utf-8")
    (root / "inner" / "b.txt").write_text("Rivers flow into the sea.\n", encoding="utf-8")
    subprocess.run(["zip", "-r", "../bundle.zip", "."], cwd=root / "inner", check=True, capture_output=True)
    shutil.rmtree(root / "inner")
    index_paths(col, [root], progress=False)
    archive = str((root / "bundle.zip").resolve())
    assert sorted(col.ids()) == [f"{archive}::a.txt", f"{archive}::b.txt"]
    (root / "bundle.zip").write_bytes((root / "bundle.zip").read_bytes()[:100])  # damaged: nothing can be read
    report = index_paths(col, [root], prune=True, progress=False)
    assert len(report.skipped) == 1 and report.written.deleted == []
    (root / "bundle.zip").unlink()
    report = index_paths(col, [root], prune=True, progress=False)
    assert len(report.written.deleted) == 2


@pytest.mark.parametrize(
    "source, kind",
    [
        ("/d/changelog.Debian.gz", ".gz"),
        ("/d/README", "(no suffix)"),
        ("/d/a.jsonl:12", ".jsonl"),
        ("/d/a.zip::x/y.PNG", ".png"),
        ("/d/.git", "hidden"),
        ("/d/a.zip::docs/.DS_Store", "hidden"),
    ],
)
def test_file_types_are_the_suffix_of_what_the_source_names(source, kind):
    assert file_type(source) == kind
