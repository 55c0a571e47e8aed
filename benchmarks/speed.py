"""Speed of semsearch as ratios to the stock stack measured in the same run.

    .venv/bin/python -m benchmarks.speed [--quick] [--datasets DIR] [--out FILE] [--no-record] [--page FILE]

The stock stack is what a user would write by hand: sentence-transformers'
``encode`` (torch fp32) and a FAISS flat inner-product index; txtai is
measured too where it is installed. One run prints, each line with its ratio:

1. passage encoding: tokens/s on SciFact passages per backend, with its
   smallest cosine to stock torch fp32 (bf16 only where the CPU has it; the
   table says why not otherwise; int8 is lossy and marked so);
2. one-query encode p50 (stock vs ``Embedder`` as ``auto`` set it up);
3. search p50/p99 per mode on a SciFact collection (stock: encode + flat
   search over as many vectors as the collection has chunks; no stock hybrid
   exists, so hybrid is compared with stock dense);
4. search p50 with a CPU-bound process running beside it, against idle;
5. ``semsearch search`` from the shell: wall time and peak memory;
6. ``POST /search`` throughput and p99 at concurrency 1, 8 and 32, from one
   server process and from one per core (``serve --workers N``).

Stock and semsearch take turns, ten queries at a time (2 and 3), so that load
from elsewhere on the machine lands on both alike, and run before 1, which
loads every runtime into this process (a searching process holds one).

The CPU model and its relevant flags head the table: figures from different
CPUs are not comparable, and a machine shared with other work distorts them
(the load average is printed). Writes ``runs/bench/speed.json``, and the
table into docs/benchmarks.md ("Speed against the stock stack",
``benchmarks.results_page``: a run's rows replace those of the last run of
the same command). ``--quick`` uses fewer passages, queries and documents (a
smoke run, not a measurement, never written into the page); ``--no-record``
leaves the page alone.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Callable

from benchmarks import results_page
from benchmarks.latency import BENCH, DEFAULT_DATASETS, REPO, build, load_jsonl, served

#: What the issue asks of each figure (ratio to stock, or an absolute bound).
TARGETS = {
    "dense": "<= 0.4x stock",
    "hybrid": "<= 0.5x stock dense",
    "cli": "<= 1.5 s on 10k chunks",
    "passages": ">= 1.0x stock (>= 1.8x with bf16)",
    "serve8": ">= 150 req/s, p99 <= 100 ms",
    "load": "<= 3x idle p50",
}


#: Queries each stack answers before its timings (steady state: loaded, compiled and cached).
WARM_UP_QUERIES = 10

#: The table of docs/benchmarks.md a run writes (its printed table's columns, then the usual three); a run
#: replaces every row of the last run of the same command.
TABLE = "Speed against the stock stack"
COLUMNS = ("figure", "value", "vs stock", "detail", "note", "command", "machine", "date")
KEYS = ("command",)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def machine() -> dict:
    from retriever.encoding.backends.choice import cpu_info, has_bf16

    info = cpu_info()
    versions = {}
    for package in ("torch", "sentence-transformers", "onnxruntime", "openvino", "faiss-cpu", "txtai"):
        try:
            from importlib.metadata import version

            versions[package] = version(package)
        except Exception:  # noqa: BLE001 - not installed
            versions[package] = None
    return info | {"bf16": has_bf16(info), "load_average": os.getloadavg()[0], "versions": versions}


def passages_bench(texts: list[str], report: dict) -> list[tuple]:
    """Tokens/s per backend and the stock encode; min cosine to stock."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from retriever import Embedder
    from retriever.encoding.backends import LOSSY, SUPPORTED
    from retriever.encoding.backends.choice import has_bf16, min_cosine
    from retriever.encoding.embedder import resolve_model

    _, location = resolve_model(None)
    stock = SentenceTransformer(str(location), device="cpu")
    tokens = sum(stock.tokenizer(texts, truncation=True, max_length=256, return_length=True)["length"])

    def timed(encode) -> tuple[float, np.ndarray]:
        encode(texts[:8])  # warm-up
        best, vectors = float("inf"), None
        for _ in range(2):
            started = time.perf_counter()
            vectors = encode(texts)
            best = min(best, time.perf_counter() - started)
        return tokens / best, vectors

    stock_rate, reference = timed(lambda t: stock.encode(t, batch_size=32, normalize_embeddings=True))
    rows = [("passages: stock sentence-transformers fp32", f"{stock_rate:,.0f} tok/s", "1.00x", "", "")]
    report["passages"] = {"tokens": tokens, "stock_tokens_per_s": stock_rate, "backends": {}}
    for name in SUPPORTED:
        if "bf16" in name and not has_bf16():
            rows.append((f"passages: {name}", "skipped", "", "", "this CPU has no BF16 (avx512_bf16/amx_bf16)"))
            continue
        embedder = Embedder(backend=name)
        rate, vectors = timed(lambda t: embedder.embed(t))
        cosine = min_cosine(vectors, reference)
        report["passages"]["backends"][name] = {"tokens_per_s": rate, "min_cosine": cosine}
        note = "lossy, only when asked" if name in LOSSY else ""
        rows.append((f"passages: {name}", f"{rate:,.0f} tok/s", f"{rate / stock_rate:.2f}x", f"cos {cosine:.6f}", note))
    auto = Embedder()
    chosen = report["passages"]["backends"].get(auto.backend, {}).get("tokens_per_s")
    report["passages"]["auto"] = auto.info()
    bar = 1.8 if has_bf16() else 1.0
    rows.append(
        (
            f"passages: auto -> {auto.backend}",
            f"{chosen or 0:,.0f} tok/s",
            f"{(chosen or 0) / stock_rate:.2f}x",
            "",
            f"target >= {bar}x"
            + ("" if has_bf16() else " (no BF16 on this CPU: the 1.8x bar applies where it has BF16)"),
        )
    )
    return rows


def query_encode_bench(queries: list[str], report: dict) -> list[tuple]:
    from sentence_transformers import SentenceTransformer

    from retriever import Embedder
    from retriever.encoding.embedder import resolve_model

    stock = SentenceTransformer(str(resolve_model(None)[1]), device="cpu")
    ours = Embedder()

    times = interleaved_times(
        {"stock": lambda q: stock.encode([q], normalize_embeddings=True), "ours": lambda q: ours.embed([q])}, queries
    )
    stock_s, ours_s = statistics.median(times["stock"]), statistics.median(times["ours"])
    report["query_encode"] = {"stock_p50_s": stock_s, "p50_s": ours_s, "backend": ours.query_backend}
    return [
        ("one query encode p50: stock", ms(stock_s), "1.00x", "", ""),
        (f"one query encode p50: {ours.query_backend}", ms(ours_s), f"{ours_s / stock_s:.2f}x", "", ""),
    ]


def search_times(collection, queries: list[str], mode: str) -> list[float]:
    search = functools.partial(collection.search, k=10, mode=mode, evidence="none")
    return interleaved_times({mode: search}, queries)[mode]


def stock_searcher(chunks: int) -> Callable[[str], object]:
    """sentence-transformers encode + FAISS IndexFlatIP over ``chunks`` unit vectors, as one call per query.

    The vectors are random: a flat search costs the same whatever they hold.
    """
    import faiss
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from retriever.encoding.embedder import resolve_model

    model = SentenceTransformer(str(resolve_model(None)[1]), device="cpu")
    vectors = np.random.default_rng(0).standard_normal((chunks, 384)).astype(np.float32)
    faiss.normalize_L2(vectors)
    index = faiss.IndexFlatIP(384)
    index.add(vectors)
    return lambda query: index.search(model.encode([query], normalize_embeddings=True), 10)


def interleaved_times(
    searchers: dict[str, Callable[[str], object]], queries: list[str], block: int = 10
) -> dict[str, list[float]]:
    """Seconds per query for each searcher, taking turns a block of queries at a time (one searcher: in order).

    Each block of ``block`` queries is answered by every searcher in turn (the
    order rotating from block to block), so a burst of load from elsewhere on
    the machine lands on all of them alike and their ratios stay fair, while
    each searcher runs long enough to find its data in the CPU's caches, as
    it would serving on its own. Every searcher answers ``WARM_UP_QUERIES``
    queries first, untimed.
    """
    for search in searchers.values():
        for query in queries[:WARM_UP_QUERIES]:
            search(query)
    names = list(searchers)
    times: dict[str, list[float]] = {name: [] for name in names}
    for turn, start in enumerate(range(0, len(queries), block)):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            for query in queries[start : start + block]:
                started = time.perf_counter()
                searchers[name](query)
                times[name].append(time.perf_counter() - started)
    return times


def txtai_search_times(docs: list[dict], queries: list[str], hybrid: bool) -> list[float] | None:
    try:
        from txtai import Embeddings
    except ImportError:
        return None
    from retriever.encoding.embedder import resolve_model

    embeddings = Embeddings(path=str(resolve_model(None)[1]), hybrid=hybrid, content=True)
    embeddings.index([(d["id"], f"{d['title']}\n{d['text']}", None) for d in docs])
    return interleaved_times({"txtai": lambda query: embeddings.search(query, 10)}, queries)["txtai"]


def _burn(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def search_bench(path: Path, docs: list[dict], queries: list[str], report: dict) -> list[tuple]:
    from retriever import Collection

    rows = []
    with Collection.open(path) as collection:
        chunks = collection.info()["chunks"]
        searchers = (
            {"stock": stock_searcher(chunks)}
            | {  # ids and passages, as the stock stack returns
                mode: functools.partial(collection.search, k=10, mode=mode, evidence="none")
                for mode in ("dense", "hybrid", "bm25")
            }
            | {"hybrid + evidence": functools.partial(collection.search, k=10)}
        )  # the default: evidence "terms"
        times = interleaved_times(searchers, queries)
        stock_p50 = statistics.median(times["stock"])
        report["search"] = {
            "chunks": chunks,
            "interleaved": True,
            "stock_dense": {"p50_s": stock_p50, "p99_s": percentile(times["stock"], 0.99)},
        }
        rows.append(
            (
                f"search p50/p99: stock dense ({chunks:,} vectors)",
                f"{ms(stock_p50)} / {ms(percentile(times['stock'], 0.99))}",
                "1.00x",
                "",
                "",
            )
        )
        for mode in ("dense", "hybrid", "bm25", "hybrid + evidence"):
            p50 = statistics.median(times[mode])
            report["search"][mode] = {"p50_s": p50, "p99_s": percentile(times[mode], 0.99)}
            rows.append(
                (
                    f"search p50/p99: {mode}",
                    f"{ms(p50)} / {ms(percentile(times[mode], 0.99))}",
                    f"{p50 / stock_p50:.2f}x",
                    "",
                    f"target {TARGETS[mode]}" if mode in TARGETS else "",
                )
            )
        rows += txtai_rows(docs, queries, stock_p50, report)
        rows.append(under_load_row(collection, queries, report))
    return rows


def txtai_rows(docs: list[dict], queries: list[str], stock_p50: float, report: dict) -> list[tuple]:
    """txtai's dense and hybrid search p50 on the same documents, as ratios to the stock stack's."""
    rows = []
    for hybrid in (False, True):
        label = f"search p50: txtai {'hybrid' if hybrid else 'dense'}"
        try:
            times = txtai_search_times(docs, queries, hybrid)
        except Exception as exc:  # noqa: BLE001 - a failing comparison must not end the run
            rows.append((label, "failed", "", "", f"{type(exc).__name__}: {exc}"[:120]))
            continue
        if times is None:
            rows.append((label, "not installed", "", "", ""))
            break
        p50 = statistics.median(times)
        report["search"][f"txtai_{'hybrid' if hybrid else 'dense'}"] = {"p50_s": p50}
        rows.append((label, ms(p50), f"{p50 / stock_p50:.2f}x", "", ""))
    return rows


def under_load_row(collection, queries: list[str], report: dict) -> tuple:
    """Dense search p50 while one CPU-bound process runs beside, as a ratio to the idle p50."""
    idle = report["search"]["dense"]["p50_s"]
    burner = multiprocessing.get_context("spawn").Process(target=_burn, args=(time.time() + 600,), daemon=True)
    burner.start()
    try:
        time.sleep(0.5)
        loaded = statistics.median(search_times(collection, queries, "dense"))
    finally:
        burner.terminate()
        burner.join()
    report["search"]["dense_under_load_p50_s"] = loaded
    return (
        "search p50: dense, one CPU-bound process beside",
        ms(loaded),
        f"{loaded / idle:.2f}x idle",
        "",
        f"target {TARGETS['load']}",
    )


#: Runs the CLI's search and prints its own peak memory: a child's rusage would also count
#: the parent's pages from before the exec.
_PEAK_PROBE = (
    "import sys\n"
    "from app.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
    "print(int(hwm[0].split()[1]) // 1024 if hwm else -1, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def cli_bench(path: Path, report: dict, runs: int) -> list[tuple]:
    walls = []
    for i in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "app.cli", "search", f"protein structure {i}", "-c", str(path)],
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        walls.append(time.perf_counter() - started)
    probe = subprocess.run(
        [sys.executable, "-c", _PEAK_PROBE, "search", "protein structure", "-c", str(path)],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak_mb = int(probe.stderr.strip().splitlines()[-1])
    wall = statistics.median(walls)
    report["cli"] = {"wall_s": wall, "peak_mb": peak_mb, "runs": runs}
    return [
        (
            "semsearch search (shell, whole process)",
            f"{wall:.2f} s wall",
            "",
            f"peak {peak_mb} MB",
            f"target {TARGETS['cli']}",
        )
    ]


def serve_bench(path: Path, queries: list[str], report: dict, requests: int, workers: int = 1) -> list[tuple]:
    """``POST /search`` at concurrency 1, 8 and 32 against ``semsearch serve --workers workers``."""
    rows = []
    served_as = "" if workers == 1 else f", {workers} workers"
    report.setdefault("serve", {})
    with served(path, options=("--workers", str(workers))) as (port, conn):
        for concurrency in (1, 8, 32):
            latencies: list[float] = []
            lock = threading.Lock()
            per_worker = max(1, requests // concurrency)

            def worker(offset: int) -> None:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                for i in range(per_worker):
                    body = json.dumps({"query": queries[(offset + i) % len(queries)], "k": 10})
                    started = time.perf_counter()
                    connection.request("POST", "/search", body, {"Content-Type": "application/json"})
                    response = connection.getresponse()
                    response.read()
                    if response.status != 200:
                        raise RuntimeError(f"/search answered {response.status}")
                    with lock:
                        latencies.append(time.perf_counter() - started)
                connection.close()

            worker(0)  # warm-up
            latencies.clear()
            threads = [threading.Thread(target=worker, args=(n * per_worker,)) for n in range(concurrency)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            rate = len(latencies) / (time.perf_counter() - started)
            p99 = percentile(latencies, 0.99)
            report["serve"][f"{concurrency}{served_as}"] = {
                "requests_per_s": rate,
                "p99_s": p99,
                "requests": len(latencies),
            }
            rows.append(
                (
                    f"POST /search, concurrency {concurrency} (hybrid{served_as})",
                    f"{rate:.0f} req/s",
                    "",
                    f"p99 {ms(p99)}",
                    f"target {TARGETS['serve8']}" if concurrency == 8 else "",
                )
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--quick", action="store_true", help="a smoke run: few passages, queries and documents")
    parser.add_argument("--out", type=Path, default=BENCH / "speed.json")
    results_page.add_options(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.no_record = args.no_record or args.quick  # a smoke run's figures are no measurement
    results_page.check(args, TABLE, COLUMNS)
    warnings.filterwarnings("ignore", category=UserWarning)  # passages over the window are cut, as in stock
    scifact = args.datasets / "scifact"
    if not (scifact / "corpus.jsonl").exists():
        print(f"benchmarks.speed: {scifact} not found", file=sys.stderr)
        return 2
    n_docs, n_passages, n_queries, n_requests, cli_runs = (
        (1000, 64, 30, 64, 2) if args.quick else (None, 256, 100, 640, 5)
    )
    corpus = load_jsonl(scifact / "corpus.jsonl", n_docs)
    docs = [{"id": r["_id"], "title": r.get("title", ""), "text": r["text"]} for r in corpus]
    queries = [q["text"] for q in load_jsonl(scifact / "queries.jsonl")][:n_queries]
    passages = [d["text"] for d in docs[:n_passages]]

    from retriever.encoding.backends.choice import describe_cpu

    report: dict = {"machine": machine(), "quick": args.quick}
    m = report["machine"]
    print(f"CPU: {describe_cpu(m)}; BF16 {'yes' if m['bf16'] else 'no'}; load average {m['load_average']:.1f} at start")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v))
    path = BENCH / ("scifact-speed-quick" if args.quick else "scifact-speed")
    build(path, docs)
    rows = query_encode_bench(queries, report)
    rows += search_bench(path, docs, queries, report)
    rows = passages_bench(passages, report) + rows
    rows += cli_bench(path, report, cli_runs)
    rows += serve_bench(path, queries, report, n_requests)
    if m["cores"] > 1:  # one worker process per core: each its own encoder thread and interpreter lock
        rows += serve_bench(path, queries, report, n_requests, workers=m["cores"])
    report["load_average_end"] = os.getloadavg()[0]

    widths = [max(len(str(row[i])) for row in rows) for i in range(4)]
    print(f"\n{'figure':<{widths[0]}}  {'value':<{widths[1]}}  {'vs stock':<{widths[2]}}  {'':<{widths[3]}}  note")
    print("  ".join("-" * w for w in widths) + "  ----")
    for row in rows:
        print("  ".join(f"{str(cell):<{w}}" for cell, w in zip(row, widths)) + f"  {row[4]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    print(
        f"\n{'QUICK smoke run: too few samples to judge the targets. ' if args.quick else ''}"
        f"Load average {report['load_average_end']:.1f} at the end on {m['cores']} cores; written to {args.out}"
    )
    results_page.record(
        args,
        TABLE,
        COLUMNS,
        KEYS,
        [dict(zip(COLUMNS, map(str, row))) for row in rows],
        command=results_page.command_line("benchmarks.speed", argv),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
