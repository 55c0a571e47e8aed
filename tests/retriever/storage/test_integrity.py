"""Checksums recorded at write time; damage found by check and merges, reported with its documents, repaired."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from retriever import Collection
from retriever.errors import CorruptCollectionError
from retriever.storage.integrity import CHECKSUM_SUFFIX, crc32_of
from retriever.storage.merging import MergePolicy


@pytest.fixture()
def collection(tmp_path, tiny_embedder):
    """Three segments of four documents (b0-*, b1-*, b2-*), one deletion, no automatic merge."""
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(small_factor=10))
    for batch in range(3):
        col.add([{"id": f"b{batch}-{i}", "text": f"batch {batch} document {i} " * 20} for i in range(4)])
    col.delete(["b0-1"])
    yield col
    col.close()


def segment(col: Collection, n: int) -> Path:
    return col.root / "segments" / col.info()["segments"][n]["name"]


def flip_byte(path: Path, at: int = 7) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_every_file_has_its_checksum_and_a_whole_collection_checks_clean(collection):
    report = collection.check()
    assert report.ok and report.segments == 3 and not report.unverified
    first = segment(collection, 0)
    recorded = json.loads((first / "segment.json").read_text())["checksums"]
    on_disk = {p.name for p in first.iterdir()} - {"segment.json"}
    deletion = next(first.glob("deleted.*.npy"))
    assert set(recorded) == on_disk - {deletion.name, deletion.name + CHECKSUM_SUFFIX}
    assert all(crc32_of(first / name) == crc for name, crc in recorded.items())
    assert (first / (deletion.name + CHECKSUM_SUFFIX)).read_text().strip() == crc32_of(deletion)
    assert report.files == len(recorded) + 1 + 2 * 19  # the deletion file too; 19 files a segment


def test_a_flipped_byte_is_named_with_its_documents_and_stops_a_merge(collection):
    flip_byte(segment(collection, 1) / "text.bin")
    report = collection.check()
    assert not report.ok and [(d.file, d.reason.split()[0]) for d in report.damaged] == [("text.bin", "checksum")]
    assert report.documents == {segment(collection, 1).name: ["b1-0", "b1-1", "b1-2", "b1-3"]}
    generation = collection.info()["generation"]
    with pytest.raises(CorruptCollectionError, match=r"merge stopped: damaged file\(s\): s\d+/text.bin"):
        collection.compact()
    assert collection.info()["generation"] == generation and len(collection) == 11  # nothing changed


def test_repair_drops_only_what_it_reports(collection):
    damaged = segment(collection, 0)
    deletion = next(damaged.glob("deleted.*.npy"))
    flip_byte(deletion, at=-1)
    report = collection.check(repair=True)
    assert report.repaired and [d.file for d in report.damaged] == [deletion.name]
    assert not damaged.exists()  # the repaired generation no longer refers to it
    assert report.documents == {damaged.name: ["b0-0", "b0-2", "b0-3"]}  # b0-1 was deleted already
    assert len(collection) == 8 and sorted(collection.ids()) == [f"b{b}-{i}" for b in (1, 2) for i in range(4)]
    assert collection.check().ok and collection.compact()["segments_after"] == 1 and collection.check().ok
    assert collection.get("b2-3").text.startswith("batch 2 document 3") and collection.get("b0-0") is None


def test_damaged_keys_fall_back_to_documents_no_healthy_segment_holds(collection):
    flip_byte(segment(collection, 2) / "keys.npy", at=-3)
    report = collection.check()
    assert report.documents == {segment(collection, 2).name: ["b2-0", "b2-1", "b2-2", "b2-3"]}


def test_older_segments_without_checksums_are_unverified_not_damaged(collection):
    meta_path = segment(collection, 2) / "segment.json"
    meta = json.loads(meta_path.read_text())
    del meta["checksums"]
    meta_path.write_text(json.dumps(meta))
    report = collection.check()
    assert report.ok and report.unverified == [segment(collection, 2).name]
    assert collection.compact()["segments_after"] == 1 and collection.check().ok  # merged: checksums recorded


def test_a_missing_file_is_damage(collection):
    (segment(collection, 1) / "doc_lengths.npy").unlink()
    report = collection.check()
    assert [(d.file, d.reason) for d in report.damaged] == [("doc_lengths.npy", "missing")] and not report.unreadable


def test_catalog_documents_without_segment_rows_are_found_and_repaired(collection):
    from sqlalchemy import insert

    from retriever.storage.catalog import documents

    with collection.catalog.engine.begin() as conn:  # a row no segment holds, as a lost segment would leave
        conn.execute(
            insert(documents).values(
                id="ghost",
                key=10_000,
                title="",
                meta={},
                content_hash="0" * 64,
                text_hash="0" * 64,
                n_chunks=1,
                updated_at=0.0,
            )
        )
    report = collection.check()
    assert [(d.segment, d.reason) for d in report.damaged] == [("catalog", "1 document(s) have no row in any segment")]
    assert report.documents == {"catalog": ["ghost"]}
    assert collection.check(repair=True).repaired and "ghost" not in collection and collection.check().ok
    assert len(collection) == 11


def test_a_damaged_sqlite_catalog_is_reported(collection):
    collection.close()
    catalog = collection.root / "catalog.sqlite"
    assert not catalog.with_name("catalog.sqlite-wal").exists()  # the last connection closed merged the WAL
    data = bytearray(catalog.read_bytes())
    page = 4096
    for at in range(2 * page + 16, min(len(data), 4 * page)):  # scramble the pages after the header
        data[at] ^= 0x5A
    catalog.write_bytes(bytes(data))
    with Collection.open(collection.root) as again:
        report = again.check()
    assert not report.ok and report.damaged[0].segment == "catalog" and report.damaged[0].file == "catalog.sqlite"


def _without_file_access_rights(argv: list[str]) -> list[str]:
    """``argv`` run so that file permissions apply: as root, without the capabilities that bypass them."""
    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and util-linux's setpriv is missing: file permissions cannot be made to apply")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *argv]


def test_a_file_that_cannot_be_opened_is_an_error_and_repair_drops_nothing(collection):
    path, generation = collection.root, collection.info()["generation"]
    meta = segment(collection, 1) / "segment.json"
    collection.close()
    meta.chmod(0)
    try:
        argv = [str(Path(sys.executable).parent / "semsearch"), "check", "--repair", "--json", "-c", str(path)]
        result = subprocess.run(_without_file_access_rights(argv), capture_output=True, text=True, timeout=300)
    finally:
        if meta.exists():  # a repair that dropped the segment removed it
            meta.chmod(0o644)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout.splitlines()[0])
    assert not report["repaired"] and report["damaged"] == [] and report["documents"] == {}
    assert [(u["segment"], u["file"]) for u in report["unreadable"]] == [(meta.parent.name, "segment.json")]
    assert "Permission denied" in report["unreadable"][0]["reason"]
    assert "nothing was dropped" in result.stderr and "Permission denied" in result.stderr
    with Collection.open(path) as again:  # every document is still there, in the same generation
        assert len(again) == 11 and again.info()["generation"] == generation and again.check().ok
