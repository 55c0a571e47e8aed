"""A soak run: ``python -m benchmarks.soak [--minutes 30]`` (``make soak``, ``SOAK_MINUTES``).

For the given minutes, on loopback only: ``semsearch serve`` over one
collection, a writer through the Python API (adds, upserts, deletes,
compactions), a writer through the HTTP API, two HTTP searchers and a
direct reader (``benchmarks.soak_roles``). The server and the Python writer
are SIGKILLed at random moments and started again; snapshots are taken
every so often, by the command and by ``POST /admin/snapshot``, and each is
opened, checked and counted.

At the end every process is stopped, the collection is compacted, and the
report gives: requests (and failed reads that no kill explains), kills,
writes acknowledged and found afterwards (``benchmarks.soak_journal``),
snapshots and their checks, and the size on disk against a fresh build of
the same documents. Writes ``runs/soak/report.json``; the exit status is 1
when a write was lost, a read failed, a snapshot did not check, or the size
is over 1.1 times the fresh build's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

from benchmarks.soak_journal import read_events, verify
from benchmarks.soak_roles import STOP
from retriever.encoding.backends.choice import describe_cpu

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TEXT = REPO.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"
KEY = "soak-key"
SLACK_S = 1.0  # a failure this close to a server kill or restart counts as cut by it
MAX_SIZE_RATIO = 1.1


class Process:
    """One role's process, restartable, its output in ``logs``."""

    def __init__(self, name: str, argv: list[str], logs: Path, env: dict) -> None:
        self.name, self.argv, self.logs, self.env = name, argv, logs, env
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        out = open(self.logs / f"{self.name}.log", "ab")
        self.proc = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_healthy(base: str, server: Process, timeout: float = 180) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.running():
            raise SystemExit(f"the server exited: see {server.logs / 'server.log'}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the server did not answer /health within {timeout:.0f} s")


def take_snapshot(root: Path, n: int, base: str, env: dict) -> dict:
    """A snapshot by the command (even n) or by the API (odd n), opened, checked and counted, then removed."""
    from benchmarks.soak_roles import call
    from retriever import Collection

    dest = root / "snapshots" / f"snap-{n}"
    started = time.time()
    if n % 2:
        try:
            status, report = call(base, KEY, "POST", "/admin/snapshot", {"dest": str(dest)}, timeout=300)
        except OSError as exc:
            return {"n": n, "by": "api", "taken": False, "why": f"{type(exc).__name__} (server killed?)"}
        if status != 200:
            return {"n": n, "by": "api", "taken": False, "why": f"{status}: {report}"}
    else:
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "snapshot", "-c", str(root / "col"), str(dest), "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return {"n": n, "by": "command", "taken": False, "why": done.stderr.strip()[-300:]}
        report = json.loads(done.stdout)
    with Collection.open(dest) as snap:
        check = snap.check()
        result = {
            "n": n,
            "by": "api" if n % 2 else "command",
            "taken": True,
            "generation": report["generation"],
            "documents": report["documents"],
            "opened_documents": len(snap),
            "opened_generation": snap.info()["generation"],
            "check_ok": check.ok,
            "seconds": round(time.time() - started, 2),
        }
    result["ok"] = (
        check.ok
        and result["documents"] == result["opened_documents"]
        and result["generation"] == result["opened_generation"]
    )
    shutil.rmtree(dest)
    return result


def failures_not_cut(log: Path, outages: list[tuple[float, float]]) -> tuple[int, int, int, list[dict]]:
    """``(requests, failed, cut by a kill, unexplained failures)`` of a searcher's or reader's log."""
    events = read_events(log) if log.exists() else []
    failed = [e for e in events if not e["ok"]]
    unexplained = [
        e for e in failed if not any(down - SLACK_S <= e["end"] and e["t"] <= up + SLACK_S for down, up in outages)
    ]
    return len(events), len(failed), len(failed) - len(unexplained), unexplained


def fresh_size(root: Path, documents: list[dict], model: str) -> int:
    """Bytes on disk of a new collection holding ``documents``, built in one go and compacted."""
    from retriever import Collection

    with Collection.create(root / "fresh", model) as fresh:
        for start in tqdm(range(0, len(documents), 256), desc="fresh build", unit="batch"):
            fresh.add(documents[start : start + 256])
        fresh.compact()
        return fresh.info()["size_bytes"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", 30)))
    parser.add_argument("--model", default=None, help="the collection's model (default: the packaged MiniLM)")
    parser.add_argument("--dir", type=Path, default=Path("runs/soak"), help="work folder (emptied first)")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT, help="BEIR corpus.jsonl for the texts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--server-kill-every", type=float, nargs=2, default=(20, 60), metavar=("MIN", "MAX"))
    parser.add_argument("--writer-kill-every", type=float, nargs=2, default=(8, 30), metavar=("MIN", "MAX"))
    parser.add_argument("--snapshot-every", type=float, default=90)
    args = parser.parse_args()

    from retriever import Collection

    root = args.dir.resolve()
    shutil.rmtree(root, ignore_errors=True)
    (root / "logs").mkdir(parents=True)
    (root / "snapshots").mkdir()
    with Collection.create(root / "col", args.model) as col:
        model = col.model["name"]
    base = f"http://127.0.0.1:{free_port()}"
    env = dict(os.environ, SEMSEARCH_API_KEY=KEY, PYTHONUNBUFFERED="1")
    server, writer, others = processes(root, base, args, env)
    print(f"soak: {args.minutes:g} min on {describe_cpu()}, work folder {root}", file=sys.stderr)
    server.start()
    wait_healthy(base, server)
    for process in (writer, *others):
        process.start()
    kills, outages, snapshots = soak(root, base, env, args, server, writer, others)
    (root / STOP).touch()
    for process in (writer, *others):
        process.stop()
    server.proc.send_signal(signal.SIGTERM)
    server.stop()
    return report(root, model, args, kills, outages, snapshots, [writer, server, *others])


def processes(root: Path, base: str, args, env: dict) -> tuple[Process, Process, list[Process]]:
    """The server, the Python writer (the two that get killed), and the HTTP writer, searchers and reader."""
    logs, collection = root / "logs", root / "col"
    py, roles = sys.executable, ["-m", "benchmarks.soak_roles"]
    common = ["--dir", str(collection), "--text", str(args.text), "--base", base, "--key", KEY]

    def role(name: str, kind: str, seed: int) -> Process:
        return Process(
            name,
            [py, *roles, kind, *common, "--journal", str(logs / f"{name}.jsonl"), "--seed", str(args.seed + seed)],
            logs,
            env,
        )

    server = Process(
        "server",
        [py, "-m", "app.cli", "serve", "-c", str(collection), "--port", base.rsplit(":", 1)[1], "--deadline", "60"],
        logs,
        env,
    )
    others = [
        role("http-writer", "http-writer", 1),
        role("searcher-0", "searcher", 10),
        role("searcher-1", "searcher", 11),
        role("reader", "reader", 20),
    ]
    return server, role("writer", "writer", 0), others


def soak(root: Path, base: str, env: dict, args, server: Process, writer: Process, others: list[Process]):
    """Kill and restart the server and the writer, and take snapshots, until the time is up.

    Returns:
        ``(kills, outages, snapshots)``: kills by process, the server's ``(killed, answering again)``
        times, and each snapshot's check.
    """
    rng = random.Random(args.seed)
    outages: list[tuple[float, float]] = []
    kills = {"server": 0, "writer": 0, "exited_by_themselves": {}}
    snapshots: list[dict] = []
    started = time.monotonic()
    end = started + args.minutes * 60
    next_server_kill = started + rng.uniform(*args.server_kill_every)
    next_writer_kill = started + rng.uniform(*args.writer_kill_every)
    next_snapshot = started + args.snapshot_every / 2
    with tqdm(total=int(args.minutes * 60), desc="soak", unit="s", mininterval=5) as bar:
        while (now := time.monotonic()) < end:
            bar.set_postfix(kills=f"{kills['server']}+{kills['writer']}", snapshots=len(snapshots), refresh=False)
            bar.update(int(now - started) - bar.n)
            if now >= next_server_kill:
                down = time.time()
                server.kill()
                kills["server"] += 1
                time.sleep(rng.uniform(0.2, 3))
                server.start()
                wait_healthy(base, server)
                outages.append((down, time.time()))
                next_server_kill = time.monotonic() + rng.uniform(*args.server_kill_every)
            if now >= next_writer_kill:
                writer.kill()
                kills["writer"] += 1
                time.sleep(rng.uniform(0.1, 2))
                writer.start()
                next_writer_kill = time.monotonic() + rng.uniform(*args.writer_kill_every)
            if now >= next_snapshot:
                snapshots.append(take_snapshot(root, len(snapshots), base, env))
                next_snapshot = time.monotonic() + args.snapshot_every
            for process in (writer, *others):  # a role that died by itself: say so, and start it again
                if not process.running():
                    print(f"soak: {process.name} exited with {process.proc.returncode}; restarted", file=sys.stderr)
                    exits = kills["exited_by_themselves"]
                    exits[process.name] = exits.get(process.name, 0) + 1
                    process.start()
            time.sleep(0.2)
        bar.update(bar.total - bar.n)
    return kills, outages, snapshots


def report(root: Path, model: str, args, kills: dict, outages: list, snapshots: list, processes: list) -> int:
    """Compact, verify, measure against a fresh build; print and write the report."""
    from retriever import Collection

    logs = root / "logs"
    with Collection.open(root / "col") as col:
        compaction = col.compact()
        check = col.check()
        stored = {i: col.get(i) for i in col.ids()}
        size = col.info()["size_bytes"]
    versions = {i: doc.metadata.get("v") for i, doc in stored.items()}
    verdict = verify([logs / "writer.jsonl", logs / "http-writer.jsonl"], versions)
    reads = {}
    for name in ("searcher-0", "searcher-1", "reader"):
        requests, failed, cut, unexplained = failures_not_cut(
            logs / f"{name}.jsonl", outages if name != "reader" else []
        )
        reads[name] = {
            "requests": requests,
            "failed": failed,
            "cut_by_a_kill": cut,
            "failed_unexplained": len(unexplained),
            "examples": unexplained[:5],
        }
    documents = [{"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata} for d in stored.values()]
    fresh = fresh_size(root, documents, model)
    result = {
        "machine": describe_cpu(),
        "minutes": args.minutes,
        "model": model,
        "kills": kills,
        "starts": {p.name: p.starts for p in processes},
        "reads": reads,
        "writes": verdict.to_dict(),
        "snapshots": {
            "taken": sum(s["taken"] for s in snapshots),
            "not_taken": [s for s in snapshots if not s["taken"]],
            "checked_ok": sum(s.get("ok", False) for s in snapshots),
            "bad": [s for s in snapshots if s["taken"] and not s["ok"]],
        },
        "final": {
            "documents": len(stored),
            "check_ok": check.ok,
            "compaction": compaction,
            "bytes": size,
            "fresh_bytes": fresh,
            "size_ratio": round(size / fresh, 4),
        },
    }
    failed_reads = sum(r["failed_unexplained"] for r in reads.values())
    result["passed"] = bool(
        verdict.lost == []
        and failed_reads == 0
        and not result["snapshots"]["bad"]
        and not kills["exited_by_themselves"]
        and check.ok
        and size <= MAX_SIZE_RATIO * fresh
    )
    (root / "report.json").write_text(json.dumps(result, indent=2, default=str))
    print_report(result)
    return 0 if result["passed"] else 1


def print_report(r: dict) -> None:
    w, reads, snaps, final = r["writes"], r["reads"], r["snapshots"], r["final"]
    requests = sum(x["requests"] for x in reads.values())
    print(f"\nsoak: {r['minutes']:g} min, {r['machine']}")
    print(
        f"  kills: server {r['kills']['server']}, writer {r['kills']['writer']}; processes that exited by "
        f"themselves: {r['kills']['exited_by_themselves'] or 'none'}"
    )
    per_role = ", ".join(f"{name} {x['requests']:,}" for name, x in reads.items())
    print(
        f"  reads: {requests:,} ({per_role}); "
        f"failed {sum(x['failed'] for x in reads.values())}, of which cut by a kill "
        f"{sum(x['cut_by_a_kill'] for x in reads.values())}, unexplained "
        f"{sum(x['failed_unexplained'] for x in reads.values())}"
    )
    print(
        f"  writes: {w['writes']:,} asked, {w['acknowledged']:,} acknowledged ({w['acknowledged_docs']:,} document "
        f"changes), {w['uncertain']} cut by a kill; ids {w['ids']:,}, found as acknowledged {w['found']:,}, "
        f"lost {w['lost']}"
    )
    print(
        f"  snapshots: {snaps['taken']} taken, {snaps['checked_ok']} opened at their generation with matching "
        f"counts and clean checks, {len(snaps['not_taken'])} not taken (server killed), {len(snaps['bad'])} bad"
    )
    print(
        f"  final: {final['documents']:,} documents, check {'ok' if final['check_ok'] else 'FAILED'}, "
        f"{final['bytes']:,} bytes vs fresh build {final['fresh_bytes']:,} = {final['size_ratio']:.3f}x"
    )
    print(f"  {'PASSED' if r['passed'] else 'FAILED'}")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
