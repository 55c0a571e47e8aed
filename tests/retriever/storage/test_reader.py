"""Readers and the writer's clean-up: a reader never sees a segment half-deleted, and moves on with the writer."""

from __future__ import annotations

import dataclasses
import os

from retriever import Collection
from retriever.storage import cleanup
from retriever.storage.merging import MergePolicy
from retriever.storage.segment import SEGMENTS_DIR, Segment


def three_segments(path, model) -> Collection:
    col = Collection.create(path, model, merge_policy=MergePolicy(small_factor=10))
    for batch in range(3):
        col.add([{"id": f"b{batch}-{i}", "text": f"batch {batch} river note {i}"} for i in range(3)])
    return col


def test_no_file_of_a_removed_segment_goes_while_the_folder_keeps_its_name(tmp_path, tiny_model_dir, monkeypatch):
    col = three_segments(tmp_path / "col", tiny_model_dir)
    names = [s["name"] for s in col.info()["segments"]]
    nothing = dataclasses.replace(col.catalog.state(), segments=())
    col.close()
    folders = [tmp_path / "col" / SEGMENTS_DIR / n for n in names]
    seen = []
    real_unlink = os.unlink

    def watching_unlink(path, *args, dir_fd=None, **kwargs):  # shutil.rmtree removes files with os.unlink
        folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else os.path.dirname(path)
        seen.append(os.path.basename(folder))
        return real_unlink(path, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "unlink", watching_unlink)
    cleanup.remove_unreferenced(tmp_path / "col", nothing)
    assert len(seen) > 10 and all(folder.startswith(".removing-") for folder in seen)  # renamed before any file went
    assert not any(f.exists() for f in folders)
    assert not [p for p in (tmp_path / "col" / SEGMENTS_DIR).iterdir()]  # the renamed folders are gone too


def test_a_reader_whose_segment_is_removed_while_it_loads_moves_to_the_next_generation(
    tmp_path, tiny_model_dir, monkeypatch
):
    writer = three_segments(tmp_path / "col", tiny_model_dir)
    reader = Collection.open(tmp_path / "col")
    assert len(reader.search("river", k=20)) == 9  # the reader holds the three segments' generation
    writer.add([{"id": "late", "text": "a late river note"}])  # a fourth segment the reader has yet to open
    original, fired = Segment._open_arrays, []

    def open_while_the_writer_compacts(segment):
        if not fired:
            fired.append(segment.name)
            writer.compact()  # merges every segment into one and removes the others' folders
            writer.add([{"id": "after", "text": "after the compaction"}])
        return original(segment)

    monkeypatch.setattr(Segment, "_open_arrays", open_while_the_writer_compacts)
    hits = reader.search("river", k=20)
    assert fired and {h.id for h in hits} >= {"late", "b0-0", "b2-2"}
    assert reader.info()["generation"] == writer.info()["generation"] and len(reader) == 11
    reader.close()
    writer.close()


def test_a_reader_whose_deletion_file_goes_between_its_check_and_its_read_moves_to_the_next_generation(
    tmp_path, tiny_model_dir, monkeypatch
):
    """A writer's clean-up unlinks an old generation's deletion file on its own (no folder rename): a reader
    that found the file and then failed to read it takes the newer generation, never reports damage."""
    from retriever.storage import segment as segment_module

    writer = three_segments(tmp_path / "col", tiny_model_dir)
    reader = Collection.open(tmp_path / "col")
    assert len(reader.search("river", k=20)) == 9
    writer.delete(["b0-0"])  # a deletion file the reader has yet to read
    original, fired = segment_module.regular_file, []

    def found_then_removed(path):
        found = original(path)
        if path.name.startswith("deleted.") and not fired:
            fired.append(path.name)
            for doc_id in ("b0-1", "b1-1"):  # the next writers publish and remove older deletion files
                writer.delete([doc_id])
            assert not path.exists()
        return found

    monkeypatch.setattr(segment_module, "regular_file", found_then_removed)
    hits = reader.search("river", k=20)
    assert fired and {h.id for h in hits}.isdisjoint({"b0-0", "b0-1", "b1-1"}) and len(hits) == 6
    assert reader.info()["generation"] == writer.info()["generation"]
    reader.close()
    writer.close()
