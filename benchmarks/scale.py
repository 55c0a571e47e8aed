"""How the engine's costs grow with the collection, built as a user's batch job builds it.

    .venv/bin/python -m benchmarks.scale [--sizes 10000,100000,1000000] [--commit-docs 20000]
        [--queries 300] [--commits 3] [--codes compressed] [--workdir runs/bench/scale] [--reuse]
        [--build-only] [--states incremental,compacted]

Data. Document vectors are shaped like real all-MiniLM-L6-v2 chunk embeddings
(``benchmarks.real_shaped``: between two real members of a k-means cluster of
the real chunk vectors of the five shared BEIR sets), a batch starting at
document i drawn with seed i, so a resumed build goes on as an unbroken one.
Document i has the title of row i mod R of the five corpora and a text of
that row's length: about half its sentences, the rest from other rows
(``real_shaped.MixedTexts``: real vocabulary and lengths, no copies, which
would tie every query's best documents), metadata ``{"bucket": i % 100,
"year": 1990 + i % 30}`` (``where={"bucket": b}`` keeps 1%), its vector its one
chunk: N documents are N chunks. Queries are real: a fixed draw of
``--queries`` of the sets' queries, their MiniLM embeddings and texts, never
points of the indexed data. The real arrays are cached in the workdir.

Build. Each size is its own collection (``IndexPolicy(codes=--codes)``),
filled by commits of ``--commit-docs`` documents through ``Collection.add``
(the merge policy decides the segments). A stopped build goes on after the
documents it holds; a complete one is rebuilt, or kept with ``--reuse``.

States. Each size is measured as the commits left it ("incremental") and
after ``compact()`` ("compacted", timed), each on a hard-linked snapshot of
the build, which stays as it is. For each state: dense search p50/p99 (query
vector given, so no encoding; one query at a time) and recall@10 against
``exact=True``; hybrid p50 (text and vector) and its phases; BM25 p50; dense
under a 1% filter (p50, and the fewest hits a query got); the resident memory
of a fresh process after a dense and a hybrid search per query, private
(RssAnon) and file-backed (RssFile: shared by processes serving the
collection, reclaimable); size on disk; the index bytes that must stay
resident (every ``vectors.faiss``: codes of compressed segments, whole
indexes of float32 ones; not the ``vectors.npy`` rows that compressed codes
are rescored from, read at candidates only) against the raw float32 vectors;
the segments; and last, since they add documents, ``--commits`` commits of
1,000 documents (seconds and bytes written). Before the timings the collection
serves as a running server has: up to ``--queries`` other real queries are
searched once (hybrid, and dense under a filter), so that a timed search does
not pay the first touch of pages that common terms' postings and the index
share (on a million chunks that first touch cost a BM25 search ~1.5 ms).
The exact searches that recall is measured against run before the warming:
they read every row, for tens of seconds at a million, and a kernel that
reclaims memory idle for a minute (DAMON's pageout, seen on these machines)
would otherwise drop the warmed pages before the timings.

Prints the machine and a table of sizes and states; writes ``--out`` after
every state, keeping the sizes it holds from runs of the same settings (so
a rerun with ``--reuse`` adds sizes). Run it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import scale_table
from benchmarks.scale_reader import reader_memory
from benchmarks.scale_table import STATES

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "runs" / "bench"
DEFAULT_DATASETS = REPO.parent / "shared" / "datasets"
DIM = 384
BUCKETS = 100
COMMIT_DOCS = 1_000


def machine() -> str:
    """CPU model, available cores, the SIMD flags that matter for FAISS and encoders, memory, and how far the
    disks read ahead (what a search of files larger than the page cache pays per fault)."""
    from retriever.encoding.backends.choice import describe_cpu

    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 0
    return f"{describe_cpu()}, {pages / 2**30:.0f} GB of memory, readahead {readahead_kb()}"


def readahead_kb() -> str:
    """Each disk's ``read_ahead_kb`` (``unknown`` off Linux)."""
    found = [
        p
        for p in sorted(Path("/sys/block").glob("*/queue/read_ahead_kb"))
        if not p.parts[3].startswith(("loop", "ram", "zram"))
    ]
    return ", ".join(f"{p.parts[3]} {p.read_text().strip()} KB" for p in found) or "unknown"


def real_data(datasets: Path, cache: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Real ``(chunk vectors (r, 384), query vectors (q, 384), query texts)``, computed once into ``cache``."""
    from benchmarks.real_shaped import query_texts, real_embeddings

    chunks_file, queries_file, texts_file = cache / "chunks.npy", cache / "queries.npy", cache / "query_texts.json"
    if not texts_file.exists():  # written last
        chunks, queries = real_embeddings(datasets)
        texts = query_texts(datasets)
        assert len(texts) == len(queries), "query texts and vectors differ in number"
        cache.mkdir(parents=True, exist_ok=True)
        np.save(chunks_file, chunks)
        np.save(queries_file, queries)
        texts_file.write_text(json.dumps(texts))
    return np.load(chunks_file), np.load(queries_file), json.loads(texts_file.read_text())


@dataclass
class Queries:
    """Real queries: ``vectors`` ``(q, 384)``, their ``texts``, and the ``.npy`` and ``.json`` files holding both."""

    vectors: np.ndarray
    texts: list[str]
    files: tuple[Path, Path]
    warm_vectors: np.ndarray  # other real queries, searched before the timings
    warm_texts: list[str]


def draw_queries(vectors: np.ndarray, texts: list[str], n: int, cache: Path) -> Queries:
    """A fixed draw of ``n`` of the real queries, also written to ``cache`` for reader processes, and up to
    ``n`` others to warm a collection with."""
    chosen = np.random.default_rng(3).choice(len(vectors), size=min(n, len(vectors)), replace=False)
    rest = np.setdiff1d(np.arange(len(vectors)), chosen)
    warm = np.random.default_rng(4).choice(rest, size=min(n, len(rest)), replace=False)
    queries = Queries(
        vectors[chosen],
        [texts[i] for i in chosen],
        (cache / f"q{n}.npy", cache / f"q{n}.json"),
        vectors[warm],
        [texts[i] for i in warm],
    )
    np.save(queries.files[0], queries.vectors)
    queries.files[1].write_text(json.dumps(queries.texts))
    return queries


class Corpus:
    """The benchmark's document ``i``: a real title, a text mixed from real sentences to real length
    (``real_shaped.MixedTexts``), 1% buckets,
    and a real-shaped vector (``real``: ``(r, 384)`` real chunk vectors the sampler is fitted to)."""

    def __init__(self, datasets: Path, real: np.ndarray):
        from benchmarks.real_shaped import SETS, MixedTexts, RealShaped

        files = [datasets / name / "corpus.jsonl" for name in SETS]
        rows = [json.loads(line) for file in files if file.is_file() for line in file.open(encoding="utf-8")]
        self.texts = MixedTexts([(row.get("title", ""), row["text"]) for row in rows if row.get("text", "").strip()])
        self.sampler = RealShaped(real)

    def documents(self, start: int, n: int) -> list[dict]:
        """Documents ``start .. start + n - 1``, ids ``doc-{i}``."""
        return [
            {"id": f"doc-{i}", "title": title, "text": text, "metadata": {"bucket": i % BUCKETS, "year": 1990 + i % 30}}
            for i, (title, text) in ((i, self.texts(i)) for i in range(start, start + n))
        ]

    def vectors(self, start: int, n: int) -> np.ndarray:
        """``(n, 384)`` float32 unit rows for documents ``start ..``, drawn with seed ``start``."""
        return self.sampler.sample(n, seed=start)


class Phases:
    """Seconds of each piece of a collection's work it times from now on (``commit``, ``merge``, ``dense``, ...)."""

    def __init__(self, col) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)
        col.timings.listen(lambda name, seconds: self.seconds[name].append(seconds))

    def total(self, name: str) -> float:
        return sum(self.seconds.get(name, ()))

    def medians_ms(self) -> dict[str, float]:
        return {name: statistics.median(times) * 1000 for name, times in self.seconds.items()}


def documents_in(path: Path) -> int:
    """Documents the collection at ``path`` holds (0 when there is none)."""
    from retriever import Collection
    from retriever.storage.manifest import MANIFEST

    if not (path / MANIFEST).exists():
        return 0
    with Collection.open(path) as col:
        return len(col)


def build(path: Path, n: int, corpus: Corpus, codes: str, commit_docs: int) -> dict:
    """Fill the collection at ``path`` (created with ``codes``) up to ``n`` documents in commits of ``commit_docs``
    after those it holds: where it started, seconds in all, in commits (merges included) and in merges."""
    from retriever import Collection, Embedder
    from retriever.search.vector_index import IndexPolicy

    held = documents_in(path)
    if not held:
        shutil.rmtree(path, ignore_errors=True)  # killed before its manifest was written
    col = Collection.open(path) if held else Collection.create(path, Embedder(), index_policy=IndexPolicy(codes=codes))
    phases = Phases(col)
    began = time.perf_counter()
    with col:
        for start in range(held, n, commit_docs):
            size = min(commit_docs, n - start)
            col.add(corpus.documents(start, size), vectors=corpus.vectors(start, size))
            print(
                f"    {start + size:>10,} / {n:,} documents  {time.perf_counter() - began:8.1f} s  "
                f"({phases.total('merge'):.1f} s merging)  {len(col.reader.current().parts)} segments",
                flush=True,
            )
    return {
        "from_documents": held,
        "seconds": time.perf_counter() - began,
        "commit_s": phases.total("commit"),
        "merge_s": phases.total("merge"),
    }


def measure(base: Path, state: str, queries: Queries, corpus: Corpus, commits: int) -> dict:
    """The figures of one ``state`` of the collection at ``base``, taken on a snapshot of it (removed after)."""
    from retriever import Collection

    work = base.with_name(f"{base.name}-{state}")
    shutil.rmtree(work, ignore_errors=True)  # left by an interrupted run
    with Collection.open(base) as col:
        col.snapshot(work)
    try:
        out = {}
        with Collection.open(work) as col:
            if state == "compacted":
                began = time.perf_counter()
                col.compact()
                out["compact_s"] = time.perf_counter() - began
            out |= footprint(col) | search_figures(col, queries)
        out["reader"] = reader_memory(work, queries)
        out["commits"] = time_commits(work, corpus, commits)
    finally:
        shutil.rmtree(work)
    return out


def footprint(col) -> dict:
    """Counts, bytes on disk, resident index bytes (every ``vectors.faiss``), int8 rescoring rows' bytes (read
    through the page cache, not held), raw vector bytes, the segments."""
    from retriever.storage.segment import SEGMENTS_DIR
    from retriever.storage.segment_format import INDEX_FILE, INT8_CODES_FILE

    info = col.info()
    segments = []
    for s in info["segments"]:
        folder = col.root / SEGMENTS_DIR / s["name"]
        int8 = folder / INT8_CODES_FILE
        segments.append(
            {
                "chunks": s["chunks"],
                **s["index"],
                "index_bytes": (folder / INDEX_FILE).stat().st_size,
                "int8_bytes": int8.stat().st_size if int8.exists() else 0,
            }
        )
    return {
        "documents": info["documents"],
        "chunks": info["chunks"],
        "disk_bytes": info["size_bytes"],
        "resident_index_bytes": sum(s["index_bytes"] for s in segments),
        "int8_bytes": sum(s["int8_bytes"] for s in segments),
        "raw_vector_bytes": info["chunks"] * DIM * 4,
        "segments": segments,
    }


def search_figures(col, queries: Queries) -> dict:
    """Latency of dense (recall@10 against exact), 1%-filtered, BM25 and hybrid (phases; and with both sides on
    the caller's thread) search, one at a time."""
    from retriever.search.sides import SideThreads

    vectors, texts, n = queries.vectors, queries.texts, len(queries.vectors)
    exact = exact_top10(col, vectors)  # first: it reads every row
    for i, (vector, text) in enumerate(zip(queries.warm_vectors, queries.warm_texts)):  # a serving process's state
        col.search(text, vector=vector, k=10)
        col.search(vector=vector, k=10, where={"bucket": i % BUCKETS})
    found, counts = [], []
    dense = _timed(lambda i: found.append({hit.id for hit in col.search(vector=vectors[i], k=10)}), n)
    recall = float(np.mean([len(hits & truth) / max(1, len(truth)) for hits, truth in zip(found, exact)]))
    where = [{"bucket": i % BUCKETS} for i in range(n)]
    filtered = _timed(lambda i: counts.append(len(col.search(vector=vectors[i], k=10, where=where[i]))), n)
    bm25 = _timed(lambda i: col.search(texts[i], k=10, mode="bm25"), n)
    phases = Phases(col)
    hybrid = _timed(lambda i: col.search(texts[i], vector=vectors[i], k=10), n)
    phases_ms = phases.medians_ms()
    sides, col.searcher.sides = col.searcher.sides, SideThreads(helpers=0)  # both sides on the caller's thread
    try:
        one_thread = _timed(lambda i: col.search(texts[i], vector=vectors[i], k=10), n)
    finally:
        col.searcher.sides = sides
    return {
        "dense": _percentiles(dense) | {"recall_at_10": recall},
        "filtered_1pct": _percentiles(filtered) | {"min_hits": min(counts)},
        "bm25": _percentiles(bm25),
        "hybrid": _percentiles(hybrid) | {"phases_p50_ms": phases_ms, "one_thread": _percentiles(one_thread)},
    }


def exact_top10(col, vectors: np.ndarray) -> list[set[str]]:
    """Ids of each query vector's 10 best documents, as ``search(vector=v, k=10, exact=True)`` finds them, in one
    exact pass over each segment for all the queries (query by query, ten million rows would be read 300 times)."""
    from retriever.search.ranking import dense_rankings

    view = col.reader.current()
    rankings = dense_rankings(view, np.asarray(vectors, dtype=np.float32), 10, None, True, col.index_policy)
    rows = col.catalog.by_keys(sorted({key for ranked, _ in rankings for key, _ in ranked}))
    return [{rows[key].id for key, _ in ranked if key in rows} for ranked, _ in rankings]


def _timed(call, n: int) -> list[float]:
    times = []
    for i in range(n):
        began = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - began)
    return times


def _percentiles(times: list[float]) -> dict:
    ms = sorted(t * 1000 for t in times)
    return {"p50_ms": statistics.median(ms), "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))]}


def time_commits(path: Path, corpus: Corpus, commits: int) -> list[dict]:
    """Seconds and bytes written (new files and growth) of ``commits`` commits of 1,000 documents into ``path``."""
    from retriever import Collection

    out = []
    with Collection.open(path) as col:
        col.search(vector=corpus.vectors(0, 1)[0], k=1)  # the view loaded before the timings
        first = len(col)
        for c in range(commits):
            start = first + c * COMMIT_DOCS
            docs, vectors = corpus.documents(start, COMMIT_DOCS), corpus.vectors(start, COMMIT_DOCS)
            before, began = _files(path), time.perf_counter()
            col.add(docs, vectors=vectors)
            seconds = time.perf_counter() - began
            grown = [size - before.get(name, 0) for name, size in _files(path).items()]
            out.append({"seconds": seconds, "bytes_written": sum(g for g in grown if g > 0)})
    return out


def _files(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def main(argv=None) -> int:
    args = _arguments(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    real, query_vectors, texts = real_data(args.datasets, args.workdir / "real")
    queries = draw_queries(query_vectors, texts, args.queries, args.workdir / "real")
    corpus = Corpus(args.datasets, real)
    settings = {
        "codes": args.codes,
        "commit_docs": args.commit_docs,
        "queries": len(queries.texts),
        "warm_queries": len(queries.warm_texts),
        "real_chunks": len(real),
        "real_queries": len(texts),
        "corpus_rows": len(corpus.texts.rows),
    }
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    results = previous if previous.get("settings") == settings else {"settings": settings, "sizes": {}}
    results["machine"] = machine()
    print(f"machine: {results['machine']}\n{results['settings']}", flush=True)
    for n in sizes:
        path = args.workdir / f"n{n}-{args.codes}"
        row = results["sizes"].setdefault(str(n), {})
        complete = documents_in(path) >= n
        if complete and args.reuse:
            row.setdefault("build", {"reused": True})  # what built it, when this file saw it
        else:
            if complete:
                shutil.rmtree(path)
            print(f"building {n:,} documents in {path} ...", flush=True)
            row["build"] = build(path, n, corpus, args.codes, args.commit_docs)
        _write(results, args.out)
        for state in () if args.build_only else args.states:
            print(f"  measuring {n:,} {state} ...", flush=True)
            row[state] = measure(path, state, queries, corpus, args.commits)
            _write(results, args.out)
            scale_table.print_rows({str(n): {state: row[state]}})
    if not args.build_only:
        print(f"\nmachine: {results['machine']}")
        scale_table.print_rows(results["sizes"])
    return 0


def _arguments(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="collection sizes in documents (= chunks)")
    parser.add_argument("--commit-docs", type=int, default=20_000, help="documents per commit of the build")
    parser.add_argument("--queries", type=int, default=300, help="real queries for the search figures")
    parser.add_argument("--commits", type=int, default=3, help="timed commits of 1,000 documents per state")
    parser.add_argument(
        "--codes",
        default="compressed",
        choices=("float32", "compressed", "always"),
        help="IndexPolicy.codes of the collections (default compressed)",
    )
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--workdir", type=Path, default=BENCH / "scale")
    parser.add_argument("--out", type=Path, default=BENCH / "scale.json")
    parser.add_argument("--reuse", action="store_true", help="keep complete collections (else rebuilt)")
    parser.add_argument("--build-only", action="store_true", help="build (or resume) the collections, measure nothing")
    parser.add_argument(
        "--states",
        default=",".join(STATES),
        help="states to measure, of incremental,compacted (compacting writes the segments it "
        "merges beside the snapshot: up to a second copy of the collection)",
    )
    args = parser.parse_args(argv)
    args.states = [state for state in STATES if state in args.states.split(",")]
    return args


def _write(results: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".tmp").write_text(json.dumps(results, indent=2))
    out.with_suffix(".tmp").replace(out)


if __name__ == "__main__":
    sys.exit(main())
