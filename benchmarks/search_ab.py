"""Search latency of two versions of the code on one collection, taking turns.

    .venv/bin/python -m benchmarks.search_ab --base REV [--rounds 8] [--queries 300] [--no-record] [--page FILE]

For a change that must not slow searching down (a refactor, say): the commit
``REV`` is checked out into a temporary git worktree, and each round runs one
process with that tree's ``retriever`` and one with this checkout's, one after
the other, over the same collection (``runs/bench/scifact-ab``, built once
from ``../shared/datasets/scifact``) and the same SciFact queries. Each process
warms up on 20 queries, then times ``Collection.search`` per query, k=10, in
dense, hybrid and bm25 mode, and dense by vector. Taking turns round by round
lets load from elsewhere land on both alike; the table gives the median over
rounds of each run's p50, and every run's p50 so the spread shows. Prints the
CPU beside the figures and writes ``runs/bench/search_ab.json``, and a row of
the ratios (this / base) into the "Search latency, two versions" table of
docs/benchmarks.md (``benchmarks.results_page``; a later comparison of the same
two commits replaces it; ``--no-record`` leaves the page alone).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import results_page
from benchmarks.latency import BENCH, DEFAULT_DATASETS, REPO, build, load_jsonl

MODES = ("dense", "hybrid", "bm25", "by_vector")
#: The table of docs/benchmarks.md a run writes a row into, and the columns that tell its rows apart.
TABLE = "Search latency, two versions"
COLUMNS = ("this", "base", "dense", "hybrid", "bm25", "dense by vector", "command", "machine", "date")
KEYS = ("this", "base")

#: Run in a child process whose ``retriever`` is the tree under test (PYTHONPATH).
CHILD = """
import json, statistics, sys, time
from retriever import Collection

path, queries_file, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
queries = [json.loads(line)["text"] for line in open(queries_file, encoding="utf-8") if line.strip()][:n]
out = {}
with Collection.open(path) as col:
    for query in queries[:20]:
        col.search(query, k=10)
    runs = {mode: [{"mode": mode}, queries] for mode in ("dense", "hybrid", "bm25")}
    runs["by_vector"] = [{}, [{"vector": v} for v in col.embed(queries[:100])]]
    for name, (fixed, inputs) in runs.items():
        times = []
        for item in inputs:
            args = item if isinstance(item, dict) else {"query": item}
            started = time.perf_counter()
            col.search(k=10, **args, **fixed)
            times.append(time.perf_counter() - started)
        out[name] = 1000 * statistics.median(times)
print(json.dumps(out))
"""


def time_tree(tree: Path, collection: Path, queries: Path, n: int) -> dict[str, float]:
    """p50 milliseconds per mode of one child process running ``tree``'s code."""
    env = os.environ | {"PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(collection), str(queries), str(n)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def revision(rev: str = "HEAD", tree: Path = REPO) -> str:
    """``rev``'s short commit hash; for ``HEAD``, ``" + changes"`` after it where tracked files differ from it."""
    short = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    if rev != "HEAD":
        return short
    changed = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return f"{short} + changes" if changed else short


def table_row(runs: dict[str, list[dict]], this: str, base: str) -> dict:
    """The table's row of the commits ``this`` and ``base``: per mode, this checkout's median p50 over the
    base's, with both in ms."""
    row = {"this": this, "base": base}
    for mode, column in zip(MODES, COLUMNS[2:6]):
        a, b = (statistics.median(run[mode] for run in runs[name]) for name in ("base", "this"))
        row[column] = f"{b / a:.2f} ({a:.2f} → {b:.2f} ms)"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="search_ab", description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    results_page.add_options(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    results_page.check(args, TABLE, COLUMNS)
    this = revision()  # the code timed: the checkout as the run starts
    from retriever.encoding.backends.choice import describe_cpu

    scifact = args.datasets / "scifact"
    docs = [
        {"id": r["_id"], "title": r.get("title", ""), "text": r["text"]} for r in load_jsonl(scifact / "corpus.jsonl")
    ]
    collection = BENCH / "scifact-ab"
    build(collection, [doc for doc in docs if doc["text"].strip()])
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.base], check=True)
        try:
            runs: dict[str, list[dict]] = {"base": [], "this": []}
            for _ in range(args.rounds):
                for name, tree in (("base", base), ("this", REPO)):
                    runs[name].append(time_tree(tree, collection, scifact / "queries.jsonl", args.queries))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
    print(f"CPU: {describe_cpu()}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'mode':<10} {'base p50':>9} {'this p50':>9} {'ratio':>6}   runs (base | this), ms")
    for mode in MODES:
        a, b = (statistics.median(run[mode] for run in runs[name]) for name in ("base", "this"))
        spread = (
            " ".join(f"{run[mode]:.2f}" for run in runs["base"])
            + " | "
            + " ".join(f"{run[mode]:.2f}" for run in runs["this"])
        )
        print(f"{mode:<10} {a:>9.3f} {b:>9.3f} {b / a:>6.2f}   {spread}")
    BENCH.mkdir(parents=True, exist_ok=True)
    (BENCH / "search_ab.json").write_text(json.dumps({"base": args.base, "runs": runs}, indent=2) + "\n")
    results_page.record(
        args,
        TABLE,
        COLUMNS,
        KEYS,
        [table_row(runs, this, revision(args.base))],
        command=results_page.command_line("benchmarks.search_ab", argv),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
