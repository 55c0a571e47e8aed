"""How the engine's costs grow with the collection: commits, searches, memory and disk.

    .venv/bin/python -m benchmarks.scale [--sizes 10000,100000,1000000] [--commits 5] [--queries 200]

Collections are built from synthetic 384-dimensional unit vectors (no hours of
encoding) through ``Collection.add(documents, vectors=...)``, with texts of
real length: SciFact's abstracts, reused in turn (synthetic words where the
shared datasets are absent). Vectors are clustered as embeddings of topical
text are (2,000 centres, noise of the same scale), and queries are drawn near
the data the same way. Each document is one chunk, so N documents are N chunks.

For every size the base collection is compacted into one segment (as a
nightly ``semsearch compact`` leaves it); then ``--commits`` commits of 1,000
documents each are timed. At the largest size it measures dense search
(query vectors given: encoding excluded) p50/p99 and recall@10 against
``exact=True``, hybrid p50, filtered dense search at 1% selectivity, the
resident memory of a fresh reader process after its searches, and the size
on disk against the raw vectors. Prints a table and writes
``runs/bench/scale.json``. Run it alone: two CPU-heavy jobs distort both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "runs" / "bench"
DEFAULT_DATASETS = REPO.parent / "shared" / "datasets"
DIM = 384
CENTRES = 2_000
BATCH = 50_000
COMMIT_DOCS = 1_000


def machine() -> str:
    """CPU model, available cores and the SIMD flags that matter for FAISS and encoders."""
    from retriever.encoding.backends.choice import describe_cpu

    return describe_cpu()


class Corpus:
    """Texts of real length and clustered vectors, reproducible from a seed."""

    def __init__(self, datasets: Path, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.centres = self._unit(np.random.default_rng(1234).normal(size=(CENTRES, DIM)))
        self.texts, self.titles = self._texts(datasets)

    @staticmethod
    def _unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    def _texts(self, datasets: Path) -> tuple[list[str], list[str]]:
        corpus = datasets / "scifact" / "corpus.jsonl"
        if corpus.is_file():
            rows = [json.loads(line) for line in corpus.open(encoding="utf-8")]
            rows = [r for r in rows if r.get("text", "").strip()]
            return [r["text"] for r in rows], [r.get("title", "") for r in rows]
        words = "cell protein gene expression patients study results cancer risk model data analysis".split()
        rng = np.random.default_rng(7)
        texts = [" ".join(rng.choice(words, size=int(rng.lognormal(5.3, 0.4)))) for _ in range(5000)]
        return texts, [f"document {i}" for i in range(len(texts))]

    def vectors(self, n: int) -> np.ndarray:
        """``(n, 384)`` unit vectors near random centres."""
        centres = self.centres[self.rng.integers(0, CENTRES, n)]
        return self._unit(centres + self.rng.normal(scale=1.0 / np.sqrt(DIM), size=(n, DIM)))

    def documents(self, start: int, n: int) -> list[dict]:
        m = len(self.texts)
        return [
            {
                "id": f"doc-{i}",
                "title": self.titles[i % m],
                "text": self.texts[i % m],
                "metadata": {"bucket": i % 100, "year": 1990 + i % 30},
            }
            for i in range(start, start + n)
        ]


def build(path: Path, n: int, corpus: Corpus, embedder) -> float:
    """A collection of ``n`` one-chunk documents, compacted into one segment; returns seconds."""
    from retriever import Collection

    began = time.perf_counter()
    with Collection.create(path, embedder) as col:
        for start in range(0, n, BATCH):
            size = min(BATCH, n - start)
            col.add(corpus.documents(start, size), vectors=corpus.vectors(size))
            print(f"    {start + size:>9,} / {n:,} documents  {time.perf_counter() - began:7.1f} s", flush=True)
        col.compact()
    return time.perf_counter() - began


def time_commits(path: Path, corpus: Corpus, commits: int) -> list[tuple[float, int]]:
    """Seconds and bytes written of each commit of 1,000 new documents into the collection at ``path``."""
    from retriever import Collection

    out = []
    with Collection.open(path) as col:
        col.search(vector=corpus.vectors(1)[0], k=1)  # the reader's view is loaded before the timings
        first = len(col)
        for c in range(commits):
            docs = corpus.documents(first + c * COMMIT_DOCS, COMMIT_DOCS)
            vectors = corpus.vectors(COMMIT_DOCS)
            before = _files(path)
            began = time.perf_counter()
            col.add(docs, vectors=vectors)
            seconds = time.perf_counter() - began
            after = _files(path)
            # new files whole; files that grew (the catalog, its log) by their growth
            written = sum(size - before.get(name, 0) for name, size in after.items() if size > before.get(name, 0))
            out.append((seconds, written))
    return out


def _files(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def search_figures(path: Path, corpus: Corpus, queries: int) -> dict:
    """Latency and recall of dense, hybrid and filtered search in this process."""
    from retriever import Collection

    rng = np.random.default_rng(99)
    vectors = corpus.vectors(queries)
    words = [t.split() for t in corpus.texts[:queries]]
    texts = [" ".join(w[j] for j in sorted(rng.choice(len(w), size=min(4, len(w)), replace=False))) for w in words]
    out: dict = {}
    with Collection.open(path) as col:
        col.search(vector=vectors[0], k=10)  # load the view outside the timings
        exact = [{h.id for h in col.search(vector=v, k=10, exact=True)} for v in vectors]

        def dense() -> dict:
            times, recalls = [], []
            for v, truth in zip(vectors, exact):
                began = time.perf_counter()
                hits = col.search(vector=v, k=10)
                times.append(time.perf_counter() - began)
                recalls.append(len({h.id for h in hits} & truth) / 10)
            return _percentiles(times) | {"recall_at_10": float(np.mean(recalls))}

        out["dense"] = dense()
        # how latency would grow on data that needs more probes (real MiniLM
        # embeddings of SciFact needed 16 of 128 lists): the same searches, nprobe forced
        ivf = [p.segment.index.index for p in col.reader.current().parts if p.segment.index_type == "ivf"]
        tuned = [index.nprobe for index in ivf]
        out["dense_nprobe"] = {}
        for nprobe in (8, 32, 128):
            for index in ivf:
                index.nprobe = min(nprobe, index.nlist)
            out["dense_nprobe"][nprobe] = dense()
        for index, value in zip(ivf, tuned):
            index.nprobe = value
        out["hybrid"] = _percentiles(_timed(lambda i: col.search(texts[i], vector=vectors[i], k=10), queries))
        out["bm25"] = _percentiles(_timed(lambda i: col.search(texts[i], k=10, mode="bm25"), queries))
        filtered_counts = []

        def filtered(i):
            hits = col.search(vector=vectors[i], k=10, where={"bucket": int(i % 100)})
            filtered_counts.append(len(hits))

        out["filtered_1pct"] = _percentiles(_timed(filtered, queries)) | {"min_hits": min(filtered_counts)}
        out["segments"] = [(s["chunks"], s["index"]) for s in col.info()["segments"]]
    return out


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


def demo_figures(path: Path, rounds: int = 30) -> dict:
    """Search latency on the standard-library demo (``make demo``), query encoding excluded.

    BM25 needs no encoding; for dense and hybrid each query's vector is
    computed once beforehand and passed in, so the time is the ranking and
    snippet work after encoding.
    """
    from indexer.stdlib_docs import QUERIES
    from retriever import Collection

    out: dict = {}
    with Collection.open(path) as col:
        vectors = {query: col.embed([query])[0] for query, _ in QUERIES}
        col.search(QUERIES[0][0], k=3, mode="bm25")
        for mode in ("bm25", "dense", "hybrid"):
            times = []
            for _ in range(rounds):
                for query, where in QUERIES:
                    kwargs = {"k": 3, "where": where, "mode": mode}
                    if mode != "bm25":
                        kwargs["vector"] = vectors[query]
                    began = time.perf_counter()
                    col.search(query, **kwargs)
                    times.append(time.perf_counter() - began)
            out[mode] = _percentiles(times)
        out["documents"], out["chunks"] = col.catalog.counts()
    return out


READER = """
import sys, json, numpy as np
from retriever import Collection
col = Collection.open(sys.argv[1])
rng = np.random.default_rng(5)
for _ in range(int(sys.argv[2])):
    v = rng.normal(size=384).astype("float32")
    col.search(vector=v, k=10)
    col.search("protein expression in cancer cells", vector=v, k=10)
status = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(("VmRSS", "RssAnon", "RssFile"))}
print(json.dumps({"rss_bytes": status["VmRSS"], "private_bytes": status.get("RssAnon"), "file_bytes": status.get("RssFile")}))
"""


def reader_memory(path: Path, searches: int) -> dict:
    """Resident memory of a fresh process that opened the collection and searched.

    Returns:
        ``{"rss_bytes", "private_bytes", "file_bytes"}``: all resident pages, the
        process's own (anonymous) ones, and mapped file pages (shared between
        processes serving one collection, and reclaimable by the kernel).
    """
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-c", READER, str(path), str(searches)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="collection sizes in chunks")
    parser.add_argument("--commits", type=int, default=5, help="timed commits of 1,000 documents per size")
    parser.add_argument("--queries", type=int, default=200, help="queries for the search figures")
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--workdir", type=Path, default=BENCH / "scale")
    parser.add_argument("--reuse", action="store_true", help="measure collections a previous run built (no rebuild)")
    parser.add_argument("--build-only", action="store_true", help="build the collections, measure nothing")
    parser.add_argument("--demo", type=Path, default=REPO / ".demo" / "collection",
                        help="the standard-library demo collection to time (skipped when absent; make demo builds it)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    from retriever import Collection, Embedder

    embedder = Embedder()  # the model identity only: nothing is encoded
    corpus = Corpus(args.datasets)
    print(f"machine: {machine()}")
    results: dict = {"machine": machine(), "sizes": {}}
    for n in sizes:
        path = args.workdir / f"n{n}"
        if args.reuse and (path / "manifest.json").exists():
            build_seconds = None  # built by an earlier run
        else:
            if path.exists():
                shutil.rmtree(path)
            print(f"building {n:,} chunks ...", flush=True)
            build_seconds = build(path, n, corpus, embedder)
        if args.build_only:
            continue
        commits = time_commits(path, corpus, args.commits)
        results["sizes"][n] = {
            "build_s": build_seconds,
            "commit_s": [c[0] for c in commits],
            "commit_bytes": [c[1] for c in commits],
        }
        print(f"  commit of 1,000 into {n:,}: median {statistics.median(c[0] for c in commits) * 1000:.0f} ms", flush=True)
    if args.build_only:
        return 0
    largest = max(sizes)
    path = args.workdir / f"n{largest}"
    corpus = Corpus(args.datasets, seed=1)
    figures = search_figures(path, corpus, args.queries)
    memory = reader_memory(path, args.queries)
    figures["reader_rss_bytes"] = memory["rss_bytes"]
    figures["reader_private_bytes"] = memory["private_bytes"]
    figures["disk_bytes"] = sum(_files(path).values())
    with Collection.open(path) as col:
        figures["raw_vector_bytes"] = col.catalog.counts()[1] * DIM * 4
    results["largest"] = {"chunks": largest, **figures}
    if (args.demo / "manifest.json").exists():
        results["demo"] = demo_figures(args.demo)
    BENCH.mkdir(parents=True, exist_ok=True)
    (BENCH / "scale.json").write_text(json.dumps(results, indent=2))
    print_table(results)
    return 0


def print_table(results: dict) -> None:
    print(f"\nmachine: {results['machine']}")
    base = None
    print(f"{'collection (chunks)':>20}  {'commit 1,000 p50':>16}  {'vs smallest':>11}  {'bytes written':>13}  {'build':>8}")
    for n, row in results["sizes"].items():
        median = statistics.median(row["commit_s"])
        base = base or median
        written = statistics.median(row["commit_bytes"])
        build = "reused" if row["build_s"] is None else f"{row['build_s']:.0f} s"
        print(f"{int(n):>20,}  {median * 1000:>13.0f} ms  {median / base:>10.2f}x  {written / 1e6:>10.2f} MB  {build:>8}")
    big = results["largest"]
    print(f"\nat {big['chunks']:,} chunks (+ the commits), segments: {big['segments']}")
    dense = big["dense"]
    print(f"  dense    p50 {dense['p50_ms']:6.2f} ms  p99 {dense['p99_ms']:6.2f} ms  recall@10 vs exact {dense['recall_at_10']:.3f}")
    for nprobe, row in big.get("dense_nprobe", {}).items():
        print(f"  dense, nprobe forced to {nprobe:>3}: p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:6.2f} ms  "
              f"recall@10 {row['recall_at_10']:.3f}")
    for mode in ("hybrid", "bm25", "filtered_1pct"):
        row = big[mode]
        extra = f"  fewest hits {row['min_hits']}" if "min_hits" in row else ""
        print(f"  {mode:<8} p50 {row['p50_ms']:6.2f} ms  p99 {row['p99_ms']:6.2f} ms{extra}")
    print(
        f"  reader RSS {big['reader_rss_bytes'] / 1e9:.2f} GB (private {(big.get('reader_private_bytes') or 0) / 1e9:.2f} GB, "
        f"the rest shared file pages), disk {big['disk_bytes'] / 1e9:.2f} GB, "
        f"raw vectors {big['raw_vector_bytes'] / 1e9:.2f} GB"
    )
    if "demo" in results:
        demo = results["demo"]
        print(f"\nstandard-library demo ({demo['documents']} documents, {demo['chunks']} chunks), query encoding excluded:")
        for mode in ("bm25", "dense", "hybrid"):
            print(f"  {mode:<8} p50 {demo[mode]['p50_ms']:6.2f} ms  p99 {demo[mode]['p99_ms']:6.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
