"""Which FAISS index a large merged segment gets: exact, IVF (tuned), IVF over compressed codes, or HNSW.

    .venv/bin/python -m benchmarks.index_choice [--rows 100000] [--queries 200] [--vectors real|clustered]
        [--no-hnsw] [--no-record] [--page FILE]

``--vectors real`` (the default where ../shared/datasets holds the BEIR sets):
vectors shaped like real all-MiniLM-L6-v2 chunk embeddings and *real query
embeddings* (``benchmarks.real_shaped``), so recall is that of queries, not of
probes near the data; ``clustered``: synthetic clusters with queries drawn
near them (``real_shaped.clustered``). Build time, single-query p50
on one thread, recall@10 against exact search, and the same with a filter
that lets 1% of the rows through (FAISS's bitmap selector, as the collection
uses for filters and deletions). IVF rows are measured at the tuned nprobe and
at larger ones; compressed rows through ``vector_index.search`` (codes, then
exact rescoring). Prints a table with the CPU model and flags, and writes it
into the "Vector indexes" section of docs/benchmarks.md
(``benchmarks.results_page``: a run's rows replace those of the last run with
the same settings; ``--no-record`` leaves the page alone, ``--page`` names
another copy). Run it alone.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import faiss
import numpy as np

from benchmarks import results_page
from benchmarks.real_shaped import clustered
from benchmarks.scale import DEFAULT_DATASETS, machine
from retriever.search import vector_index

#: The table of docs/benchmarks.md a run writes; a run replaces every row of the last run of the same command.
TABLE = "Vector indexes"
COLUMNS = (
    "index",
    "build",
    "memory",
    "p50",
    "recall@10",
    "1% filter p50",
    "recall@10, 1% filter",
    "command",
    "machine",
    "date",
)
KEYS = ("command",)


def _p50_recall(search, queries: np.ndarray, truth: list[set]) -> tuple[float, float]:
    times, recalls = [], []
    for q, expected in zip(queries, truth):
        began = time.perf_counter()
        rows = search(q[None, :])
        times.append(time.perf_counter() - began)
        recalls.append(len(set(rows.tolist()) & expected) / 10)
    return statistics.median(times) * 1000, float(np.mean(recalls))


def _workload(args) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, queries)``: real-shaped vectors and real query embeddings, or clustered ones."""
    if args.vectors == "real":
        from benchmarks.real_shaped import RealShaped, describe, real_embeddings

        real, real_queries = real_embeddings(DEFAULT_DATASETS)
        data = RealShaped(real).sample(args.rows)
        queries = real_queries[np.random.default_rng(3).choice(len(real_queries), args.queries, replace=False)]
        print(
            f"real-shaped from {len(real):,} real chunks, {len(real_queries):,} real queries: "
            f"{describe(real, data, real_queries)}"
        )
    else:
        points = clustered(args.rows + args.queries)
        data, queries = points[: args.rows], points[args.rows :]
    return data, queries


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--vectors",
        choices=("real", "clustered"),
        default="real" if (DEFAULT_DATASETS / "scifact" / "corpus.jsonl").is_file() else "clustered",
    )
    parser.add_argument("--no-hnsw", action="store_true", help="leave HNSW out (its builds take minutes)")
    results_page.add_options(parser)
    args = parser.parse_args(argv)
    results_page.check(args, TABLE, COLUMNS)
    data, queries = _workload(args)
    faiss.omp_set_num_threads(1)  # as a search runs; builds below set their own
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
    for factor in (2, 4):
        wide = faiss.SearchParametersIVF(nprobe=min(ivf.nlist, info["nprobe"] * factor))
        p50, recall = _p50_recall(lambda q: ivf.search(q, 10, params=wide)[1][0], queries, truth)
        rows.append((f"  nprobe {wide.nprobe}", 0.0, "", p50, recall, float("nan"), float("nan")))
    rows += _compressed_rows(data, queries, truth, allowed, truth_filtered)
    if not args.no_hnsw:
        rows += _hnsw_rows(data, queries, truth, bitmap, truth_filtered)
    _print(args, rows)
    record(args, rows)
    return 0


def record(args, rows: list[tuple]) -> None:
    """Write the printed table into the page, its command with every setting the run used."""
    command = (
        f"python -m benchmarks.index_choice --rows {args.rows} --queries {args.queries} --vectors {args.vectors}"
        + (" --no-hnsw" if args.no_hnsw else "")
    )

    table = [  # a build of 0 s: the index of the row above; NaN: not measured
        {
            "index": name.strip(),
            "build": f"{built:.1f} s" if built else "-",
            "memory": memory or "-",
            "p50": f"{p50:.2f} ms",
            "recall@10": f"{recall:.3f}",
            "1% filter p50": "-" if math.isnan(fp50) else f"{fp50:.2f} ms",
            "recall@10, 1% filter": "-" if math.isnan(frecall) else f"{frecall:.3f}",
        }
        for name, built, memory, p50, recall, fp50, frecall in rows
    ]
    results_page.record(args, TABLE, COLUMNS, KEYS, table, command=command)


def _hnsw_rows(data, queries, truth, bitmap, truth_filtered) -> list[tuple]:
    """HNSW at two graph degrees and three search widths."""
    rows = []
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
            rows.append(
                (
                    f"HNSW M {m}, efSearch {ef}",
                    built,
                    f"+{hnsw.ntotal * m * 2 * 4 / 1e6:.0f} MB graph",
                    p50,
                    recall,
                    fp50,
                    frecall,
                )
            )

    return rows


def _compressed_rows(data, queries, truth, allowed, truth_filtered) -> list[tuple]:
    """IVF over RaBitQ codes, rescored, at its tuned nprobe and wider, for two rescoring factors."""
    rows = []
    n_allowed = int(allowed.sum())
    for rescore in (10, 25):
        policy = vector_index.IndexPolicy(ann_min_rows=1, codes="compressed", rescore=rescore)
        faiss.omp_set_num_threads(2)
        began = time.perf_counter()
        built_index = vector_index.build(data, policy)
        built = time.perf_counter() - began
        faiss.omp_set_num_threads(1)
        codes = faiss.serialize_index(built_index.index).nbytes
        info, tuned = built_index.info, built_index.index.nprobe
        for factor in (1, 2, 4):
            built_index.index.nprobe = min(built_index.index.nlist, tuned * factor)
            p50, recall = _p50_recall(
                lambda q: vector_index.search(built_index, q, 10, None, len(data), policy)[1][0], queries, truth
            )
            fp50, frecall = _p50_recall(
                lambda q: vector_index.search(built_index, q, 10, allowed, n_allowed, policy)[1][0],
                queries,
                truth_filtered,
            )
            name = (
                f"RaBitQ IVF {info['nlist']}, nprobe {built_index.index.nprobe}"
                f"{' (tuned)' if factor == 1 else ''}, rescore {rescore}x"
            )
            rows.append(
                (
                    name,
                    built if factor == 1 else 0.0,
                    f"{codes / 1e6:.0f} MB codes" if factor == 1 else "",
                    p50,
                    recall,
                    fp50,
                    frecall,
                )
            )
    return rows


def _print(args, rows) -> None:
    print(f"machine: {machine()}")
    what = (
        "real-shaped 384-d vectors, real queries"
        if args.vectors == "real"
        else "clustered 384-d vectors, queries near the data"
    )
    print(f"{args.rows:,} {what} ({args.queries}), k=10, one thread per query")
    print(f"{'index':<46} {'build':>8} {'memory':>16} {'p50':>9} {'recall':>7} {'1% filter p50':>14} {'recall':>7}")
    for name, built, memory, p50, recall, fp50, frecall in rows:
        print(f"{name:<46} {built:>6.1f} s {memory:>16} {p50:>6.2f} ms {recall:>7.3f} {fp50:>11.2f} ms {frecall:>7.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
