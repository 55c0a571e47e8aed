"""``semsearch keys``: a key is printed once, and the file keeps only its hash, readable by its owner."""

from __future__ import annotations

import stat

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
    for name, scope in (("a", "docs:read"), ("b", "*:write")):
        assert main(["keys", "add", name, "--scope", scope, "-f", str(keys)]) == 0
    tokens = capsys.readouterr().out.split()
    assert main(["keys", "list", "-f", str(keys)]) == 0
    listed = capsys.readouterr().out
    assert listed.splitlines() == ["a\tdocs:read", "b\t*:write"] and "sha256" not in listed
    assert main(["keys", "remove", "a", "-f", str(keys)]) == 0
    ring = KeyRing.load(keys)
    assert ring.match(tokens[0].encode()) is None and ring.match(tokens[1].encode()).name == "b"


@pytest.mark.parametrize("arguments, problem", [
    (["add", "b", "--scope", "docs:read"], "already has a key named 'b'"),
    (["add", "c", "--scope", "docs"], "COLLECTION:read or COLLECTION:write"),
    (["add", "no/slash", "--scope", "docs:read"], "key name"),
    (["remove", "zz"], "has no key named 'zz'"),
])
def test_bad_requests_leave_the_file_as_it_was(tmp_path, capsys, arguments, problem):
    keys = tmp_path / "keys"
    assert main(["keys", "add", "b", "--scope", "docs:read", "-f", str(keys)]) == 0
    before = keys.read_bytes()
    capsys.readouterr()
    assert main(["keys", *arguments, "-f", str(keys)]) == 2
    assert problem in capsys.readouterr().err and keys.read_bytes() == before
