"""``semsearch watch`` and ``semsearch serve --watch``, run as real processes over a real folder."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Callable

import pytest

from app.cli import main
from retriever import Collection
from tests.processes import free_port, stop

pytest.importorskip("watchfiles")

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 90
WORDS = "tea coffee river ocean mountain forest desert island valley glacier canyon meadow".split()


def wait_for(
    condition: Callable[[], object],
    what: str,
    process: subprocess.Popen | None = None,
    log: Path | None = None,
    timeout: float = DEADLINE_S,
):
    """Poll ``condition`` until true; fail naming ``what`` (with the log) on timeout or when ``process`` exits."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            pytest.fail(f"exited with {process.returncode} before {what}: {log.read_text() if log else ''}")
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout} s: {what}: {log.read_text() if log else ''}")
        time.sleep(0.1)


def events(log: Path) -> list[dict]:
    """The JSON lines ``semsearch watch --json`` wrote so far."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def start_watch(folder: Path, collection: Path, log: Path) -> subprocess.Popen:
    """``semsearch watch FOLDER -c COLLECTION --json``, its JSON lines in ``log`` (stderr beside them)."""
    stream = open(log, "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "watch", str(folder), "-c", str(collection), "--json", "--settle", "0.5"],
        cwd=REPO,
        stdout=stream,
        stderr=subprocess.STDOUT,
    )


def watching_since(log: Path, count: int) -> Callable[[], bool]:
    """Whether the log holds at least ``count`` "watching" events (one per start)."""
    return lambda: sum(event["event"] == "watching" for event in events(log)) >= count


def contents(collection: Collection) -> dict[str, str]:
    """``{id: text}`` of every stored document ("" when one was replaced while it was read)."""
    out = {}
    for doc_id in collection.ids():
        doc = collection.get(doc_id)
        out[doc_id] = doc.text if doc is not None else ""
    return out


def on_disk(folder: Path) -> dict[str, str]:
    return {str(path): path.read_text(encoding="utf-8") for path in sorted(folder.rglob("*.txt"))}


@pytest.fixture()
def setup(tmp_path, tiny_model_dir) -> tuple[Path, Path]:
    folder = (tmp_path / "docs").resolve()
    (folder / "sub").mkdir(parents=True)
    (folder / "tea.txt").write_text("Green tea is steamed right after picking.", encoding="utf-8")
    Collection.create(tmp_path / "col", tiny_model_dir).close()
    return folder, tmp_path / "col"


def test_watch_follows_new_deleted_renamed_files_and_stops_cleanly_on_sigterm(setup, tmp_path):
    folder, path = setup
    log = tmp_path / "watch.log"
    process = start_watch(folder, path, log)
    try:
        wait_for(watching_since(log, 1), "the watcher started", process, log)
        with Collection.open(path) as collection:
            assert set(collection.ids()) == {str(folder / "tea.txt")}  # the first pass
            new = folder / "sub" / "glacier.txt"
            new.write_text("A glacier carves the valley.", encoding="utf-8")
            wait_for(
                lambda: [hit.id for hit in collection.search("glacier", mode="bm25")] == [str(new)],
                "the new file is searchable",
                process,
                log,
            )
            renamed = folder / "ice.txt"
            new.rename(renamed)
            wait_for(
                lambda: set(collection.ids()) == {str(folder / "tea.txt"), str(renamed)}, "the rename", process, log
            )
            (folder / "tea.txt").unlink()
            wait_for(lambda: list(collection.ids()) == [str(renamed)], "the deletion", process, log)
        process.send_signal(signal.SIGTERM)
        assert process.wait(DEADLINE_S) == 0, log.read_text()
    finally:
        stop(process)
    seen = events(log)
    assert seen[-1]["event"] == "stopped"
    assert any(str(renamed) in event.get("added_ids", []) for event in seen if event["event"] == "batch")


def test_a_watcher_killed_while_files_change_misses_nothing_once_restarted(setup, tmp_path):
    folder, path = setup
    log = tmp_path / "watch.log"
    chance = random.Random(7)

    def change_some(count: int) -> None:
        for _ in range(count):
            files = sorted(folder.rglob("*.txt"))
            action = chance.choice(["add", "add", "change", "delete", "rename"]) if files else "add"
            target = chance.choice(files) if files else None
            words = " ".join(chance.choice(WORDS) for _ in range(8))
            if action == "add":
                where = folder / chance.choice(["", "sub"]) / f"f{chance.randrange(10_000)}.txt"
                where.write_text(f"New {words}.", encoding="utf-8")
            elif action == "change":
                target.write_text(f"Changed {words}.", encoding="utf-8")
            elif action == "delete":
                target.unlink()
            else:
                target.rename(target.with_name(f"r{chance.randrange(10_000)}.txt"))

    process = start_watch(folder, path, log)
    try:
        wait_for(watching_since(log, 1), "the watcher started", process, log)
        change_some(10)
        wait_for(lambda: any(event["event"] == "batch" for event in events(log)), "a first batch", process, log)
        change_some(30)  # the watcher is killed among these changes
        process.send_signal(signal.SIGKILL)
        process.wait(DEADLINE_S)
        change_some(10)  # and these happen while no watcher runs
        process = start_watch(folder, path, log)
        wait_for(watching_since(log, 2), "the watcher restarted", process, log)
        with Collection.open(path) as collection:
            wait_for(lambda: contents(collection) == on_disk(folder), "the collection equals the folder", process, log)
    finally:
        stop(process)


def test_once_reconciles_and_reports_what_was_skipped(setup, tmp_path, capsys):
    folder, path = setup
    (folder / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    code = main(["watch", str(folder), "-c", str(path), "--once", "--json"])
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = [json.loads(line) for line in out.splitlines()]
    reconciled = [line for line in lines if line["event"] == "reconciled"]
    assert len(reconciled) == 1 and reconciled[0]["added"] == 1
    assert [line["added_ids"] for line in lines if line["event"] == "written"] == [[str(folder / "tea.txt")]]
    assert reconciled[0]["skipped"][0]["source"].startswith(str(folder / "broken.jsonl"))
    (folder / "broken.jsonl").unlink()
    assert main(["watch", str(folder), "-c", str(path), "--once"]) == 0
    assert "1 unchanged" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["watch", "{missing}", "-c", "{col}"], "no such directory"),
        (["watch", "{folder}", "-c", "{col}", "--settle", "0"], "--settle must be positive"),
        (["serve", "-c", "{col}", "--watch", "{folder}", "--workers", "2"], "one worker"),
        (["serve", "-c", "{col}", "--watch", "{missing}"], "no such directory"),
        (["serve", "-c", "{col}", "--watch-include", "*.md"], "apply to --watch only"),
    ],
)
def test_bad_watch_usage_is_one_line_exit_2(setup, tmp_path, capsys, argv, message):
    pytest.importorskip("fastapi")
    folder, path = setup
    values = {"missing": str(tmp_path / "missing"), "col": str(path), "folder": str(folder)}
    code = main([arg.format(**values) for arg in argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_serve_watch_makes_a_new_file_searchable_over_http(setup, tmp_path):
    pytest.importorskip("fastapi")
    folder, path = setup
    port = free_port()
    log = tmp_path / "serve.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "-c", str(path), "--port", str(port), "--watch", str(folder)],
        cwd=REPO,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        env={k: v for k, v in os.environ.items() if k not in ("SEMSEARCH_API_KEY", "SEMSEARCH_KEYS")},
    )

    def hits(word: str) -> list[str]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/search",
            method="POST",
            data=json.dumps({"query": word, "mode": "bm25"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return [hit["id"] for hit in json.loads(response.read())["hits"]]
        except OSError:
            return []

    try:
        wait_for(lambda: hits("steamed") == [str(folder / "tea.txt")], "the first pass is served", process, log)
        new = folder / "sub" / "canyon.txt"
        new.write_text("The canyon walls glow at dusk.", encoding="utf-8")
        wait_for(lambda: hits("canyon") == [str(new)], "the new file is searchable over HTTP", process, log)
        process.send_signal(signal.SIGTERM)
        assert process.wait(DEADLINE_S) in (0, -signal.SIGTERM), log.read_text()  # uvicorn raises it again
    finally:
        stop(process)
    said = log.read_text()
    assert "watcher stopped" not in said  # no failure
    assert said.index("semsearch watch: stopped") < said.index("Application shutdown complete")  # before the close
