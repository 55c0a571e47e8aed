"""Which FAISS index a large merged segment gets: exact, IVF (tuned) or HNSW, measured.

    .venv/bin/python -m benchmarks.index_choice [--rows 100000] [--queries 200]

On clustered synthetic 384-d unit vectors (as ``benchmarks.scale`` builds
them): build time, single-query p50 on one thread, recall@10 against exact
search, and the same with a filter that lets 1% of the rows through (FAISS's
bitmap selector, as the collection uses for filters and deletions). Prints a
table with the CPU model and flags. Run it alone.
"""

from __future__ import annotations

import argparse
import statistics
import time

import faiss
import numpy as np

from benchmarks.scale import DEFAULT_DATASETS, Corpus, machine
from retriever.search import vector_index


def _p50_recall(search, queries: np.ndarray, truth: list[set]) -> tuple[float, float]:
    times, recalls = [], []
    for q, expected in zip(queries, truth):
        began = time.perf_counter()
        rows = search(q[None, :])
        times.append(time.perf_counter() - began)
        recalls.append(len(set(rows.tolist()) & expected) / 10)
    return statistics.median(times) * 1000, float(np.mean(recalls))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    faiss.omp_set_num_threads(1)  # as a search runs; builds below set their own
    corpus = Corpus(DEFAULT_DATASETS)
    data, queries = corpus.vectors(args.rows), corpus.vectors(args.queries)
    allowed = np.random.default_rng(5).random(args.rows) < 0.01
    flat = faiss.IndexFlatIP(data.shape[1])
    flat.add(data)
    truth = [set(r.tolist()) for r in flat.search(queries, 10)[1]]
    kept = np.flatnonzero(allowed)
    sub = faiss.IndexFlatIP(data.shape[1])
    sub.add(data[kept])
    truth_filtered = [set(kept[r].tolist()) for r in sub.search(queries, 10)[1]]
    packed = np.packbits(allowed, bitorder="little")  # kept alive: the selector holds a raw pointer
    bitmap = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(packed))

    rows = []
    p50, recall = _p50_recall(lambda q: flat.search(q, 10)[1][0], queries, truth)
    rows.append(("flat (exact)", 0.0, "", p50, recall, float("nan"), float("nan")))

    faiss.omp_set_num_threads(2)
    began = time.perf_counter()
    ivf = vector_index.build(data, vector_index.IndexPolicy(ann_min_rows=1))
    ivf, info = ivf.index, ivf.info
    built = time.perf_counter() - began
    faiss.omp_set_num_threads(1)
    params = faiss.SearchParametersIVF(sel=bitmap, nprobe=ivf.nprobe)
    p50, recall = _p50_recall(lambda q: ivf.search(q, 10)[1][0], queries, truth)
    fp50, frecall = _p50_recall(lambda q: ivf.search(q, 10, params=params)[1][0], queries, truth_filtered)
    rows.append((f"IVF nlist {info['nlist']}, tuned nprobe {info['nprobe']}", built, "", p50, recall, fp50, frecall))

    for m in (16, 32):
        faiss.omp_set_num_threads(2)
        hnsw = faiss.IndexHNSWFlat(data.shape[1], m, faiss.METRIC_INNER_PRODUCT)
        began = time.perf_counter()
        hnsw.add(data)
        built = time.perf_counter() - began
        faiss.omp_set_num_threads(1)
        for ef in (32, 64, 128):
            hnsw.hnsw.efSearch = ef
            params = faiss.SearchParametersHNSW(sel=bitmap, efSearch=ef)
            p50, recall = _p50_recall(lambda q: hnsw.search(q, 10)[1][0], queries, truth)
            fp50, frecall = _p50_recall(lambda q: hnsw.search(q, 10, params=params)[1][0], queries, truth_filtered)
            rows.append((f"HNSW M {m}, efSearch {ef}", built, f"+{hnsw.ntotal * m * 2 * 4 / 1e6:.0f} MB graph",
                         p50, recall, fp50, frecall))

    print(f"machine: {machine()}")
    print(f"{args.rows:,} clustered 384-d vectors, {args.queries} queries near the data, k=10, one thread per query")
    print(f"{'index':<34} {'build':>8} {'memory':>16} {'p50':>9} {'recall':>7} {'1% filter p50':>14} {'recall':>7}")
    for name, built, memory, p50, recall, fp50, frecall in rows:
        print(f"{name:<34} {built:>6.1f} s {memory:>16} {p50:>6.2f} ms {recall:>7.3f} {fp50:>11.2f} ms {frecall:>7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
