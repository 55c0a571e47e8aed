"""API keys stored as hashes and scoped per collection (``app.server.access``), without a server."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("fastapi")

from app.server.access import (  # noqa: E402
    ADMIN,
    ALL,
    READ,
    WRITE,
    ApiKey,
    KeyRing,
    digest,
    needed_access,
    new_token,
    parse_scopes,
    readable,
)
from app.server.key_reload import ReloadingKeyRing  # noqa: E402
from retriever.errors import BadInputError  # noqa: E402


def test_a_new_token_is_random_and_only_its_hash_is_kept():
    first, second = new_token(), new_token()
    assert first != second and first.startswith("ss_") and len(first) >= 40
    stored = digest(first)
    assert stored.startswith("sha256:") and first not in stored and len(stored) == len("sha256:") + 64
    assert digest(first) == digest(first.encode()) != digest(second)


def test_scopes_parse_and_write_includes_read():
    assert parse_scopes("docs:read, papers:write") == {"docs": READ, "papers": WRITE}
    assert parse_scopes("docs:write,docs:read") == {"docs": WRITE}  # the wider grant is kept
    key = ApiKey("k", digest("t"), {"docs": READ, ALL: READ, "papers": WRITE})
    assert key.access("docs") == READ and key.access("papers") == WRITE and key.access("other") == READ
    assert ApiKey("k", digest("t"), {"docs": WRITE}).access("other") is None
    assert ApiKey("k", digest("t"), {ALL: WRITE}).access("any") == WRITE


def test_admin_is_a_scope_above_write_and_the_plain_key_holds_it_everywhere():
    assert parse_scopes("docs:admin,docs:read, papers:write") == {"docs": ADMIN, "papers": WRITE}
    assert parse_scopes("docs:write,docs:admin") == {"docs": ADMIN}
    key = ApiKey("k", digest("t"), {"docs": ADMIN, ALL: READ})
    assert key.access("docs") == ADMIN and key.access("other") == READ
    assert KeyRing.plain("operator").match(b"operator").access("any collection") == ADMIN


@pytest.mark.parametrize(
    "text, problem",
    [
        ("docs", "COLLECTION:read"),
        ("docs:owner", "COLLECTION:read"),
        ("../etc:read", "scope collection"),
        (" , ", "at least one scope"),
    ],
)
def test_a_bad_scope_is_refused_with_the_reason(text, problem):
    with pytest.raises(BadInputError, match=problem):
        parse_scopes(text)


def test_a_keys_file_parses_with_comments_and_the_environment_form_with_semicolons():
    text = f"# keys\nreader {digest('r')} docs:read  # the CI\n\nwriter {digest('w')} docs:write,*:read\n"
    ring = KeyRing.parse(text, "keys file k")
    assert [k.name for k in ring.keys] == ["reader", "writer"] and len(ring) == 2
    assert KeyRing.parse(ring.text(), "again").keys == ring.keys  # round trip
    env = KeyRing.parse(f"reader {digest('r')} docs:read;writer {digest('w')} docs:write", "$SEMSEARCH_KEYS")
    assert env.match(b"w").name == "writer" and env.match(b"r").name == "reader"


@pytest.mark.parametrize(
    "line, problem",
    [
        ("reader plaintext-key docs:read", "stored only as hashes"),
        (f"reader sha256:{'A' * 64} docs:read", "64 lower-case hex"),
        (f"reader {digest('r')}", "expected NAME"),
        (f"re/ader {digest('r')} docs:read", "key name"),
        (f"reader {digest('r')} docs:read\nreader {digest('s')} docs:read", "unique; repeated: reader"),
    ],
)
def test_a_bad_keys_line_is_named_by_source_and_entry(line, problem):
    with pytest.raises(BadInputError, match=problem) as caught:
        KeyRing.parse("# header\n" + line, "keys file /etc/k")
    if "unique" not in problem:
        assert "keys file /etc/k, entry 2" in str(caught.value)


def test_match_finds_the_key_by_hash_and_nothing_else():
    ring = KeyRing([ApiKey("a", digest("alpha"), {ALL: READ}), ApiKey("b", digest("beta"), {ALL: READ})])
    assert ring.match(b"beta").name == "b" and ring.match(b"alpha").name == "a"
    assert ring.match(b"gamma") is None and ring.match(b"") is None
    assert ring.match(digest("beta").encode()) is None  # the stored hash is not itself a key


def test_a_missing_keys_file_is_an_empty_ring_and_an_unreadable_one_an_error(tmp_path):
    assert not KeyRing.load(tmp_path / "none")
    bad = tmp_path / "keys"
    bad.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(BadInputError, match="cannot read it"):
        KeyRing.load(bad)


@pytest.mark.parametrize(
    "method, route, needed",
    [
        ("GET", "/stats", READ),
        ("HEAD", "/documents/x", READ),
        ("POST", "/search", READ),
        ("POST", "/embed", READ),
        ("POST", "/v1/embeddings", READ),
        ("POST", "/mcp", READ),
        ("POST", "/eval", READ),
        ("GET", "/judgments", READ),
        ("POST", "/judgments", WRITE),
        ("DELETE", "/judgments", WRITE),
        ("POST", "/documents", WRITE),
        ("DELETE", "/documents/x", WRITE),
        ("PUT", "/search", WRITE),
        ("POST", "/anything-new", WRITE),
        ("POST", "/admin/snapshot", ADMIN),
        ("GET", "/admin/anything", ADMIN),
        ("POST", "//admin/snapshot", ADMIN),
        ("POST", "/admin", ADMIN),
        ("POST", "/administer", WRITE),
    ],
)
def test_only_known_reads_are_reads(method, route, needed):
    assert needed_access(method, route) == needed


def test_a_write_key_is_refused_on_admin_routes_and_an_admin_key_passes():
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from app.server.access import AccessMiddleware, single_collection

    app = FastAPI()
    app.post("/admin/snapshot")(lambda: {"taken": True})
    app.post("/documents")(lambda: {"written": True})
    ring = KeyRing([ApiKey("w", digest("writer"), {"docs": WRITE}), ApiKey("a", digest("owner"), {"docs": ADMIN})])
    client = TestClient(AccessMiddleware(app, ring.merged(KeyRing.plain("operator")), single_collection("docs")))
    refused = client.post("/admin/snapshot", headers={"X-API-Key": "writer"})
    assert refused.status_code == 403 and refused.json()["detail"] == (
        "forbidden: key 'w' may write to collection 'docs' but not administer it (needs docs:admin)"
    )
    assert client.post("/documents", headers={"X-API-Key": "writer"}).json() == {"written": True}
    for key in ("owner", "operator"):
        assert client.post("/admin/snapshot", headers={"X-API-Key": key}).json() == {"taken": True}, key


def test_readable_lists_what_a_key_may_see():
    key = ApiKey("k", digest("t"), {"a": READ, "c": WRITE})
    ring = KeyRing([key])
    assert readable(ring, key, ["a", "b", "c"]) == ["a", "c"]
    assert readable(ring, None, ["a"]) == [] and readable(KeyRing(), None, ["a", "b"]) == ["a", "b"]


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def keys_line(name: str, token: str, scope: str = "docs:read") -> str:
    return f"{name} {digest(token)} {scope}\n"


def test_a_keys_file_is_read_again_when_it_changes_at_most_once_a_second(tmp_path):
    path, clock = tmp_path / "keys", Clock()
    path.write_text(keys_line("a", "alpha"))
    ring = ReloadingKeyRing(path, KeyRing.plain("operator"), clock=clock)
    assert ring.match(b"alpha").name == "a" and ring.match(b"operator").name == "api-key" and len(ring) == 2
    path.write_text(keys_line("b", "beta"))  # "a" removed, "b" added
    clock.now += 0.5
    assert ring.match(b"alpha").name == "a"  # not looked at yet
    clock.now += 0.5
    assert ring.match(b"alpha") is None and ring.match(b"beta").name == "b"
    assert ring.match(b"operator").name == "api-key"  # the fixed keys stay
    merged = ring.merged(KeyRing([ApiKey("second", digest("second"), {ALL: READ})]))
    path.write_text("")
    clock.now += 1
    assert merged.match(b"beta") is None and merged.match(b"second") is not None and merged  # empty, still keyed


def test_a_broken_keys_file_keeps_the_last_good_keys_and_is_reported_once(tmp_path, caplog):
    path, clock = tmp_path / "keys", Clock()
    path.write_text(keys_line("a", "alpha"))
    ring = ReloadingKeyRing(path, clock=clock)
    path.write_text("a plaintext-key docs:read\n")
    for _ in range(3):
        clock.now += 1
        assert ring.match(b"alpha").name == "a"
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and f"keys file {path}, entry 1" in errors[0] and "stay in force" in errors[0]
    path.unlink()
    clock.now += 1
    assert ring.match(b"alpha").name == "a"
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 2 and f"keys file {path}: cannot read it" in errors[1]
    path.write_text(keys_line("b", "beta"))
    clock.now += 1
    assert ring.match(b"alpha") is None and ring.match(b"beta").name == "b"


def test_a_reload_asked_for_reads_the_file_at_once_whatever_its_time_stamps(tmp_path):
    path, clock = tmp_path / "keys", Clock()
    path.write_text(keys_line("a", "alpha"))
    stamp = path.stat().st_mtime_ns
    ring = ReloadingKeyRing(path, clock=clock)
    path.write_text(keys_line("a", "gamma"))  # the same size; its old time stamp put back
    os.utime(path, ns=(stamp, stamp))
    clock.now += 5
    assert ring.match(b"alpha").name == "a"  # the file looks unchanged
    ring.request_reload()  # what SIGHUP does
    assert ring.match(b"alpha") is None and ring.match(b"gamma").name == "a"


def test_a_keys_file_that_cannot_be_used_at_start_is_refused(tmp_path):
    with pytest.raises(BadInputError, match="cannot read it"):
        ReloadingKeyRing(tmp_path / "none")
    (tmp_path / "keys").write_text(keys_line("api-key", "x"))
    with pytest.raises(BadInputError, match=r"keys file .*keys: key names must be unique"):
        ReloadingKeyRing(tmp_path / "keys", KeyRing.plain("operator"))
