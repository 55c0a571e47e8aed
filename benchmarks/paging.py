"""Dense search of a large collection with its mappings paged at random (as readers open them) or as the
kernel pages by default (reading around every fault), A/B in alternation over the same page cache.

    python -m benchmarks.paging [--collection runs/bench/scale/n10000000-compressed] [--queries 200]
        [--compare paging | read-ahead] [--mode dense | bm25]

The collection is opened twice in one process; one copy's rescoring rows and texts are put back to the
kernel's default paging (``MADV_NORMAL``). With ``--compare read-ahead`` the two sides are instead a search
that asks for its scattered float32 rows and hits' texts all at once (``paging.read_ranges_ahead``, as
searches do) and one that reads them a fault at a time (the hints turned off for its searches). The
collection's float32 rows and texts are dropped from the page cache before the timed searches. Queries are real query embeddings (``benchmarks.scale``'s
cache; their texts with ``--mode bm25``, whose hits' texts are read ahead as dense hits' are), a different one
for every search, so each side reads rows the other has not just read. The
difference shows only where the files are larger than the page cache can hold (ten million chunks on a
23 GB machine); below that, both read memory. Prints the machine, the disk's readahead, and p50 / p90
of the whole search and of its display stage (texts of the hits) per side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections import defaultdict
from typing import Iterator

import numpy as np

from benchmarks.scale import BENCH, machine
from retriever.storage import paging
from retriever.storage.segment_format import ROWS_FILE, TEXT


def default_paging(col) -> None:
    """Put ``col``'s rescoring rows and texts back to the kernel's default paging."""
    for part in col.reader.current().parts:
        segment = part.segment
        for array in (segment.text_blob, segment.index.rows):
            if array is not None:
                paging.read_normally(array)


def evict_rows_and_texts(col) -> None:
    """Drop ``col``'s float32 rows and texts from the page cache, so that a run starts as every search of a
    collection too large for it does, and runs repeat (the queries are the same draw each time)."""
    import os

    for part in col.reader.current().parts:
        for name in (TEXT, ROWS_FILE):
            path = part.segment.folder / name
            if path.is_file():
                fd = os.open(path, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)


@contextlib.contextmanager
def one_read_at_a_time() -> Iterator[None]:
    """Within it, searches ask for no rows or texts ahead: each is read when a fault needs it."""
    import retriever.search.ranking as ranking
    import retriever.storage.segment as segment

    saved = paging.read_ranges_ahead, ranking.read_rows_ahead, segment.read_ranges_ahead
    paging.read_ranges_ahead = segment.read_ranges_ahead = lambda array, ranges: None
    ranking.read_rows_ahead = lambda array, rows: None
    try:
        yield
    finally:
        paging.read_ranges_ahead, ranking.read_rows_ahead, segment.read_ranges_ahead = saved


def main() -> None:
    from retriever import Collection

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", default=str(BENCH / "scale" / "n10000000-compressed"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--compare", choices=("paging", "read-ahead"), default="paging")
    parser.add_argument("--mode", choices=("dense", "bm25"), default="dense", help="search by vector or by text")
    args = parser.parse_args()
    vectors = np.load(BENCH / "scale" / "real" / "queries.npy")
    texts = (
        json.loads((BENCH / "scale" / "real" / "query_texts.json").read_text())  # the vectors' queries
        if args.mode == "bm25"
        else []
    )

    def search(col, row: int) -> None:
        if args.mode == "dense":
            col.search(vector=vectors[row], k=10)
        else:
            col.search(texts[row], k=10, mode="bm25")

    chosen = np.random.default_rng(21).choice(len(vectors), size=min(args.queries, len(vectors)), replace=False)
    if args.compare == "paging":
        sides = {"random": Collection.open(args.collection), "default": Collection.open(args.collection)}
        default_paging(sides["default"])
    else:
        sides = {"ahead": Collection.open(args.collection), "one-by-one": Collection.open(args.collection)}
    plain = sides["one-by-one"] if "one-by-one" in sides else None
    display: dict[str, list[float]] = defaultdict(list)
    for name, col in sides.items():
        search(col, chosen[0])
        col.timings.listen(lambda stage, s, name=name: display[name].append(s) if stage == "display" else None)
    evict_rows_and_texts(next(iter(sides.values())))
    total: dict[str, list[float]] = defaultdict(list)
    for i, row in enumerate(chosen[1:]):
        name = list(sides)[i % 2]
        with one_read_at_a_time() if sides[name] is plain else contextlib.nullcontext():
            began = time.perf_counter()
            search(sides[name], row)
            total[name].append(time.perf_counter() - began)
    print(f"machine: {machine()}; {len(next(iter(sides.values())))} documents; {args.mode} search")
    for name in sides:
        print(
            f"  {name:<10} search p50 {_ms(total[name], 50)} p90 {_ms(total[name], 90)}   "
            f"display p50 {_ms(display[name], 50)} ms"
        )
    for col in sides.values():
        col.close()


def _ms(times: list[float], percent: int) -> str:
    ms = sorted(t * 1000 for t in times)
    value = statistics.median(ms) if percent == 50 else ms[min(len(ms) - 1, len(ms) * percent // 100)]
    return f"{value:7.2f}"


if __name__ == "__main__":
    main()
