"""The soak run's bookkeeping (``benchmarks.soak_journal``), and a short soak run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.soak_journal import Journal, read_events, verify

REPO = Path(__file__).resolve().parents[1]


def journal(path: Path, events: list[dict]) -> Path:
    log = Journal(path)
    for event in events:
        log.write(event)
    log.close()
    return path


def test_an_answer_cut_midway_counts_as_a_failed_connection():
    """A server killed while it answers leaves a body shorter than its Content-Length: the roles must see
    the ``OSError`` they count as a kill's doing, not crash on ``http.client.IncompleteRead``."""
    import socket
    import threading

    from benchmarks.soak_roles import call

    listener = socket.create_server(("127.0.0.1", 0))

    def answer_half() -> None:
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"hits"')
        connection.shutdown(socket.SHUT_WR)  # the answer ends 93 bytes short, as a killed server's does
        while connection.recv(65536):  # read the rest of the request, so that closing sends no reset
            pass
        connection.close()

    server = threading.Thread(target=answer_half)
    server.start()
    try:
        with pytest.raises(OSError, match="IncompleteRead"):
            call(f"http://127.0.0.1:{listener.getsockname()[1]}", "key", "POST", "/search", {"query": "q"}, timeout=10)
    finally:
        server.join(10)
        listener.close()


def test_an_acknowledged_write_must_be_found_and_a_cut_one_may_or_may_not_be(tmp_path):
    path = journal(
        tmp_path / "w.jsonl",
        [
            {"intent": 0, "op": "add", "docs": {"a": 1, "b": 1}},
            {"ack": 0},
            {"intent": 1, "op": "upsert", "docs": {"a": 2}},  # cut by a kill: a may hold 1 or 2
            {"intent": 2, "op": "delete", "docs": {"b": None}},
            {"ack": 2},
            {"intent": 3, "op": "add", "docs": {"c": 3}},  # cut: c may be absent or 3
        ],
    )
    assert verify([path], {"a": 1}).lost == [] and verify([path], {"a": 2, "c": 3}).found == 3
    verdict = verify([path], {"a": 1, "b": 1})
    assert [x["id"] for x in verdict.lost] == ["b"]  # an acknowledged delete undone
    assert verdict.writes == 4 and verdict.acknowledged == 2 and verdict.uncertain == 2
    assert [x["id"] for x in verify([path], {}).lost] == ["a"]  # an acknowledged add lost
    assert [x["id"] for x in verify([path], {"a": 7}).lost] == ["a"]  # a version nobody wrote


def test_journals_are_told_apart_and_a_torn_last_line_is_dropped(tmp_path):
    first = journal(tmp_path / "p.jsonl", [{"intent": 0, "op": "add", "docs": {"p-1": 5}}, {"ack": 0}])
    second = journal(tmp_path / "h.jsonl", [{"intent": 0, "op": "add", "docs": {"h-1": 9}}])  # same seq, no ack
    with open(second, "a") as out:
        out.write('{"ack": 0')  # killed mid-line
    assert len(read_events(second)) == 1
    verdict = verify([first, second], {"p-1": 5})
    assert verdict.lost == [] and verdict.acknowledged == 1  # h's seq 0 is not acknowledged by p's ack 0
    assert [x["id"] for x in verify([first, second], {"h-1": 9}).lost] == ["p-1"]


def test_a_short_soak_kills_and_restarts_and_loses_nothing(tmp_path, tiny_model_dir):
    pytest.importorskip("fastapi")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.soak",
            "--minutes",
            "0.75",
            "--model",
            str(tiny_model_dir),
            "--dir",
            str(tmp_path / "soak"),
            "--server-kill-every",
            "8",
            "12",
            "--writer-kill-every",
            "3",
            "6",
            "--snapshot-every",
            "10",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads((tmp_path / "soak" / "report.json").read_text())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert report["passed"] and report["kills"]["server"] >= 2 and report["kills"]["writer"] >= 4
    assert report["writes"]["acknowledged"] > 0 and report["writes"]["lost"] == 0
    assert report["snapshots"]["taken"] >= 2 and report["snapshots"]["bad"] == []
    assert sum(r["requests"] for r in report["reads"].values()) > 0
    assert "PASSED" in done.stdout
