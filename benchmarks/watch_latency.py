"""How long ``semsearch watch`` takes from a file written to searchable, and from a file deleted to gone.

    .venv/bin/python -m benchmarks.watch_latency [--files 30] [--model DIR] [--settle 1.0]

Starts ``semsearch watch`` as its own process on an empty folder and a new
collection (the packaged MiniLM unless ``--model`` names another), waits
for it to watch, then, one file at a time: writes a small text file with a
word of its own and polls a keyword search for that word in this process
until the file is found; then deletes each file and polls until its id is
gone. Prints the machine (CPU model, cores, flags), the median, the 90th
percentile and the largest of both delays. The watcher's settle time
(``--settle``, default the command's own) is part of every delay.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
POLL_S = 0.02
TIMEOUT_S = 120.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=30, help="files written, then deleted (default 30)")
    parser.add_argument("--model", help="model directory (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--settle", type=float, help="the watcher's --settle (default: the command's)")
    args = parser.parse_args(argv)

    from benchmarks.results_page import describe_machine
    from retriever import Collection

    with tempfile.TemporaryDirectory(prefix="semsearch-watch-bench-") as tmp:
        folder, path = Path(tmp) / "docs", Path(tmp) / "col"
        folder.mkdir()
        Collection.create(path, args.model).close()
        log = Path(tmp) / "watch.log"
        command = [sys.executable, "-m", "app.cli", "watch", str(folder), "-c", str(path), "--json"]
        command += ["--settle", str(args.settle)] if args.settle is not None else []
        process = subprocess.Popen(command, cwd=REPO, stdout=open(log, "wb"), stderr=subprocess.DEVNULL)
        try:
            _wait(lambda: '"watching"' in log.read_text(), "the watcher to start", process)
            with Collection.open(path) as collection:
                written, deleted = _measure(collection, folder, args.files, process)
        finally:
            process.terminate()
            process.wait(60)
    print(f"command: {shlex.join(['python', '-m', 'benchmarks.watch_latency', *(argv or sys.argv[1:])])}")
    print(f"machine: {describe_machine()}")
    print(f"date: {datetime.date.today().isoformat()}")
    print(
        json.dumps(
            {"files": args.files, "written_to_searchable_s": _summary(written), "deleted_to_gone_s": _summary(deleted)},
            indent=2,
        )
    )
    return 0


def _measure(collection, folder: Path, count: int, process: subprocess.Popen) -> tuple[list[float], list[float]]:
    """Seconds from each file written to found, then from each file deleted to gone."""
    written, deleted = [], []
    paths = [folder / f"note-{n}.txt" for n in range(count)]
    for n, path in enumerate(paths):
        word = f"zq{n:04d}marker"
        started = time.perf_counter()
        path.write_text(f"A note about {word}, written to be found.", encoding="utf-8")
        _wait(lambda: str(path) in [hit.id for hit in collection.search(word, k=5, mode="bm25")], path.name, process)
        written.append(time.perf_counter() - started)
    for path in paths:
        started = time.perf_counter()
        path.unlink()
        _wait(lambda: str(path) not in collection, f"{path.name} gone", process)
        deleted.append(time.perf_counter() - started)
    return written, deleted


def _wait(condition: Callable[[], bool], what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if process.poll() is not None:
            raise SystemExit(f"the watcher exited ({process.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what} after {TIMEOUT_S:g} s")
        time.sleep(POLL_S)


def _summary(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {
        "median": round(statistics.median(ordered), 3),
        "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
        "max": round(ordered[-1], 3),
    }


if __name__ == "__main__":
    sys.exit(main())
