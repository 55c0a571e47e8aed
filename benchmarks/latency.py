"""Query latency of the Streamlit UI and the HTTP API, with the packaged MiniLM.

    .venv/bin/python -m benchmarks.latency [--datasets DIR] [--requests 50] [--ui-queries 20]

Builds two collections once (kept under ``runs/bench/``) from
``../shared/datasets/scifact``:

- ``scifact500``: the first 500 abstracts, whole (about 930 chunks);
- ``short10k``: 10,366 short documents, each scifact title and each abstract's
  first sentence: ten thousand documents that embed in minutes on a CPU.

Then measures, with scifact's queries (a new query each time, so no cache helps):

- UI: ``app/ui/page.py`` driven by Streamlit's AppTest; the search time the page
  shows (the ``Collection.search`` call) and the wall time of the whole script
  rerun that renders the results;
- API: ``semsearch serve`` on a loopback port, ``POST /search`` over HTTP on
  one keep-alive connection, per search mode.

Prints a table and writes ``runs/bench/latency.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "runs" / "bench"
DEFAULT_DATASETS = REPO.parent / "shared" / "datasets"


def load_jsonl(path: Path, limit: int | None = None) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(json.loads(line))
                if limit and len(rows) == limit:
                    break
    return rows


def first_sentence(text: str) -> str:
    match = re.match(r"(.{40,400}?[.!?])\s", text + " ")
    return match.group(1) if match else text[:300]


def build(path: Path, docs: list[dict]) -> None:
    from retriever import Collection

    if (path / "manifest.json").exists():
        with Collection.open(path) as col:
            if len(col) == len(docs):
                return
    started = time.perf_counter()
    with Collection.open_or_create(path) as col:
        for at in range(0, len(docs), 1000):
            col.upsert(docs[at : at + 1000])
            print(f"  {path.name}: {min(at + 1000, len(docs)):,}/{len(docs):,} documents", file=sys.stderr)
    print(f"  built {path.name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def collections(datasets: Path) -> dict[str, Path]:
    corpus = load_jsonl(datasets / "scifact" / "corpus.jsonl")
    whole = [{"id": r["_id"], "title": r.get("title", ""), "text": r["text"]} for r in corpus[:500]]
    short = [
        {"id": f"t{r['_id']}", "text": r["title"], "metadata": {"part": "title"}} for r in corpus if r.get("title")
    ]
    short += [
        {"id": f"s{r['_id']}", "text": first_sentence(r["text"]), "metadata": {"part": "sentence"}}
        for r in corpus
        if r.get("text")
    ]
    paths = {"scifact500": BENCH / "scifact500", "short10k": BENCH / "short10k"}
    build(paths["scifact500"], whole)
    build(paths["short10k"], short)
    return paths


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values) * 1000, 1),
        "p95_ms": round(ordered[max(0, int(round(0.95 * len(ordered))) - 1)] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def ui_latency(path: Path, queries: list[str]) -> dict:
    from streamlit.testing.v1 import AppTest

    os.environ["SEMSEARCH_UI_COLLECTION"] = str(path)
    at = AppTest.from_file(str(REPO / "app" / "ui" / "page.py"), default_timeout=300)
    at.query_params["q"] = "warm up the model and the index"
    at.run()
    shown, rerun = [], []
    for query in queries:
        started = time.perf_counter()
        at.text_input(key="q").set_value(query).run()
        rerun.append(time.perf_counter() - started)
        page = " ".join(str(e.value) for e in at.get("html"))
        match = re.search(r"result[s]? · (\d+) ms", page)
        if at.exception or not match:
            raise RuntimeError(f"UI showed no results for {query!r}: {[e.value for e in at.exception]}")
        shown.append(int(match.group(1)) / 1000)
    return {"search_shown": summary(shown), "script_rerun": summary(rerun)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def served(
    path: Path, env: dict | None = None, options: tuple[str, ...] = ()
) -> Iterator[tuple[int, http.client.HTTPConnection]]:
    """``semsearch serve -c path [options]`` on a free loopback port, up and answering (every worker ready).

    Yields:
        ``(port, connection)``: the port and one keep-alive connection to it.
    """
    port = free_port()
    env = {k: v for k, v in (env or os.environ).items() if k != "SEMSEARCH_API_KEY"}
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "-c", str(path), "--port", str(port), *options],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        conn = None
        deadline = time.monotonic() + 180
        while conn is None:
            try:
                probe = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                probe.request("GET", "/health")
                workers = json.loads(probe.getresponse().read()).get("workers", {"ready": 1, "of": 1})
                if workers["ready"] >= workers["of"]:  # with --workers N, once every one has loaded
                    conn = probe
                else:
                    probe.close()
                    if time.monotonic() > deadline:
                        raise RuntimeError("the API server's workers did not all start")
                    time.sleep(0.3)
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the API server did not start") from None
                time.sleep(0.3)
        yield port, conn
    finally:
        server.terminate()
        server.wait(timeout=30)


def api_latency(path: Path, queries: list[str], modes: list[str]) -> dict:
    with served(path) as (_, conn):

        def search(query: str, mode: str) -> float:
            body = json.dumps({"query": query, "k": 10, "mode": mode})
            started = time.perf_counter()
            conn.request("POST", "/search", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            payload = response.read()
            took = time.perf_counter() - started
            if response.status != 200 or not json.loads(payload)["hits"]:
                raise RuntimeError(f"/search answered {response.status}: {payload[:200]!r}")
            return took

        results = {}
        for mode in modes:
            for warm in ("warm up", "the index", "and the model"):
                search(warm, mode)
            results[mode] = summary([search(query, mode) for query in queries])
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--requests", type=int, default=50, help="API searches per mode (default 50)")
    parser.add_argument("--ui-queries", type=int, default=20, help="UI searches (default 20)")
    parser.add_argument("--out", type=Path, default=BENCH / "latency.json")
    args = parser.parse_args()
    if not (args.datasets / "scifact" / "corpus.jsonl").is_file():
        sys.exit(f"needs {args.datasets / 'scifact'} (../shared/datasets)")
    sys.path.insert(0, str(REPO))
    from retriever import Collection

    BENCH.mkdir(parents=True, exist_ok=True)
    paths = collections(args.datasets)
    queries = [q["text"] for q in load_jsonl(args.datasets / "scifact" / "queries.jsonl")]
    report = {"cpus": os.cpu_count(), "load_average": os.getloadavg()[0], "collections": {}}
    for name, path in paths.items():
        with Collection.open(path) as col:
            info = col.info()
        print(f"{name}: {info['documents']:,} documents, {info['chunks']:,} chunks", file=sys.stderr)
        report["collections"][name] = {
            "documents": info["documents"],
            "chunks": info["chunks"],
            "ui": ui_latency(path, queries[: args.ui_queries]),
            "api": api_latency(path, queries[100 : 100 + args.requests], list(Collection.SEARCH_MODES)),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(f"\n{'collection':<12} {'what':<28} {'median ms':>10} {'p95 ms':>8}  (n)")
    for name, figures in report["collections"].items():
        rows = [
            ("UI search (shown)", figures["ui"]["search_shown"]),
            ("UI script rerun", figures["ui"]["script_rerun"]),
        ]
        rows += [(f"API POST /search {mode}", stats) for mode, stats in figures["api"].items()]
        for what, stats in rows:
            print(f"{name:<12} {what:<28} {stats['median_ms']:>10.1f} {stats['p95_ms']:>8.1f}  ({stats['n']})")
    print(f"\nwritten to {args.out} (load average {report['load_average']:.1f} on {report['cpus']} CPUs)")


if __name__ == "__main__":
    main()
