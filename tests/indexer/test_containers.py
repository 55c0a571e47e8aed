"""Compressed files and archives: read inside, member by member, and refused when hostile.

Archives are made with the real tools (gzip, tar, zip and Python's zipfile and
tarfile writing real archives of real text); the assertions are on what came
out and on the cause of each refusal, not on exact wording.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

from indexer.loaders import LoadError, containers, load_path
from retriever.documents import Document

TEA = "Green tea is steamed right after picking, which keeps its leaves green.\n"
RIVERS = "# Rivers\n\nRivers flow into the sea through deltas.\n"


def load(path: Path, **kwargs) -> list[Document | LoadError]:
    return list(load_path(path, **kwargs))


def tree(root: Path) -> Path:
    """A small folder of real text: ``tea.txt``, ``notes/rivers.md``, ``data/records.jsonl``."""
    (root / "notes").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "tea.txt").write_text(TEA, encoding="utf-8")
    (root / "notes" / "rivers.md").write_text(RIVERS, encoding="utf-8")
    records = [
        {"id": "r1", "title": "Coffee", "text": "Coffee beans are roasted."},
        {"id": "r2", "title": "Kaffee", "text": "Kaffee wird geröstet."},
    ]
    (root / "data" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return root


def run(*argv: str | Path, cwd: Path) -> None:
    subprocess.run([str(a) for a in argv], cwd=cwd, check=True, capture_output=True)


# --- compressed files ---------------------------------------------------------------


def test_a_gzipped_readme_is_read_as_text(tmp_path):
    (tmp_path / "README").write_text(TEA, encoding="utf-8")
    run("gzip", "README", cwd=tmp_path)
    (doc,) = load(tmp_path / "README.gz")
    source = str((tmp_path / "README.gz").resolve())
    assert (doc.id, doc.text, doc.title) == (source, TEA, "README")
    assert doc.metadata["source"] == source and doc.metadata["compression"] == "gzip"


@pytest.mark.parametrize("tool, suffix", [("bzip2", ".bz2"), ("xz", ".xz")])
def test_bzip2_and_xz_markdown_is_read_inside(tmp_path, tool, suffix):
    (tmp_path / "rivers.md").write_text(RIVERS, encoding="utf-8")
    run(tool, "rivers.md", cwd=tmp_path)
    (doc,) = load(tmp_path / f"rivers.md{suffix}")
    assert doc.title == "Rivers" and doc.metadata["format"] == "md" and doc.text == RIVERS


def test_a_gzipped_jsonl_gives_its_records(tmp_path):
    tree(tmp_path / "t")
    target = tmp_path / "records.jsonl"
    shutil.copy(tmp_path / "t" / "data" / "records.jsonl", target)
    run("gzip", target.name, cwd=tmp_path)
    docs = load(tmp_path / "records.jsonl.gz")
    assert [doc.id for doc in docs] == ["r1", "r2"]
    assert all(doc.metadata["source"] == str((tmp_path / "records.jsonl.gz").resolve()) for doc in docs)


def test_a_truncated_gzip_is_reported_as_truncated(tmp_path):
    (tmp_path / "long.txt").write_text(TEA * 2000, encoding="utf-8")
    run("gzip", "long.txt", cwd=tmp_path)
    path = tmp_path / "long.txt.gz"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    (error,) = load(path)
    assert isinstance(error, LoadError) and not error.unread
    assert "truncated" in error.reason


def test_a_gzip_whose_trailer_lies_is_stopped_while_it_streams(tmp_path):
    path = tmp_path / "zeros.txt.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"0" * (8 * 1024 * 1024))  # 8 MB of one digit: a few KB compressed
    data = bytearray(path.read_bytes())
    data[-4:] = (100).to_bytes(4, "little")  # the trailer declares 100 bytes
    path.write_bytes(bytes(data))
    (error,) = load(path)
    assert isinstance(error, LoadError)
    assert "expands over" in error.reason and str(containers.MAX_RATIO) in error.reason


def test_a_gzip_expanding_past_the_size_limit_is_stopped_as_it_streams(tmp_path):
    (tmp_path / "big.txt").write_text("".join(f"line {i} of a long file\n" for i in range(100_000)))  # 2.5 MB
    run("gzip", "big.txt", cwd=tmp_path)
    (error,) = load(tmp_path / "big.txt.gz", max_bytes=1024 * 1024)
    assert error.reason.startswith("expands past") and "limit" in error.reason


def test_gzip_inside_gzip_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text(TEA, encoding="utf-8")
    run("gzip", "notes.txt", cwd=tmp_path)
    twice = tmp_path / "notes.txt.gz.gz"
    twice.write_bytes(gzip.compress((tmp_path / "notes.txt.gz").read_bytes()))
    (error,) = load(twice)
    assert "compressed file" in error.reason


# --- archives -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, name",
    [("cf", "docs.tar"), ("czf", "docs.tar.gz"), ("cjf", "docs.tbz2"), ("cJf", "docs.tar.xz"), ("czf", "docs.tgz")],
)
def test_a_tar_gives_a_document_per_member_named_by_archive_and_member(tmp_path, flags, name):
    tree(tmp_path / "docs")
    run("tar", flags, name, "docs", cwd=tmp_path)
    archive = str((tmp_path / name).resolve())
    items = load(tmp_path / name)
    assert all(isinstance(item, Document) for item in items), items
    by_id = {item.id: item for item in items}
    tea = by_id[f"{archive}::docs/tea.txt"]
    assert tea.text == TEA and tea.metadata["archive"] == archive and tea.metadata["source"] == tea.id
    assert by_id[f"{archive}::docs/notes/rivers.md"].title == "Rivers"
    assert {"r1", "r2"} <= set(by_id)  # the records of a JSONL member keep their own ids
    assert by_id["r1"].metadata["source"] == f"{archive}::docs/data/records.jsonl"


def test_a_zip_gives_its_members_and_skips_its_folders(tmp_path):
    root = tree(tmp_path / "docs")
    run("zip", "-r", "docs.zip", "docs", cwd=tmp_path)
    archive = str((tmp_path / "docs.zip").resolve())
    items = load(tmp_path / "docs.zip")
    assert sorted(item.id for item in items) == sorted(
        [f"{archive}::docs/tea.txt", f"{archive}::docs/notes/rivers.md", "r1", "r2"]
    )
    assert all(item.metadata["archive"] == archive for item in items)
    assert root.is_dir()  # nothing was extracted next to the archive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "docs.zip"]


def test_members_are_taken_out_to_temporary_files_that_are_removed(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    tree(tmp_path / "docs")
    run("tar", "czf", "docs.tgz", "docs", cwd=tmp_path)
    items = load_path(tmp_path / "docs.tgz")
    first = next(items)
    assert isinstance(first, Document)
    assert len(list(scratch.iterdir())) == 1  # the member being read, alone
    rest = list(items)
    assert len(rest) == 3 and list(scratch.iterdir()) == []


def test_a_zip_bomb_is_refused_by_its_declared_sizes_before_extraction(tmp_path, monkeypatch):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("readme.txt", TEA)
        archive.writestr("zeros.txt", b"0" * (16 * 1024 * 1024))  # 16 MB in a few KB
    taken_out: list[str] = []
    real = containers._taken_out  # noqa: SLF001 - counted, not replaced: nothing of the bomb may reach it

    def counting(stream, name, limit, packed):
        taken_out.append(name)
        return real(stream, name, limit, packed)

    monkeypatch.setattr(containers, "_taken_out", counting)
    items = load(path)
    archive = str(path.resolve())
    bomb = next(item for item in items if isinstance(item, LoadError) and item.source == f"{archive}::zeros.txt")
    assert isinstance(bomb, LoadError) and "declares" in bomb.reason and str(containers.MAX_RATIO) in bomb.reason
    assert taken_out == ["readme.txt"]
    assert any(isinstance(item, Document) and item.text == TEA for item in items)


def test_an_archive_declaring_too_much_in_all_is_refused_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(containers, "MAX_EXPANDED_BYTES", 64 * 1024)
    tree(tmp_path / "docs")
    (tmp_path / "docs" / "long.txt").write_text(TEA * 2000, encoding="utf-8")  # about 140 KB
    run("zip", "-r", "docs.zip", "docs", cwd=tmp_path)
    run("tar", "czf", "docs.tgz", "docs", cwd=tmp_path)
    for name in ("docs.zip", "docs.tgz"):
        (error,) = load(tmp_path / name)
        assert error.source == str((tmp_path / name).resolve()) and "declares" in error.reason


def test_an_archive_with_too_many_members_is_refused_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(containers, "MAX_MEMBERS", 3)
    tree(tmp_path / "docs")
    (tmp_path / "docs" / "more.txt").write_text(TEA, encoding="utf-8")
    run("zip", "-r", "docs.zip", "docs", cwd=tmp_path)
    run("tar", "cf", "docs.tar", "docs", cwd=tmp_path)
    for name in ("docs.zip", "docs.tar"):
        (error,) = load(tmp_path / name)
        assert "members" in error.reason and "3" in error.reason


def test_one_archive_inside_another_is_read_and_a_third_level_is_refused(tmp_path):
    tree(tmp_path / "docs")
    run("tar", "czf", "inner.tgz", "docs", cwd=tmp_path)
    run("zip", "middle.zip", "inner.tgz", cwd=tmp_path)
    run("zip", "outer.zip", "middle.zip", cwd=tmp_path)
    middle = str((tmp_path / "middle.zip").resolve())
    items = load(tmp_path / "middle.zip")
    tea = next(item for item in items if item.id.endswith("docs/tea.txt"))
    assert tea.id == f"{middle}::inner.tgz::docs/tea.txt" and tea.metadata["archive"] == f"{middle}::inner.tgz"
    outer = str((tmp_path / "outer.zip").resolve())
    (error,) = load(tmp_path / "outer.zip")
    assert error.source == f"{outer}::middle.zip::inner.tgz" and "nest" in error.reason


def test_member_paths_that_escape_links_and_devices_are_refused_by_name(tmp_path):
    path = tmp_path / "hostile.tar"
    with tarfile.open(path, "w") as archive:
        for name, text in (("../escape.txt", "up"), ("/etc/absolute.txt", "root"), ("fine.txt", TEA)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("passwd.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(link)
        device = tarfile.TarInfo("null")
        device.type, device.devmajor, device.devminor = tarfile.CHRTYPE, 1, 3
        archive.addfile(device)
    source = str(path.resolve())
    reasons = {item.source: item.reason for item in load(path) if isinstance(item, LoadError)}
    assert "leaves the archive" in reasons[f"{source}::../escape.txt"]
    assert "leaves the archive" in reasons[f"{source}::/etc/absolute.txt"]
    assert "link" in reasons[f"{source}::passwd.txt"]
    assert "device" in reasons[f"{source}::null"]
    assert f"{source}::fine.txt" not in reasons


def test_zip_members_that_escape_are_refused(tmp_path):
    path = tmp_path / "escape.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("../../outside.txt", TEA)
        archive.writestr("inside.txt", TEA)
    items = load(path)
    assert [type(item).__name__ for item in items] == ["LoadError", "Document"]
    assert "leaves the archive" in items[0].reason and items[0].source.endswith("::../../outside.txt")


def test_an_encrypted_zip_member_needs_a_password(tmp_path):
    (tmp_path / "secret.txt").write_text(TEA, encoding="utf-8")
    run("zip", "-P", "hunter2", "locked.zip", "secret.txt", cwd=tmp_path)
    (error,) = load(tmp_path / "locked.zip")
    assert error.source.endswith("locked.zip::secret.txt") and "encrypted" in error.reason


def test_a_member_over_the_size_limit_is_refused_and_the_rest_read(tmp_path):
    tree(tmp_path / "docs")
    (tmp_path / "docs" / "long.txt").write_text("".join(f"line {i} of a long file\n" for i in range(20_000)))
    run("zip", "-r", "docs.zip", "docs", cwd=tmp_path)
    items = load(tmp_path / "docs.zip", max_bytes=100 * 1024)
    long = next(item for item in items if isinstance(item, LoadError) and item.source.endswith("::docs/long.txt"))
    assert isinstance(long, LoadError) and "limit" in long.reason
    assert sum(isinstance(item, Document) for item in items) == 4


def test_a_malformed_zip_is_one_error(tmp_path):
    tree(tmp_path / "docs")
    run("zip", "-r", "docs.zip", "docs", cwd=tmp_path)
    path = tmp_path / "docs.zip"
    path.write_bytes(path.read_bytes()[:200])  # the start of a zip, its directory gone
    (error,) = load(path)
    assert error.source == str(path.resolve()) and "zip" in error.reason.lower()


def test_hidden_and_unknown_members_are_passed_over_not_failed(tmp_path):
    path = tmp_path / "mixed.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("docs/.DS_Store", b"\x00\x00\x00\x01Bud1" + bytes(200))
        archive.write(shutil.which("true"), "bin/true")
        archive.writestr("docs/tea.txt", TEA)
    items = load(path)
    unread = {item.source.split("::")[1]: item.reason for item in items if isinstance(item, LoadError)}
    assert set(unread) == {"docs/.DS_Store", "bin/true"}
    assert all(item.unread for item in items if isinstance(item, LoadError))
    assert "binary" in unread["bin/true"]


def test_an_uploaded_archive_names_its_members_by_the_upload(tmp_path, tiny_model_dir):
    from indexer.uploads import index_uploads
    from retriever import Collection

    tree(tmp_path / "docs")
    run("zip", "-r", "docs.zip", "docs", cwd=tmp_path)
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        report = index_uploads(col, [("bundle.zip", (tmp_path / "docs.zip").read_bytes())])
        assert report.errors == [] and report.written == 4
        doc = col.get("bundle.zip::docs/tea.txt")
        assert doc.text == TEA and doc.metadata["source"] == doc.id and doc.metadata["archive"] == "bundle.zip"
        assert col.get("r1").metadata["source"] == "bundle.zip::docs/data/records.jsonl"
