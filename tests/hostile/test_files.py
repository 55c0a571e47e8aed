"""Generated folders of files: the indexer reports each bad file or record and indexes the rest."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import warnings
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.job import index_paths
from indexer.loaders import SUPPORTED_SUFFIXES, LoadError, load_path, shown_path
from tests.hostile.conftest import case, examples
from tests.hostile.strategies import (
    case_colliding_folders,
    hostile_text,
    json_like,
    nested,
    pathological_markdown,
    symlinked_trees,
)

SUFFIXES = [".txt", ".md", ".jsonl", ".csv", ".html", ".htm", ".pdf", ".TXT"]
names = st.binary(min_size=1, max_size=10).filter(
    lambda b: b"/" not in b and b"\x00" not in b and not b.startswith(b".")
)
record = st.fixed_dictionaries(
    {"id": st.one_of(hostile_text, json_like), "text": st.one_of(hostile_text, st.just("plain words"), json_like)},
    optional={"title": st.one_of(hostile_text, json_like), "meta": st.one_of(json_like, nested(60))},
)
jsonl_line = st.one_of(
    record.map(lambda r: json.dumps(r, ensure_ascii=True).encode()),
    st.binary(max_size=40),
    st.integers(1, 3000).map(lambda n: b'{"id": "deep", "text": "x", "m": ' + b"[" * n + b"]" * n + b"}"),
)
contents = st.one_of(
    st.lists(jsonl_line, max_size=5).map(lambda lines: b"\n".join(lines)),
    st.binary(max_size=200),
    hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"",
            b"\xef\xbb\xbf",
            b"%PDF-1.4 broken",
            b"<html><title>\xff</title>x</html>",
            b"id,text\n1,hello\n2\n3,\xff\xfe",
            "Grüße aus Köln".encode("latin-1"),
        ]
    ),
)
folders = st.lists(
    st.tuples(names, st.sampled_from(SUFFIXES), contents),
    min_size=1,
    max_size=5,
    unique_by=lambda f: f[0].lower() + f[1].lower().encode(),
)


@settings(max_examples=examples(40))
@given(folder=folders)
def test_every_file_is_indexed_or_reported_and_the_run_goes_on(col, folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("in")
    written = set()
    for name, suffix, data in folder:
        path = os.path.join(os.fsencode(root), name + suffix.encode())
        with open(path, "wb") as handle:
            handle.write(data)
        written.add(path)
    with case("files"):
        before = len(col)
        report = index_paths(col, [root], progress=False)
        passed_over = {error.source for error in report.not_read if "::" not in error.source}
        assert report.files + len(passed_over) == len(written)  # each file read, or passed over for what it is
        report.summary().encode("utf-8")  # printable as is
        json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")
        assert len(col) == before + len(report.written.added)
        accounted = {_file_of(error.source) for error in report.skipped + report.not_read}
        w = report.written
        accounted |= {col.get(doc_id).metadata.get("source") for doc_id in w.added + w.updated + w.unchanged}
        for path in written:  # each file gave documents or is named with its reason
            assert shown_path(os.path.realpath(path)) in accounted, (path, report.summary())


def _file_of(source: str) -> str:
    source = source.split("::")[0]  # an archive member's file is its archive
    head, _, tail = source.rpartition(":")
    return head if head and tail.isdigit() else source


def _make_tree(base, plan):
    """Lay out ``symlinked_trees``'s plan under ``base``: ``(root, links made as (path, kind))``."""
    root, outside = base / "root", base / "outside"
    (outside / "outdir").mkdir(parents=True)
    for name in ("k.txt", "s.md"):
        (outside / name).write_text(f"outside secret {name}", encoding="utf-8")
        (outside / "outdir" / name).write_text(f"outside folder {name}", encoding="utf-8")
    files, links = plan
    for rel, text in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    made = []
    for rel, (kind, arg) in links:
        link = root / rel
        if any(p.is_symlink() for p in [link, *link.parents]) or link.exists():
            continue
        target = {
            "in": lambda: root / files[arg % len(files)][0],
            "out": lambda: outside / arg,
            "outdir": lambda: outside / "outdir",
            "dangling": lambda: outside / ("gone-" + arg),
            "self": lambda: link.parent,
        }[kind]()
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=target.is_dir())
        made.append((link, kind))
    return root, made


@settings(max_examples=examples(15))
@given(plan=symlinked_trees())
def test_links_never_bring_in_files_from_outside_the_root(col, plan, tmp_path_factory):
    root, links = _make_tree(tmp_path_factory.mktemp("links"), plan)
    top = os.path.realpath(root) + "/"
    with case("symlinked trees"):
        report = index_paths(col, [root], progress=False)
        w = report.written
        for doc_id in w.added + w.updated + w.unchanged:
            assert col.get(doc_id).metadata["source"].startswith(top), (doc_id, report.summary())
        reported = {error.source for error in report.skipped}
        for link, kind in links:
            leaves = kind == "outdir" or (kind in ("out", "dangling") and link.suffix.lower() in SUPPORTED_SUFFIXES)
            assert not leaves or shown_path(link) in reported, (link, report.summary())
        again = index_paths(col, [root], prune=True, progress=False)
        assert again.written.deleted == [], again.summary()


@settings(max_examples=examples(8))
@given(names=case_colliding_folders())
def test_prune_of_one_folder_never_touches_its_case_twins(col, names, tmp_path_factory):
    base = tmp_path_factory.mktemp("cases")
    for i, name in enumerate(names):
        (base / name).mkdir()
        (base / name / "f.txt").write_text(f"folder {i} {name}", encoding="utf-8")
    with case("case-colliding folders"):
        index_paths(col, [base], progress=False)
        for name in names:
            assert index_paths(col, [base / name], prune=True, progress=False).written.deleted == []
        gone = base / names[0] / "f.txt"
        gone_id = os.path.realpath(gone)
        gone.unlink()
        report = index_paths(col, [base / names[0]], prune=True, progress=False)
        assert report.written.deleted == [gone_id], report.summary()
        for name in names[1:]:
            assert os.path.realpath(base / name / "f.txt") in col.ids()


@settings(max_examples=examples(30))
@given(text=pathological_markdown())
def test_pathological_markdown_loads_with_a_trimmed_title(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("md") / "doc.md"
    path.write_text(text, encoding="utf-8")
    with case("pathological markdown"):
        (item,) = load_path(path)
    if isinstance(item, LoadError):
        assert item.reason == "empty document" or (item.unread and item.reason == "empty file" and not text), item
        return
    assert item.title == "doc" or any(item.title in line for line in text.splitlines()), item.title
    assert item.title == item.title.strip(" \t") and item.title.strip(), repr(item.title)


# Hostile archives and compressed files, made by the real tools: each case is one file in a folder of its own,
# indexed by the batch job, which must finish, take nothing out past the limits, leave no temporary file behind,
# and name every member it did not read.

_TEXT = "Green tea is steamed right after picking.\n"


def _zip_bomb(folder):
    with zipfile.ZipFile(folder / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(3):  # the same 40 MB of one byte, three times over: a few KB on disk
            archive.writestr(f"layer{i}.txt", b"0" * (40 * 1024 * 1024))
        archive.writestr("readme.txt", _TEXT)
    return {"refused": 3, "read": 1}


def _lying_gzip(folder):
    data = bytearray(gzip.compress(b"1" * (30 * 1024 * 1024)))
    data[-4:] = (512).to_bytes(4, "little")  # the trailer claims 512 bytes inside
    (folder / "notes.txt.gz").write_bytes(bytes(data))
    return {"refused": 1, "read": 0}


def _truncated_gzip(folder):
    whole = gzip.compress((_TEXT * 5000).encode())
    (folder / "cut.log.gz").write_bytes(whole[: len(whole) // 2])
    return {"refused": 1, "read": 0}


def _lying_names(folder):
    with zipfile.ZipFile(folder / "report.pdf", "w") as archive:  # a zip that calls itself a PDF
        archive.writestr("inside.txt", _TEXT)
    (folder / "photo.png").write_text(_TEXT, encoding="utf-8")  # text that calls itself an image
    return {"refused": 0, "read": 2}


def _nested(folder):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as archive:
        archive.writestr("deepest.txt", _TEXT)
    for level in ("level2.zip", "level1.zip", "outer.zip"):
        wrapped = io.BytesIO()
        with zipfile.ZipFile(wrapped, "w") as archive:
            archive.writestr(level.replace(".zip", ".txt"), _TEXT)
            archive.writestr(f"in-{level}", inner.getvalue())
        inner = wrapped
    (folder / "outer.zip").write_bytes(inner.getvalue())
    # outer.zip holds outer.txt and in-outer.zip (level1.txt and in-level1.zip, which holds level2.txt and more):
    # the archive and the one inside it are read; in-level1.zip, a third level, is refused whole.
    return {"refused": 1, "read": 2}


def _escaping_tar(folder):
    with tarfile.open(folder / "escape.tar.gz", "w:gz") as archive:
        for name in ("../../etc/cron.d/evil", "/etc/passwd", "fine.txt"):
            data = _TEXT.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("shadow.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
        archive.addfile(link)
    return {"refused": 3, "read": 1}


def _encrypted_zip(folder):
    (folder / "secret.txt").write_text(_TEXT, encoding="utf-8")
    subprocess.run(["zip", "-P", "pw", "locked.zip", "secret.txt"], cwd=folder, check=True, capture_output=True)
    (folder / "secret.txt").unlink()
    return {"refused": 1, "read": 0}


ARCHIVE_CASES = [_zip_bomb, _lying_gzip, _truncated_gzip, _lying_names, _nested, _escaping_tar, _encrypted_zip]


@pytest.mark.parametrize("make", ARCHIVE_CASES, ids=lambda make: make.__name__.strip("_"))
def test_hostile_archives_are_refused_by_member_and_leave_nothing_behind(col, make, tmp_path, monkeypatch):
    if make is _encrypted_zip and shutil.which("zip") is None:
        pytest.skip("the zip program is not installed")
    folder = tmp_path / "in"
    folder.mkdir()
    expected = make(folder)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with case("archives"):
        report = index_paths(col, [folder], progress=False)
    assert list(scratch.iterdir()) == []  # every member taken out was removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "scratch"]  # nothing written beside the folder
    assert len(report.skipped) == expected["refused"], report.summary()
    assert report.indexed + len(report.written.unchanged) == expected["read"], report.summary()
    assert all("\n" not in error.reason and error.source.startswith(str(folder.resolve())) for error in report.skipped)


# -- generated containers and damaged real documents ------------------------------------------------------
member_names = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12),
    st.sampled_from(["../escape.txt", "/abs.txt", "a/../../b.txt", "dir/", "same.txt", "x" * 300]),
)
member_bodies = st.one_of(
    st.binary(max_size=120),
    hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.just(b"plain words about rivers\n"),
    st.binary(max_size=60).map(gzip.compress),
)


def _zip_of(members: list[tuple[str, bytes]], nested_zip: bool) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore")  # duplicate member names are part of what is generated
        for name, body in members:
            archive.writestr(name, body)
        if nested_zip:
            archive.writestr("inner.zip", _zip_of(members[:2], False))
    return buffer.getvalue()


def _tar_of(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, body in members:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


containers = st.builds(
    lambda kind, members, nested_zip, cut: (
        kind,
        (_zip_of(members, nested_zip) if kind == "zip" else _tar_of(members)),
        cut,
    ),
    st.sampled_from(["zip", "tar"]),
    st.lists(st.tuples(member_names, member_bodies), min_size=1, max_size=4),
    st.booleans(),
    st.one_of(st.none(), st.floats(0.05, 0.95)),
)


def _loaded(path) -> list:
    """Everything ``load_path`` yields for ``path``, each item checked: a document or a one-line reason."""
    items = list(load_path(path))
    for item in items:
        if isinstance(item, LoadError):
            assert item.reason and "\n" not in item.reason, item
        else:
            assert item.metadata.get("source", item.id).startswith(str(path.resolve())), item.id
    return items


@settings(max_examples=examples(40), deadline=None)
@given(container=containers, suffix=st.sampled_from([".zip", ".tgz", ".docx", ".xlsx", ".pdf", ".txt", ""]))
def test_generated_archives_load_or_are_refused_with_a_reason_and_leave_no_member_behind(
    container, suffix, tmp_path_factory, monkeypatch
):
    kind, data, cut = container
    folder = tmp_path_factory.mktemp("archive")
    scratch = tmp_path_factory.mktemp("scratch")
    path = folder / f"generated{suffix}"  # the name may lie about what the bytes are
    path.write_bytes(data if cut is None else data[: int(len(data) * cut)])
    with case("archives"), monkeypatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(scratch))
        _loaded(path)
    assert list(scratch.iterdir()) == []


@pytest.fixture(scope="module")
def office_files(tmp_path_factory) -> dict[str, bytes]:
    """Real documents written by their formats' own libraries: a Word file and a workbook."""
    import docx
    import openpyxl

    folder = tmp_path_factory.mktemp("office")
    document = docx.Document()
    document.add_heading("Rivers", level=1)
    document.add_paragraph("Rivers carry silt to their deltas. " * 20)
    document.save(folder / "real.docx")
    book = openpyxl.Workbook()
    for row in range(40):
        book.active.append([f"river {row}", row * 10, "a long description of the river " * 3])
    book.save(folder / "real.xlsx")
    return {suffix: (folder / f"real{suffix}").read_bytes() for suffix in (".docx", ".xlsx")}


@settings(max_examples=examples(40), deadline=None)
@given(
    suffix=st.sampled_from([".docx", ".xlsx"]),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(1, 255)), max_size=6),
)
def test_damaged_office_files_load_or_are_refused_with_a_reason(office_files, suffix, cut, flips, tmp_path_factory):
    data = bytearray(office_files[suffix][: max(1, int(len(office_files[suffix]) * cut))])
    for where, mask in flips:  # damage inside the compressed parts as well as in the ZIP's directory
        data[min(len(data) - 1, int(len(data) * where))] ^= mask
    path = tmp_path_factory.mktemp("damaged") / f"damaged{suffix}"
    path.write_bytes(bytes(data))
    with case("office"):
        _loaded(path)
