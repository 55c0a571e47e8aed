"""The folder watcher (``indexer.watching.watch``) in a thread, on a real file system, with real inotify events."""

from __future__ import annotations

import contextlib
import csv
import json
import shutil
import threading
import time
import zipfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from indexer.syncing import SyncOptions, owned_by, source_file
from indexer.watch_events import Settling, WatchedFolders
from indexer.watching import WatchEvent, watch
from retriever import Collection
from retriever.errors import BadInputError

pytest.importorskip("watchfiles")

DEADLINE_S = 60


def wait_for(condition: Callable[[], object], what: str, timeout: float = DEADLINE_S):
    """Poll ``condition`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def found(collection: Collection, word: str) -> list[str]:
    """The ids a keyword search for ``word`` finds."""
    return [hit.id for hit in collection.search(word, k=20, mode="bm25")]


def text_of(collection: Collection, doc_id: str) -> str:
    """The stored text of ``doc_id``, "" when there is none (``get`` may miss a document replaced meanwhile)."""
    doc = collection.get(doc_id)
    return doc.text if doc is not None else ""


def source_of(collection: Collection, doc_id: str) -> str | None:
    """The stored ``metadata["source"]`` of ``doc_id`` (``None`` when there is none)."""
    doc = collection.get(doc_id)
    return doc.metadata.get("source") if doc is not None else None


def write_csv(path: Path, rows: list[tuple[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["id", "text"])
        writer.writerows(rows)


@pytest.fixture()
def collection(tmp_path, tiny_model_dir) -> Iterator[Collection]:
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        yield col


@pytest.fixture()
def folder(tmp_path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "tea.txt").write_text("Green tea is steamed right after picking.", encoding="utf-8")
    (root / "sub" / "rivers.md").write_text("# Rivers\n\nRivers flow into the sea.", encoding="utf-8")
    return root.resolve()


@contextlib.contextmanager
def watching(collection: Collection, folder: Path, **kwargs) -> Iterator[list[WatchEvent]]:
    """``watch`` running in a thread until the block ends; yields its events as they come."""
    events: list[WatchEvent] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def run() -> None:
        try:
            watch([folder], collection, stop=stop, on_event=events.append, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_for(lambda: failures or any(event.kind == "watching" for event in events), "the watcher started")
    try:
        yield events
    finally:
        stop.set()
        thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the watcher did not stop"
    assert not failures, failures
    assert events[-1].kind == "stopped"


def batches(events: list[WatchEvent]) -> list[WatchEvent]:
    return [event for event in events if event.kind == "batch"]


def test_a_new_file_becomes_searchable_and_a_deleted_one_disappears(collection, folder):
    with watching(collection, folder) as events:
        assert set(collection.ids()) == {str(folder / "tea.txt"), str(folder / "sub" / "rivers.md")}
        new = folder / "sub" / "mountains.txt"
        new.write_text("Mountains rise above the clouds.", encoding="utf-8")
        wait_for(lambda: str(new) in found(collection, "mountains"), "the new file is found")
        (folder / "tea.txt").unlink()
        wait_for(
            lambda: str(folder / "tea.txt") not in collection and found(collection, "tea") == [],
            "the deleted file is gone",
        )
        wait_for(lambda: [i for event in batches(events) for i in event.report.written.deleted], "the deletion said")
        assert [i for event in batches(events) for i in event.report.written.deleted] == [str(folder / "tea.txt")]


def test_a_rename_leaves_one_document_under_the_new_path(collection, folder):
    with watching(collection, folder):
        old, new = folder / "tea.txt", folder / "sub" / "green tea.txt"
        old.rename(new)
        wait_for(lambda: str(new) in collection and str(old) not in collection, "the renamed file moved")
        wait_for(lambda: found(collection, "steamed") == [str(new)], "the renamed file is found under its new path")
        assert len(collection) == 2


def test_a_changed_file_is_replaced_and_records_gone_from_it_are_deleted(collection, folder):
    records = folder / "notes.csv"
    write_csv(records, [("n1", "Coffee beans are roasted."), ("n2", "Kaffee wird geröstet.")])
    with watching(collection, folder):
        assert {"n1", "n2"} <= set(collection.ids())
        write_csv(records, [("n1", "Cocoa beans are fermented.")])
        (folder / "tea.txt").write_text("Black tea is oxidised fully.", encoding="utf-8")
        wait_for(
            lambda: "n2" not in collection and "oxidised" in text_of(collection, str(folder / "tea.txt")),
            "the changed files were read again",
        )
        wait_for(lambda: text_of(collection, "n1") == "Cocoa beans are fermented.", "the record was replaced")
        wait_for(lambda: found(collection, "roasted") == found(collection, "steamed") == [], "the old texts are gone")
        assert source_of(collection, "n1") == str(records)


def test_a_renamed_record_file_keeps_its_records_under_the_new_file(collection, folder):
    records = folder / "notes.csv"
    write_csv(records, [("n1", "Coffee beans are roasted."), ("n2", "Kaffee wird geröstet.")])
    with watching(collection, folder) as events:
        moved = folder / "sub" / "moved.csv"
        records.rename(moved)
        wait_for(lambda: source_of(collection, "n1") == source_of(collection, "n2") == str(moved), "the records moved")
        wait_for(lambda: any("n1" in event.report.written.updated for event in batches(events)), "the batch said")
        assert {"n1", "n2"} <= set(collection.ids())
        assert all(event.report.written.deleted == [] for event in batches(events))
        assert sum(event.report.written.chunks for event in batches(events)) == 0  # nothing embedded again


def write_zip(path: Path, members: dict[str, str | bytes]) -> None:
    """A ZIP archive (written aside, then moved in place) holding ``members``."""
    aside = path.with_name(f".{path.name}.part")
    with zipfile.ZipFile(aside, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    aside.rename(path)


def test_an_archive_s_members_follow_the_archive(collection, folder, tmp_path):
    inner = tmp_path / "inner.zip"
    write_zip(inner, {"deep.txt": "A member inside an inner archive about glaciers."})
    archive = folder / "bundle.zip"
    with watching(collection, folder):
        write_zip(
            archive,
            {
                "a.txt": "Alpha member about deserts.",
                "b.txt": "Beta member about islands.",
                "inner.zip": inner.read_bytes(),
            },
        )
        members = {f"{archive}::a.txt", f"{archive}::b.txt", f"{archive}::inner.zip::deep.txt"}
        wait_for(lambda: members <= set(collection.ids()), "the members were read")
        write_zip(archive, {"a.txt": "Alpha member about deserts.", "inner.zip": inner.read_bytes()})
        wait_for(lambda: f"{archive}::b.txt" not in collection, "the member gone from the archive was deleted")
        archive.unlink()
        wait_for(
            lambda: not any(doc_id.startswith(str(archive)) for doc_id in collection.ids()),
            "the archive's members, the inner archive's too, were deleted",
        )
        assert set(collection.ids()) == {str(folder / "tea.txt"), str(folder / "sub" / "rivers.md")}


def test_a_burst_of_writes_to_one_file_is_read_once(collection, folder):
    target = folder / "log.txt"
    with watching(collection, folder, settle_s=2.0) as events:
        with target.open("w", encoding="utf-8") as stream:
            for line in range(50):
                stream.write(f"Line {line} of the journal.\n")
                stream.flush()
        wait_for(lambda: "Line 49" in text_of(collection, str(target)), "the file was read")
    touching = [
        event for event in batches(events) if str(target) in event.report.written.added + event.report.written.updated
    ]
    assert len(touching) == 1


def test_a_folder_moved_in_is_read_and_one_moved_out_is_deleted(collection, folder, tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "ocean.txt").write_text("The ocean is deep and cold.", encoding="utf-8")
    (folder / "sub2").mkdir()
    (folder / "sub2" / "lakes.txt").write_text("Lakes are still.", encoding="utf-8")  # a name "sub" begins
    (folder / "sub.txt").write_text("A file named like the folder.", encoding="utf-8")
    kept = {str(folder / "tea.txt"), str(folder / "sub2" / "lakes.txt"), str(folder / "sub.txt")}
    with watching(collection, folder):
        shutil.move(str(outside), str(folder / "moved"))
        inside = folder / "moved" / "deep" / "ocean.txt"
        wait_for(lambda: str(inside) in collection, "the folder moved in was read")
        shutil.move(str(folder / "sub"), str(tmp_path / "gone"))
        wait_for(lambda: str(folder / "sub" / "rivers.md") not in collection, "the folder moved out was deleted")
        assert set(collection.ids()) == kept | {str(inside)}


def test_the_patterns_hidden_files_and_the_collection_itself_are_left_out(tmp_path, folder, tiny_model_dir):
    with Collection.create(folder / "col", tiny_model_dir) as collection:  # inside the watched folder
        with watching(collection, folder, options=SyncOptions(exclude=("*.md",))):
            (folder / ".hidden.txt").write_text("Hidden words stay out.", encoding="utf-8")
            (folder / "notes.md").write_text("Markdown is excluded here.", encoding="utf-8")
            (folder / "kept.txt").write_text("Kept words go in.", encoding="utf-8")
            wait_for(lambda: str(folder / "kept.txt") in collection, "the kept file was read")
            (folder / "tea.txt").write_text("Tea again, changed.", encoding="utf-8")
            wait_for(lambda: "changed" in text_of(collection, str(folder / "tea.txt")), "the change was read")
            assert set(collection.ids()) == {str(folder / "tea.txt"), str(folder / "kept.txt")}


def test_a_bad_file_is_reported_and_the_watcher_goes_on(collection, folder):
    with watching(collection, folder) as events:
        bad = folder / "broken.jsonl"
        bad.write_text("{not json\n", encoding="utf-8")
        wait_for(
            lambda: any(
                error.source.startswith(str(bad)) for event in batches(events) for error in event.report.skipped
            ),
            "the bad file was reported",
        )
        good = folder / "after.txt"
        good.write_text("The watcher goes on after a bad file.", encoding="utf-8")
        wait_for(lambda: str(good) in collection, "a later file was read")


def test_a_locked_collection_is_waited_for_and_nothing_is_lost(tmp_path, folder, tiny_model_dir):
    Collection.create(tmp_path / "col", tiny_model_dir).close()
    with Collection.open(tmp_path / "col", lock_timeout=0.2) as collection, watching(collection, folder) as events:
        other = Collection.open(tmp_path / "col")  # another writer, holding the lock
        try:
            with other.writer.locked():
                (folder / "waiting.txt").write_text("Written while another writer holds the lock.", encoding="utf-8")
                wait_for(lambda: any(event.kind == "retry" for event in events), "the watcher waited for the lock")
                assert str(folder / "waiting.txt") not in collection
            other.upsert([{"id": "other", "text": "The other writer's document."}])
        finally:
            other.close()
        wait_for(lambda: str(folder / "waiting.txt") in collection, "the batch was written after the lock")
        assert "other" in collection


def test_the_first_pass_finds_what_changed_while_no_watcher_ran(collection, folder):
    first = watch([folder], collection, once=True)
    assert sorted(first.written.added) == sorted([str(folder / "tea.txt"), str(folder / "sub" / "rivers.md")])
    again = watch([folder], collection, once=True)
    assert again.written.chunks == 0 and again.written.added == again.written.updated == again.written.deleted == []
    assert len(again.written.unchanged) == 2  # read, never embedded again
    (folder / "tea.txt").unlink()
    (folder / "sub" / "rivers.md").write_text("# Rivers\n\nRivers carve canyons.", encoding="utf-8")
    (folder / "new.txt").write_text("A file added while no watcher ran.", encoding="utf-8")
    third = watch([folder], collection, once=True)
    assert third.written.deleted == [str(folder / "tea.txt")]
    assert third.written.updated == [str(folder / "sub" / "rivers.md")]
    assert third.written.added == [str(folder / "new.txt")]


def test_a_file_that_fails_to_load_keeps_its_documents(collection, folder):
    records = folder / "notes.jsonl"
    records.write_text(json.dumps({"id": "r1", "text": "Record one."}) + "\n", encoding="utf-8")
    watch([folder], collection, once=True)
    records.write_text("{broken\n", encoding="utf-8")
    report = watch([folder], collection, once=True)
    assert report.skipped and "r1" in collection and report.written.deleted == []


def test_bad_arguments_are_refused(collection, folder):
    with pytest.raises(BadInputError, match="no such directory"):
        watch([folder / "missing"], collection, once=True)
    with pytest.raises(BadInputError, match="not a directory"):
        watch([folder / "tea.txt"], collection, once=True)
    with pytest.raises(BadInputError, match="list"):
        watch(str(folder), collection, once=True)
    with pytest.raises(BadInputError, match="settle_s"):
        watch([folder], collection, settle_s=0, once=True)


def test_a_path_settles_after_its_last_event_or_after_the_longest_wait():
    settling = Settling(settle_s=1.0, max_wait_s=5.0)
    settling.note([("/d/a.txt", True)], now=0.0)
    settling.note([("/d/a.txt", False), ("/d/b.txt", False)], now=0.8)
    assert settling.ready(now=1.5) == []
    assert settling.ready(now=1.8) == [("/d/a.txt", True), ("/d/b.txt", False)]  # created, then changed: created
    for tick in range(12):  # written to without a pause
        settling.note([("/d/log.txt", False)], now=10.0 + tick * 0.5)
        if tick * 0.5 < 5.0:
            assert settling.ready(now=10.0 + tick * 0.5) == []
    assert settling.ready(now=15.5) == [("/d/log.txt", False)]
    settling.again([("/d/c.txt", False)], now=20.0, delay_s=2.0)
    assert settling.ready(now=21.5) == [] and settling.ready(now=22.0) == [("/d/c.txt", False)]


def test_a_vanished_path_is_a_folder_only_when_it_held_something_read(tmp_path):
    root = tmp_path.resolve()
    (root / "docs" / "a").mkdir(parents=True)
    (root / "docs" / "a" / "x.txt").write_text("x", encoding="utf-8")
    chooser = WatchedFolders([root / "docs"], exclude=["*.log"])
    work = chooser.work([(str(root / "docs" / "a"), True)])  # a folder moved in: walked
    assert work.read == [root / "docs" / "a" / "x.txt"] and work.folders == [str(root / "docs" / "a")]
    chooser.done(work)
    shutil.rmtree(root / "docs" / "a")
    gone = chooser.work([(str(root / "docs" / "a"), False), (str(root / "docs" / "b.txt"), False)])
    assert gone.folders == [str(root / "docs" / "a")] and gone.files == [str(root / "docs" / "b.txt")]
    (root / "docs" / "skip.log").write_text("left out", encoding="utf-8")
    (root / "docs" / ".hidden.txt").write_text("left out", encoding="utf-8")
    assert not chooser.work([(str(root / "docs" / "skip.log"), True), (str(root / "docs" / ".hidden.txt"), True)])


def test_documents_belong_to_their_file_and_the_folders_above_it():
    assert source_file("/a/b.zip::inner/c.txt") == "/a/b.zip"
    assert owned_by("/a/b.zip::inner/c.txt", {"/a/b.zip"}) and owned_by("/a/sub/c.txt", {"/a"})
    assert not owned_by("/a/b.txt2", {"/a/b.txt"}) and not owned_by("/ab/c.txt", {"/a"})
