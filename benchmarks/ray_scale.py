"""The batch job in one process against the same job on Ray: documents per second, same result.

    .venv/bin/python -m benchmarks.ray_scale [--docs 1500] [--workers 2] [--address ADDRESS] [--no-record]

Indexes the first ``--docs`` SciFact abstracts with the packaged
all-MiniLM-L6-v2, once with ``engine="local"`` (this process, the encoder
on every core) and once with ``engine="ray"`` (``--workers`` actors, one model
each, its encoder on the actor's share of the cores). Without ``--address`` Ray runs on this
machine, its actors in their own processes: rows, staged segments' paths and
results cross Ray's object store and RPC as on a cluster. Ray is started
before the clock runs (as a cluster is up before a job), and its start-up is
printed apart; loading the model (once here, once per actor there) is
counted. Checks that both collections hold the same documents and
chunks, and prints the CPU, both rates and their ratio; writes
``runs/bench/ray_scale.json``; a run on this machine (no ``--address``) writes
its ratio into the "Ray" table of docs/benchmarks.md (``benchmarks.results_page``,
a row per number of workers and documents; ``--no-record`` leaves the page
alone, ``--page`` names another copy). Run it alone: other CPU-heavy work
distorts it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import results_page
from benchmarks.scale import BENCH, DEFAULT_DATASETS, machine

#: The table of docs/benchmarks.md a run writes, and the column that tells its rows apart.
TABLE = "Ray"
COLUMNS = ("what", "result", "command", "machine", "date")
KEYS = ("what",)


def _slice(corpus: Path, docs: int, target: Path) -> Path:
    """The first ``docs`` records of a BEIR corpus as a JSONL file."""
    lines = []
    with corpus.open(encoding="utf-8") as source:
        for line in source:
            if len(lines) == docs:
                break
            lines.append(line)
    target.write_text("".join(lines), encoding="utf-8")
    return target


def _run(engine: str, inputs: Path, target: Path, workers: int, address: str | None) -> tuple[float, dict]:
    from indexer.job import index_paths
    from retriever import Collection

    with Collection.create(target) as collection:
        started = time.perf_counter()
        report = index_paths(
            collection, [inputs], engine=engine, ray_address=address, workers=workers, progress=False, batch_docs=128
        )
        seconds = time.perf_counter() - started
        assert not report.skipped, report.summary()
        spans = {doc_id: collection.chunk_spans(doc_id) for doc_id in collection.ids()}
    return seconds, spans


def table_row(result: dict) -> dict:
    """The table's row of a run's ``result`` (as written to ``ray_scale.json``)."""
    return {
        "what": f"the Ray job ({result['workers']} workers) against one process, {result['docs']:,} SciFact abstracts",
        "result": f"{result['ratio']:.2f} of one process's rate ({result['ray_docs_per_s']:.1f} against "
        f"{result['local_docs_per_s']:.1f} documents/s)",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--address", help="a running Ray cluster to join (default: Ray on this machine)")
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    results_page.add_options(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.address and not args.no_record:
        print(f"not written into {args.page}: its table is of Ray on this machine")
        args.no_record = True
    results_page.check(args, TABLE, COLUMNS)

    import ray

    work = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    try:
        inputs = _slice(args.datasets / "scifact" / "corpus.jsonl", args.docs, work / "scifact.jsonl")
        local_s, local_spans = _run("local", inputs, work / "local", args.workers, None)
        started = time.perf_counter()
        ray.init(
            address=args.address or "local",
            num_cpus=None if args.address else args.workers + 1,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="WARNING",
        )
        ray_start_s = time.perf_counter() - started
        ray_s, ray_spans = _run("ray", inputs, work / "ray", args.workers, args.address)
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert ray_spans == local_spans, "the Ray run's documents or chunks differ from the local run's"
    result = {
        "machine": machine(),
        "docs": args.docs,
        "chunks": sum(len(s) for s in local_spans.values()),
        "workers": args.workers,
        "cluster": args.address or "local",
        "local_docs_per_s": round(args.docs / local_s, 2),
        "ray_docs_per_s": round(args.docs / ray_s, 2),
        "ratio": round(local_s / ray_s, 3),
        "ray_start_s": round(ray_start_s, 2),
    }
    print(f"{result['machine']}\n{args.docs} SciFact abstracts, {result['chunks']} chunks, all-MiniLM-L6-v2")
    print(f"  one process        {result['local_docs_per_s']:8.2f} docs/s")
    print(
        f"  Ray, {args.workers} workers     {result['ray_docs_per_s']:8.2f} docs/s  "
        f"(ratio {result['ratio']:.3f}; Ray start-up {ray_start_s:.1f} s, not counted)"
    )
    BENCH.mkdir(parents=True, exist_ok=True)
    (BENCH / "ray_scale.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    results_page.record(
        args, TABLE, COLUMNS, KEYS, [table_row(result)], command=results_page.command_line("benchmarks.ray_scale", argv)
    )


if __name__ == "__main__":
    main()
