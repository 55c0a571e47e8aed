"""API keys stored as hashes and scoped per collection (``app.server.access``), without a server."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from app.server.access import (  # noqa: E402
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


@pytest.mark.parametrize("text, problem", [
    ("docs", "COLLECTION:read"),
    ("docs:admin", "COLLECTION:read"),
    ("../etc:read", "scope collection"),
    (" , ", "at least one scope"),
])
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


@pytest.mark.parametrize("line, problem", [
    ("reader plaintext-key docs:read", "stored only as hashes"),
    (f"reader sha256:{'A' * 64} docs:read", "64 lower-case hex"),
    (f"reader {digest('r')}", "expected NAME"),
    (f"re/ader {digest('r')} docs:read", "key name"),
    (f"reader {digest('r')} docs:read\nreader {digest('s')} docs:read", "unique; repeated: reader"),
])
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


@pytest.mark.parametrize("method, route, needed", [
    ("GET", "/stats", READ), ("HEAD", "/documents/x", READ), ("POST", "/search", READ), ("POST", "/embed", READ),
    ("POST", "/v1/embeddings", READ), ("POST", "/mcp", READ), ("POST", "/documents", WRITE),
    ("DELETE", "/documents/x", WRITE), ("POST", "/admin/snapshot", WRITE), ("PUT", "/search", WRITE),
    ("POST", "/anything-new", WRITE),
])
def test_only_known_reads_are_reads(method, route, needed):
    assert needed_access(method, route) == needed


def test_readable_lists_what_a_key_may_see():
    key = ApiKey("k", digest("t"), {"a": READ, "c": WRITE})
    ring = KeyRing([key])
    assert readable(ring, key, ["a", "b", "c"]) == ["a", "c"]
    assert readable(ring, None, ["a"]) == [] and readable(KeyRing(), None, ["a", "b"]) == ["a", "b"]
