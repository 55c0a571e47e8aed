"""Paging hints on mapped segment files: readers' rescoring rows and texts are paged at random, passes read ahead."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from retriever.search import vector_index
from retriever.search.vector_index import IndexPolicy
from retriever.storage import paging, vector_files
from retriever.storage.segment_format import INT8_CODES_FILE, ROWS_FILE
from retriever.storage.vector_files import read_vectors, write_vectors

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the kernel's /proc/self/smaps")


def resident_share(array: np.ndarray) -> float:
    """The share of a mapped ``array``'s pages in memory now (``mincore``); 1.0 for an array in memory."""
    if not array.size or not paging.is_mapped(array):
        return 1.0
    flags = paging._page_flags(array.ctypes.data, array.nbytes)
    return 1.0 if flags is None else float(flags.mean())


def vm_flags(path: Path) -> set[str]:
    """The ``VmFlags`` of this process's mapping of ``path`` (``rr``: paged at random)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(str(path.resolve())):
            flags = next(entry for entry in lines[i + 1 :] if entry.startswith("VmFlags:"))
            return set(flags.split()[1:])
    raise AssertionError(f"{path} is not mapped")


def mapped(tmp_path: Path, name: str = "rows.npy", n: int = 5000) -> tuple[np.ndarray, Path]:
    path = tmp_path / name
    np.save(path, np.arange(n * 16, dtype=np.float32).reshape(n, 16))
    return np.asarray(np.load(path, mmap_mode="r")), path


def test_only_file_mappings_count_as_mapped(tmp_path):
    rows, _ = mapped(tmp_path)
    assert paging.is_mapped(rows) and paging.is_mapped(rows[10:20])
    assert not paging.is_mapped(np.zeros((4, 4), np.float32))


@linux_only
def test_hints_change_how_a_mapping_is_paged_and_never_its_contents(tmp_path):
    rows, path = mapped(tmp_path)
    before = rows.copy()
    assert "rr" not in vm_flags(path)
    paging.read_at_random(rows)
    assert "rr" in vm_flags(path)
    paging.read_ahead(rows)
    assert np.array_equal(rows, before)
    paging.read_normally(rows)
    assert "rr" not in vm_flags(path)


def test_heap_arrays_and_empty_arrays_are_left_alone():
    heap = np.arange(10, dtype=np.float32)
    for hint in (paging.read_at_random, paging.read_ahead, paging.read_normally):
        hint(heap)
        hint(np.zeros(0, np.float32))
    assert np.array_equal(heap, np.arange(10, dtype=np.float32))


@linux_only
def test_read_rescoring_rows_are_paged_at_random_and_gathered_whole_by_a_pass(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    built = vector_index.build(vectors, IndexPolicy(codes="always"))
    write_vectors(built, tmp_path, lambda path, fill: fill(path))
    loaded = read_vectors(tmp_path, built.info)
    assert "rr" in vm_flags(tmp_path / ROWS_FILE)
    assert "rr" in vm_flags(tmp_path / INT8_CODES_FILE)
    scores, rows = vector_index.search(loaded, vectors[:5], 3, None, len(vectors), IndexPolicy(codes="always"))
    assert np.array_equal(rows[:, 0], np.arange(5)) and np.allclose(scores[:, 0], 1.0, atol=1e-5)
    warmed = []
    monkeypatch.setattr(vector_files, "read_ahead_in_background", warmed.append)
    assert np.array_equal(vector_index.reconstruct(loaded, np.arange(5)), vectors[:5]) and not warmed
    whole = vector_index.reconstruct(loaded, np.arange(len(vectors)))  # a pass: read ahead first
    assert np.array_equal(whole, vectors)
    assert len(warmed) == 1 and warmed[0] is loaded.int8.codes  # then the int8 tier it pushed out, again


@linux_only
def test_a_collections_texts_are_paged_at_random_and_still_read_whole(tmp_path, tiny_model_dir):
    from retriever import Collection

    def text(i: int) -> str:
        return " ".join([f"document {i} about rivers and tea"] * 20)

    with Collection.create(tmp_path / "c", tiny_model_dir) as col:
        col.add([{"id": f"d{i}", "text": text(i)} for i in range(30)])
        view = col.reader.current()
        texts = [part.segment.folder / "text.bin" for part in view.parts]
        assert texts and all("rr" in vm_flags(path) for path in texts)
        assert col.get("d7").text == text(7)
        hits = col.search("rivers and tea", k=3)
        assert len(hits) == 3 and all("rivers" in hit.text for hit in hits)


@pytest.mark.parametrize("count", [3, 4000])  # a few scattered rows, and a pass read ahead first
def test_gathered_rows_are_the_rows_asked_for_in_order(tmp_path, count):
    rows, _ = mapped(tmp_path)
    wanted = np.random.default_rng(count).choice(len(rows), size=count, replace=False)
    gathered = paging.gather_rows(rows, wanted)
    assert gathered.dtype == np.float32 and np.array_equal(gathered, np.asarray(rows)[wanted])


@linux_only
def test_read_ahead_reads_a_whole_file_past_the_kernels_readahead_window(tmp_path):
    """One hint over a whole file reads only the disk's readahead window (8 MB here); in steps, all of it."""
    import os
    import time

    path = tmp_path / "large.npy"
    np.save(path, np.ones((48 << 20) // 4, dtype=np.float32))  # 48 MB
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # out of the page cache
    os.close(fd)
    array = np.asarray(np.load(path, mmap_mode="r"))
    if resident_share(array) > 0.5:
        pytest.skip("the file system kept the file in memory")
    thread = paging.read_ahead_in_background(array)
    assert thread is not None
    thread.join(30)
    deadline = time.monotonic() + 20
    while resident_share(array) < 0.95 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert resident_share(array) >= 0.95
    assert resident_share(np.zeros(10)) == 1.0 and paging.read_ahead_in_background(np.zeros(10)) is None


def evicted(path: Path, raw: bool = False) -> np.ndarray:
    """``path``'s array (``raw``: its bytes) mapped after its pages were dropped from the page cache (skips
    where they stay)."""
    import os

    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    array = np.memmap(path, dtype=np.uint8, mode="r") if raw else np.asarray(np.load(path, mmap_mode="r"))
    if resident_share(array) > 0.5:
        pytest.skip("the file system kept the file in memory")
    return array


def resident_soon(array: np.ndarray, timeout: float = 20.0) -> bool:
    """Whether all of ``array``'s pages are in memory within ``timeout`` seconds (the reads are asynchronous)."""
    import time

    deadline = time.monotonic() + timeout
    while resident_share(array) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.02)
    return resident_share(array) == 1.0


@linux_only
def test_rows_read_ahead_are_the_rows_asked_for_and_no_others(tmp_path, monkeypatch):
    """Scattered rows asked for at once are read in (each row a page here), and the rest of the file is not."""
    path = tmp_path / "rows.npy"
    np.save(path, np.arange(4096 * 1024, dtype=np.float32).reshape(4096, 1024))  # 16 MB, 4 KB a row
    rows = evicted(path)
    wanted = [5, 900, 3000, 4095]
    paging.read_rows_ahead(rows, wanted)
    assert all(resident_soon(rows[row : row + 1]) for row in wanted)
    assert resident_share(rows) < 0.05 and resident_share(rows[1000:2000]) == 0.0
    paging.read_ranges_ahead(rows, [(2000, 2010)])
    assert resident_soon(rows[2000:2010]) and resident_share(rows[2020:2100]) == 0.0
    assert np.array_equal(paging.gather_rows(rows, wanted), np.asarray(rows)[wanted])
    paging.read_rows_ahead(np.zeros((4, 4)), [1, 2])  # not a mapping: nothing to do
    hints = []
    monkeypatch.setattr(paging, "_MADVISE", lambda *call: hints.append(call) or 0)
    paging.read_rows_ahead(rows, wanted + [1500])  # the first rows are in memory: the file needs no hints
    assert not hints
    paging.read_rows_ahead(rows, [1600, 5])
    assert len(hints) == 2  # a row on disk first: every row is asked for


@linux_only
def test_hits_texts_are_read_ahead_with_the_chunks_either_side(tmp_path, tiny_model_dir):
    from retriever import Collection

    words = " ".join(f"word{i}" for i in range(400))  # a document of several chunks
    with Collection.create(tmp_path / "c", tiny_model_dir) as col:
        col.add([{"id": "long", "text": words}, {"id": "short", "text": "rivers and tea"}])
        segment = col.reader.current().parts[0].segment
        row = int(np.argmax(np.diff(segment.doc_chunks)))  # the long document's
        first, last = int(segment.doc_chunks[row]), int(segment.doc_chunks[row + 1]) - 1
        assert last - first >= 3
        assert segment.context_chunks(first) == (first, first + 1)
        assert segment.context_chunks(first + 1) == (first, first + 2)
        assert segment.context_chunks(last) == (last - 1, last)
        text = evicted(segment.folder / "text.bin", raw=True)
        segment.read_texts_ahead([segment.context_chunks(first + 1)])
        lo, hi = segment._text_bytes(first, first + 2)
        assert resident_soon(text[lo:hi])
        assert segment.chunks_text(first, first + 2)[0] in words


def test_a_gather_asks_for_its_rows_unless_its_caller_did(tmp_path, monkeypatch):
    rows, _ = mapped(tmp_path)
    asked = []
    monkeypatch.setattr(paging, "read_rows_ahead", lambda array, wanted: asked.append(list(wanted)))
    assert np.array_equal(paging.gather_rows(rows, [7, 3000]), np.asarray(rows)[[7, 3000]]) and asked == [[7, 3000]]
    assert np.array_equal(paging.gather_rows(rows, [9, 4000], read_rows=False), np.asarray(rows)[[9, 4000]])
    assert asked == [[7, 3000]]
    whole = []  # a pass over the rows (a merge's) is read ahead whole, unless the caller did that already
    monkeypatch.setattr(paging, "read_ahead", lambda array: whole.append(len(array)))
    every = np.arange(len(rows))
    assert np.array_equal(paging.gather_rows(rows, every, read_rows=False), np.asarray(rows)) and whole == []
    assert np.array_equal(paging.gather_rows(rows, every), np.asarray(rows)) and whole == [len(rows)]
