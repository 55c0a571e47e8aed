"""The README's front door, run for real: every ```sh and ```python block, in order, in one working folder.

The blocks run against a small collection built from a handful of documents this test writes into
``notes/`` (the folder the README's tour indexes), with the packaged all-MiniLM-L6-v2 and no network
(``HF_HUB_OFFLINE=1``). Shell lines run with ``bash`` in a temporary working folder with the
repository's ``.venv/bin`` first on ``PATH``; Python blocks run with ``exec`` in that folder, one
namespace per block. Each block must succeed, so a command or an API the README shows cannot rot.

- The set-up block (``make install``, ``make test``) is checked, not run: every line must be
  ``make TARGET`` for a target the Makefile defines, and ``make -n TARGET`` must accept it. Running it
  here would run this very suite again (``make test``); ``make install`` is already done by then.
- Long-running commands (``semsearch ui``, ``semsearch serve``) are started in the background on a free
  port (``--port`` added, and the block's later references to the default port rewritten to it),
  polled on their health route until a deadline, used by the block's later lines (the ``curl``), and
  stopped at the block's end.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.processes import free_port, stop

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
VENV_BIN = REPO / ".venv" / "bin"
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```$", re.M | re.S)
COMMAND_TIMEOUT = 240  # seconds for one shell line (the first index exports the model: the longest step)
START_TIMEOUT = 120  # seconds for a background service to answer its health route
#: Long-running commands: their default port and the route that says they are up.
SERVICES = {"semsearch ui": (8501, "/_stcore/health"), "semsearch serve": (8000, "/health")}

NOTES = {
    "rivers.md": "# How rivers form deltas\n\nA river meets the sea at its mouth. Rivers slow down at the sea "
    "and drop sediment. Over centuries the sediment builds a delta of sand and mud.\n",
    "tea.md": "# Green tea\n\nGreen tea leaves are steamed right after picking, then rolled and dried. "
    "Black tea is oxidised before it is dried.\n",
    "volcanoes.txt": "Volcanoes erupt when magma rises through cracks in the crust. Lava cools into new rock.\n",
    "bread.txt": "Bread rises because yeast turns sugar into carbon dioxide, which the dough traps.\n",
}


def blocks() -> list[tuple[str, str]]:
    """The README's ```sh and ```python blocks, in order, as (language, code)."""
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def shell_lines(code: str) -> list[str]:
    """The block's commands: one per line, backslash continuations joined, blank lines dropped."""
    return [line.strip() for line in code.replace("\\\n", " ").splitlines() if line.strip()]


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", text, re.M))


def is_setup(code: str) -> bool:
    return all(line.startswith("make ") for line in shell_lines(code))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    (folder / "notes").mkdir()
    for name, text in NOTES.items():
        (folder / "notes" / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    environment = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    environment["PATH"] = f"{VENV_BIN}{os.pathsep}{environment.get('PATH', '')}"
    environment["PYTHONPATH"] = str(REPO)
    return environment


def test_readme_has_the_tour():
    found = blocks()
    assert [language for language, _ in found].count("python") >= 1
    commands = " ".join(code for language, code in found if language == "sh")
    for needed in ("make install", "semsearch index", "semsearch search", "semsearch ui", "semsearch serve", "curl"):
        assert needed in commands, f"the README's tour lost {needed!r}"
    assert README.stat().st_size <= 10_000, "the README is the front door: reference goes into docs/"


def check_setup(code: str, env: dict[str, str]) -> None:
    """Every set-up line names a Makefile target that ``make -n`` (nothing run) accepts."""
    targets = makefile_targets()
    quiet = {name: value for name, value in env.items() if not name.startswith(("MAKE", "MFLAGS"))}
    for line in shell_lines(code):
        words = shlex.split(line, comments=True)
        assert len(words) == 2 and words[1] in targets, f"{line!r} is not 'make TARGET' for a Makefile target"
        dry = subprocess.run(["make", "-n", words[1]], cwd=REPO, env=quiet, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, f"make -n {words[1]}: {dry.stderr}"


def wait_healthy(process: subprocess.Popen, url: str, log: Path) -> None:
    """Return once ``url`` answers 200; fail if ``process`` exits first or the deadline passes."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(f"{process.args} exited with {process.returncode}: {log.read_text()}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        if time.monotonic() > deadline:
            pytest.fail(f"{url} did not answer within {START_TIMEOUT} s: {log.read_text()}")
        time.sleep(0.2)


def check_output(line: str, output: str) -> None:
    """What a line's output must show beyond its exit status: a search over HTTP or ``--json`` finds hits."""
    if line.startswith("curl") and "/search" in line:
        assert json.loads(output)["hits"], f"{line!r} found nothing: {output}"
    elif line.startswith("semsearch search") and "--json" in line:
        assert json.loads(output), f"{line!r} found nothing: {output}"


def run_shell(code: str, cwd: Path, env: dict[str, str]) -> None:
    started: list[subprocess.Popen] = []
    ports: dict[int, int] = {}
    try:
        for line in shell_lines(code):
            for default, port in ports.items():
                line = line.replace(f":{default}", f":{port}")
            service = next((name for name in SERVICES if line.startswith(name)), None)
            if service:
                default, route = SERVICES[service]
                port = ports[default] = free_port()
                log = cwd / f"{service.split()[1]}-{port}.log"
                with open(log, "wb") as out:
                    process = subprocess.Popen(
                        ["bash", "-c", f"exec {line.split('#')[0]} --port {port}"],
                        cwd=cwd,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                started.append(process)
                wait_healthy(process, f"http://127.0.0.1:{port}{route}", log)
                continue
            done = subprocess.run(
                ["bash", "-o", "pipefail", "-c", line],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
            )
            assert done.returncode == 0, f"{line!r} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
            check_output(line, done.stdout)
    finally:
        for process in started:
            stop(process)


def run_python(code: str, cwd: Path) -> None:
    before = Path.cwd()
    os.chdir(cwd)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    try:
        exec(compile(code, str(README), "exec"), namespace)
    finally:
        os.chdir(before)
        for value in namespace.values():  # close what the block opened, so its folder can go
            close = getattr(value, "close", None)
            if callable(close) and type(value).__module__.startswith("retriever"):
                close()


def test_every_readme_block_runs(workdir, env, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for index, (language, code) in enumerate(blocks()):
        if language == "sh" and is_setup(code):
            check_setup(code, env)
        elif language == "sh":
            run_shell(code, workdir, env)
        else:
            run_python(code, workdir)
            assert capsys.readouterr().out.strip(), f"Python block {index} printed nothing"
