"""The processes of a soak run (``python -m benchmarks.soak_roles ROLE ...``), each in a loop until ``STOP`` exists.

- ``writer``: adds, upserts, deletes and compacts through the Python API,
  journalling each write (``benchmarks.soak_journal``);
- ``http-writer``: adds, upserts and deletes through the HTTP API;
- ``searcher``: searches through the HTTP API and logs every failure with its time;
- ``reader``: searches the collection directly, through the Python API.

Writers own disjoint ids (``p-*`` and ``h-*``). Every document's metadata
holds its version, ``{"v": VERSION}``, which its text also names.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from benchmarks.soak_journal import Journal, read_events

STOP = "STOP"
ID_SPACE = 4_000  # ids per writer
WORDS = (
    "river delta sediment protein enzyme membrane quantum lattice archive treaty harvest glacier "
    "migration vaccine orbit turbine ledger canal monsoon fossil reactor pigment cipher parish"
).split()


def sentences(source: Path | None, limit: int = 5_000) -> list[str]:
    """Real sentences from a BEIR corpus's texts when one is given, else sentences of a small vocabulary."""
    found: list[str] = []
    if source is not None and source.is_file():
        with source.open(encoding="utf-8") as corpus:
            for line in corpus:
                text = json.loads(line).get("text", "")
                found.extend(s.strip() + "." for s in text.split(". ") if 40 <= len(s) <= 300)
                if len(found) >= limit:
                    break
    if not found:
        rng = random.Random(0)
        found = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))) + "." for _ in range(limit)]
    return found


def document(doc_id: str, version: int, rng: random.Random, pool: list[str]) -> dict:
    """A document of 1-6 real sentences whose text and metadata carry ``version``."""
    text = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 6)))
    return {
        "id": doc_id,
        "title": f"{doc_id} v{version}",
        "text": f"{text} (revision {version})",
        "metadata": {"v": version, "writer": doc_id[0]},
    }


class WriterState:
    """The ids a writer believes present, rebuilt from its journal after a restart."""

    def __init__(self, journal: Path, prefix: str) -> None:
        events = read_events(journal) if journal.exists() else []
        acked = {e["ack"] for e in events if "ack" in e}
        self.present: set[str] = set()
        self.seq = 0
        for event in events:
            if "intent" in event:
                self.seq = max(self.seq, event["intent"] + 1)
                if event["intent"] in acked:
                    for doc_id, version in event["docs"].items():
                        (self.present.add if version is not None else self.present.discard)(doc_id)
        self.prefix = prefix

    def record(self, op: str, ids: list[str]) -> None:
        """An acknowledged write: the ids are present after an add or upsert, absent after a delete."""
        for doc_id in ids:
            (self.present.discard if op == "delete" else self.present.add)(doc_id)

    def pick(self, rng: random.Random, op: str, n: int) -> list[str]:
        if op == "add":
            absent = [f"{self.prefix}-{i}" for i in rng.sample(range(ID_SPACE), min(ID_SPACE, n * 4))]
            return [i for i in absent if i not in self.present][:n]
        present = sorted(self.present)
        return rng.sample(present, min(n, len(present)))


def run_writer(args) -> None:
    """Writes through the Python API: add, upsert, delete, and now and then a compaction."""
    from retriever import Collection
    from retriever.errors import SemsearchError

    rng, pool = random.Random(args.seed + time.time_ns()), sentences(args.text)
    state = WriterState(args.journal, "p")
    journal = Journal(args.journal)
    with Collection.open(args.dir) as col:
        while not (args.dir.parent / STOP).exists():
            op = rng.choices(["add", "upsert", "delete", "compact"], [40, 35, 20, 5])[0]
            if op == "compact":
                col.compact()
                continue
            ids = state.pick(rng, op, rng.randint(1, 12))
            if not ids:
                continue
            version = time.time_ns()
            docs = {i: (None if op == "delete" else version) for i in ids}
            journal.write({"intent": state.seq, "op": op, "docs": docs})
            try:
                if op == "delete":
                    col.delete(ids)
                else:
                    getattr(col, op)([document(i, version, rng, pool) for i in ids])
            except SemsearchError as exc:  # a refusal is a write not done: never acknowledged
                print(f"writer: {op} refused: {exc}", file=sys.stderr)
                state.seq += 1
                continue
            journal.write({"ack": state.seq})
            state.seq += 1
            state.record(op, ids)


def call(base: str, key: str, method: str, path: str, body=None, timeout: float = 120) -> tuple[int, dict | None]:
    """``(status, JSON)`` of one request; raises ``OSError`` when the connection fails, also when it is
    cut while the answer is read (a killed server leaves ``http.client.IncompleteRead``)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body or b"null")
        except ValueError:
            return exc.code, {"detail": body[:200].decode("latin-1")}
    except http.client.HTTPException as exc:  # cut mid-answer: as much a failed connection as a refused one
        raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc


def run_http_writer(args) -> None:
    """Writes through ``POST /documents`` and ``DELETE /documents/{id}``; an answer other than 2xx is no ack."""
    rng, pool = random.Random(args.seed + time.time_ns()), sentences(args.text)
    state = WriterState(args.journal, "h")
    journal = Journal(args.journal)
    while not (args.dir.parent / STOP).exists():
        op = rng.choices(["add", "upsert", "delete"], [40, 40, 20])[0]
        ids = state.pick(rng, op, 1 if op == "delete" else rng.randint(1, 8))
        if not ids:
            continue
        version = time.time_ns()
        journal.write({"intent": state.seq, "op": op, "docs": {i: (None if op == "delete" else version) for i in ids}})
        try:
            if op == "delete":
                status, _ = call(args.base, args.key, "DELETE", "/documents/" + urllib.parse.quote(ids[0], safe=""))
                done = status in (200, 404)  # 404: it was not there, which is what a delete asks
            else:
                body = {"documents": [document(i, version, rng, pool) for i in ids], "upsert": op == "upsert"}
                status, _ = call(args.base, args.key, "POST", "/documents", body)
                done = status == 200
        except OSError:  # the server is down, or was killed during the request
            done = False
            time.sleep(0.3)
        if done:
            journal.write({"ack": state.seq})
            state.record(op, ids)
        state.seq += 1


def run_searcher(args) -> None:
    """Searches ``/search`` in a loop; prints one JSON line per answer kind and failure, with its time."""
    rng, pool = random.Random(args.seed), sentences(args.text)
    log = Journal(args.journal)
    while not (args.dir.parent / STOP).exists():
        words = rng.choice(pool).split()
        query = " ".join(words[: rng.randint(2, 8)])
        started = time.time()
        try:
            status, body = call(
                args.base,
                args.key,
                "POST",
                "/search",
                {"query": query, "k": 10, "mode": rng.choice(["hybrid", "dense", "bm25"])},
            )
            ok = status == 200 and isinstance(body, dict) and isinstance(body.get("hits"), list)
            log.write(
                {"t": started, "end": time.time(), "ok": ok}
                | ({} if ok else {"status": status, "detail": str(body)[:200]})
            )
        except OSError as exc:
            log.write({"t": started, "end": time.time(), "ok": False, "error": type(exc).__name__})
            time.sleep(0.2)


def run_reader(args) -> None:
    """Searches the collection directly while writers commit, merge and die."""
    from retriever import Collection

    rng, pool = random.Random(args.seed), sentences(args.text)
    log = Journal(args.journal)
    with Collection.open(args.dir) as col:
        while not (args.dir.parent / STOP).exists():
            words = rng.choice(pool).split()
            started = time.time()
            try:
                hits = col.search(" ".join(words[: rng.randint(2, 8)]), k=10)
                log.write({"t": started, "end": time.time(), "ok": all(h.id[0] in "ph" for h in hits)})
            except Exception as exc:  # noqa: BLE001 - every failure is counted, whatever it is
                log.write(
                    {"t": started, "end": time.time(), "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
                )
            time.sleep(0.05)


ROLES = {"writer": run_writer, "http-writer": run_http_writer, "searcher": run_searcher, "reader": run_reader}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--dir", type=Path, required=True, help="the collection")
    parser.add_argument("--journal", type=Path, required=True, help="this process's journal or log")
    parser.add_argument("--base", default="", help="the server's base URL")
    parser.add_argument("--key", default="", help="the server's API key")
    parser.add_argument("--text", type=Path, default=None, help="a BEIR corpus.jsonl to take sentences from")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ROLES[args.role](args)


if __name__ == "__main__":
    main()
