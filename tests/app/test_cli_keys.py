"""``semsearch keys``: a key is printed once, and the file keeps only its hash, readable by its owner."""

from __future__ import annotations

import multiprocessing
import stat
import sys

import pytest

pytest.importorskip("fastapi")

from app.cli import main  # noqa: E402
from app.server.access import KeyRing  # noqa: E402


def test_add_prints_the_key_once_and_stores_only_its_hash(tmp_path, capsys):
    keys = tmp_path / "conf" / "keys"
    assert main(["keys", "add", "ci", "--scope", "docs:read", "--scope", "papers:write", "-f", str(keys)]) == 0
    out = capsys.readouterr()
    token = out.out.strip()
    assert token.startswith("ss_") and "only time it is shown" in out.err
    text = keys.read_text()
    assert token not in text and "ci sha256:" in text
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    key = KeyRing.load(keys).match(token.encode())
    assert key.name == "ci" and dict(key.scopes) == {"docs": "read", "papers": "write"}


def test_list_shows_names_and_scopes_and_remove_takes_one_out(tmp_path, capsys):
    keys = tmp_path / "keys"
    for name, scope in (("a", "docs:read"), ("b", "*:write"), ("c", "docs:admin")):
        assert main(["keys", "add", name, "--scope", scope, "-f", str(keys)]) == 0
    tokens = capsys.readouterr().out.split()
    assert main(["keys", "list", "-f", str(keys)]) == 0
    listed = capsys.readouterr().out
    assert listed.splitlines() == ["a\tdocs:read", "b\t*:write", "c\tdocs:admin"] and "sha256" not in listed
    assert main(["keys", "remove", "a", "-f", str(keys)]) == 0
    ring = KeyRing.load(keys)
    assert ring.match(tokens[0].encode()) is None and ring.match(tokens[1].encode()).name == "b"


@pytest.mark.parametrize(
    "arguments, problem",
    [
        (["add", "b", "--scope", "docs:read"], "already has a key named 'b'"),
        (["add", "c", "--scope", "docs"], "COLLECTION:read, COLLECTION:write or COLLECTION:admin"),
        (["add", "no/slash", "--scope", "docs:read"], "key name"),
        (["remove", "zz"], "has no key named 'zz'"),
    ],
)
def test_bad_requests_leave_the_file_as_it_was(tmp_path, capsys, arguments, problem):
    keys = tmp_path / "keys"
    assert main(["keys", "add", "b", "--scope", "docs:read", "-f", str(keys)]) == 0
    before = keys.read_bytes()
    capsys.readouterr()
    assert main(["keys", *arguments, "-f", str(keys)]) == 2
    assert problem in capsys.readouterr().err and keys.read_bytes() == before


def keys_command(start, arguments: list[str]) -> None:
    """A ``semsearch keys`` command in a process of its own, started with the others at ``start``."""
    start.wait(timeout=60)
    sys.exit(main(["keys", *arguments]))


def test_concurrent_adds_and_removes_lose_nothing_and_bring_nothing_back(tmp_path):
    keys = tmp_path / "keys"
    for i in range(8):
        assert main(["keys", "add", f"old{i}", "--scope", "docs:read", "-f", str(keys)]) == 0
    commands = [["add", f"new{i}", "--scope", "docs:write", "-f", str(keys)] for i in range(8)] + [
        ["remove", f"old{i}", "-f", str(keys)] for i in range(8)
    ]
    fork = multiprocessing.get_context("fork")  # this process's modules, already imported: all start at once
    start = fork.Barrier(len(commands))
    processes = [fork.Process(target=keys_command, args=(start, arguments)) for arguments in commands]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * len(commands)
    assert sorted(key.name for key in KeyRing.load(keys).keys) == [f"new{i}" for i in range(8)]
