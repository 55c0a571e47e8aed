"""``RemoteCollection`` against a real HTTP API (served in this process), and its errors against canned answers."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
import warnings
from typing import Iterator

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from retriever import Collection, InputTooLongWarning  # noqa: E402
from retriever.errors import (  # noqa: E402
    AuthenticationError,
    BadInputError,
    CollectionLockedError,
    DeadlineExceededError,
    FilterError,
    SemsearchError,
    ServerUnreachableError,
)
from retriever.redirects import redirect_refusal  # noqa: E402
from retriever.remote import RemoteCollection  # noqa: E402
from tests.app.test_server import DOCS  # noqa: E402
from tests.processes import answer_json, free_port  # noqa: E402
from tests.retriever.live_server import live_server  # noqa: E402

KEY = "remote-test-key"


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    """``(base URL, collection path)`` of a server (key ``KEY``) over a collection of ``DOCS``."""
    path = tmp_path_factory.mktemp("remote") / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(DOCS)
    with live_server(path, api_key=KEY) as url:
        yield url, path


@pytest.fixture()
def remote(served) -> RemoteCollection:
    return RemoteCollection(served[0], api_key=KEY)


def without_score(hit) -> dict:
    return {key: value for key, value in hit.to_dict().items() if key != "score"}


def test_search_returns_what_the_local_collection_returns(remote, served):
    with Collection.open(served[1]) as local:
        for mode in Collection.SEARCH_MODES:
            want, got = (
                local.search("green tea steamed", k=3, mode=mode),
                remote.search("green tea steamed", k=3, mode=mode),
            )
            assert [without_score(h) for h in got] == [without_score(h) for h in want], mode
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
        assert [h.id for h in remote.search("roasted", where={"lang": "de"})] == ["kaffee"]
        vector = local.embed("coffee roasting")[0]
        assert [h.id for h in remote.search(vector=vector, k=2)] == [h.id for h in local.search(vector=vector, k=2)]
        assert remote.search("tea", k=1, evidence="none")[0].evidence == ()


def test_get_finds_ids_with_slashes_and_returns_none_for_unknown_ones(remote, served):
    with Collection.open(served[1]) as local:
        assert remote.get("/notes/rivers and seas.md") == local.get("/notes/rivers and seas.md")
    assert remote.get("kaffee").text == "Kaffee wird geröstet." and remote.get("kaffee").metadata["lang"] == "de"
    assert remote.get("no such id") is None and remote.get("") is None
    assert "kaffee" in remote and "no such id" not in remote
    assert len(remote) == len(DOCS) and remote.info()["dim"] == remote.dim


def test_writes_report_what_the_server_did(remote):
    docs = [{"id": f"w{i}", "text": f"Written remotely, number {i}.", "metadata": {"n": i}} for i in range(5)]
    try:
        report = remote.upsert(docs, batch_size=2)  # three requests, one report
        assert report.added == [d["id"] for d in docs] and report.chunks == 5
        assert remote.upsert(docs).unchanged == [d["id"] for d in docs]
        with pytest.raises(BadInputError, match="already exist"):
            remote.add(docs[:1])
        vectors = remote.embed(["given vector one", "given vector two"])
        report = remote.upsert([{"id": "v1", "text": "one"}, {"id": "v2", "text": "two"}], vectors=vectors)
        assert report.added == ["v1", "v2"] and report.chunks == 2
        assert remote.search(vector=vectors[1], k=1)[0].id == "v2"
        with pytest.raises(BadInputError, match=r"shape \(1, dim\)"):
            remote.upsert([{"id": "v3", "text": "three"}], vectors=vectors)
    finally:
        report = remote.delete(["w0", "w1", "w2", "w3", "w4", "v1", "v2", "never stored"])
    assert report.deleted == ["w0", "w1", "w2", "w3", "w4", "v1", "v2"]
    assert remote.get("w0") is None


def test_embed_matches_the_local_model_and_reports_overflow(remote, served):
    vectors = remote.embed(["green tea", "coffee beans"])
    assert vectors.shape == (2, remote.dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    with Collection.open(served[1]) as local:
        assert np.allclose(vectors, local.embed(["green tea", "coffee beans"]), atol=1e-5)
    assert remote.embed([]).shape == (0, remote.dim)
    long_text = "tea " * 300  # the tiny model's window is 64 tokens
    with pytest.warns(InputTooLongWarning, match="text 1"):
        assert remote.embed(["short", long_text]).shape == (2, remote.dim)
    with pytest.raises(BadInputError, match="window"):
        remote.embed([long_text], on_overflow="error")


def test_bad_input_fails_with_the_reason_before_or_at_the_server(remote, served):
    with pytest.raises(FilterError, match="unknown operator"):
        remote.search("tea", where={"year": {"$near": 2020}})
    with pytest.raises(BadInputError, match="k"):
        remote.search("tea", k=5_000)  # allowed locally, over the server's limit: its 422
    with pytest.raises(BadInputError, match="bm25 search needs a query text"):
        remote.search(vector=[0.1] * remote.dim, mode="bm25")
    with pytest.raises(BadInputError, match="shape"):
        remote.search(vector=[0.1] * (remote.dim + 1))
    with pytest.raises(BadInputError, match="ids must be a list"):
        remote.delete("tea")
    with pytest.raises(AuthenticationError, match="wrong API key"):
        RemoteCollection(served[0], api_key="wrong").search("tea")
    with pytest.raises(AuthenticationError, match=r"missing API key.*pass api_key"):
        RemoteCollection(served[0]).get("tea")
    for url in ("ftp://example.org", "127.0.0.1:8000", "", None):
        with pytest.raises(BadInputError, match="http"):
            RemoteCollection(url)
    with pytest.raises(BadInputError, match="timeout"):
        RemoteCollection(served[0], timeout=0)


def test_a_server_that_is_not_there_is_named():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnreachableError, match=f"cannot reach the semsearch server at {url}"):
        RemoteCollection(url).search("tea")


class Canned(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``answer``: ``(status, body bytes, seconds to wait first)``."""

    answer: tuple[int, bytes, float] = (200, b"{}", 0.0)

    def do_GET(self):  # noqa: N802 - http.server's name
        status, body, wait = self.answer
        time.sleep(wait)
        answer_json(self, status, body)

    do_POST = do_DELETE = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def canned() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def detail(text: str, **more) -> bytes:
    return json.dumps({"detail": text} | more).encode()


@pytest.mark.parametrize(
    "status, body, error, message",
    [
        (400, detail("where: unknown operator '$near'"), FilterError, "where: unknown operator"),
        (400, detail("doc_id: not UTF-8"), BadInputError, "doc_id: not UTF-8"),
        (401, detail("wrong API key"), AuthenticationError, "refused the request: wrong API key"),
        (403, detail("host: without an API key ..."), AuthenticationError, "host: without an API key"),
        (409, detail("documents: 1 document id(s) already exist"), BadInputError, "already exist"),
        (413, detail("body: the request body is larger than the limit"), BadInputError, "larger than the limit"),
        (422, detail("where.year: bad", errors=[{"field": "where.year"}]), FilterError, "where.year: bad"),
        (422, detail("k: too big", errors=[{"field": "k"}]), BadInputError, "k: too big"),
        (503, detail("collection is locked by another writer"), CollectionLockedError, "locked"),
        (503, detail("search: past the deadline of 4 s"), DeadlineExceededError, "deadline"),
        (500, detail("internal error (KeyError); see the server log"), SemsearchError, r"failed \(500\): internal"),
        (404, detail("path: no such route"), SemsearchError, "is it a semsearch server"),
        (502, b"<html>bad gateway</html>", SemsearchError, r"failed \(502\): HTTP 502"),
        (200, b"<html>hello</html>", SemsearchError, "did not answer JSON"),
    ],
)
def test_error_answers_become_semsearch_errors(canned, status, body, error, message):
    Canned.answer = (status, body, 0.0)
    with pytest.raises(error, match=message) as raised:
        RemoteCollection(canned, api_key="k").search("tea")
    assert type(raised.value) is error  # the most specific class, not a parent


def test_a_slow_server_is_a_timeout_naming_it(canned):
    Canned.answer = (200, b'{"hits": []}', 1.0)
    with pytest.raises(ServerUnreachableError, match=rf"{canned} did not answer within 0.2 s"):
        RemoteCollection(canned, timeout=0.2).search("tea")
    Canned.answer = (200, b'{"hits": []}', 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RemoteCollection(canned).search("tea") == []


class Origin(http.server.BaseHTTPRequestHandler):
    """One origin on loopback: records every request ``(method, path, Host, Authorization, body)`` in ``seen``
    and answers through ``respond(method, path)`` -> ``(status, {header: value}, body bytes)``."""

    seen: list
    respond = None

    def do_GET(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, self.headers.get("Host"), self.headers.get("Authorization"), body))
        status, headers, answer = type(self).respond(self.command, self.path)
        self.send_response(status)
        for name, value in (headers | {"Content-Type": "application/json", "Content-Length": str(len(answer))}).items():
            self.send_header(name, value)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(answer)

    do_POST = do_DELETE = do_HEAD = do_GET

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def origin(respond) -> Iterator[tuple[str, list]]:
    """A server on its own loopback port (its own origin); yields ``(base URL, the requests it saw)``."""
    handler = type("OriginHandler", (Origin,), {"seen": [], "respond": staticmethod(respond)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    finally:
        server.shutdown()
        server.server_close()


STORED = json.dumps({"id": "tea", "text": "Green tea.", "title": "Tea", "metadata": {}}).encode()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_refused_and_the_key_stays_home(status):
    with (
        origin(lambda method, path: (200, {}, STORED)) as (elsewhere, seen_elsewhere),
        origin(lambda method, path: (status, {"Location": elsewhere + path}, b"{}")) as (home, seen_home),
    ):
        with pytest.raises(SemsearchError, match=rf"redirected to {elsewhere}, another origin: not followed") as err:
            RemoteCollection(home, api_key=KEY).get("tea")
        assert type(err.value) is SemsearchError and "\n" not in str(err.value)
        assert seen_elsewhere == []  # not even asked, with or without the key
        assert [(m, p, a) for m, p, _, a, _ in seen_home] == [("GET", "/documents/tea", f"Bearer {KEY}")]


@pytest.mark.parametrize(
    "location, shown",
    [
        ("https://127.0.0.1:{port}/documents/tea", "https://127.0.0.1:{port}"),  # another scheme, same host and port
        ("//localhost:{port}/documents/tea", "http://localhost:{port}"),  # another name of the same server
        ("http://127.0.0.1:{port}@127.0.0.2:{port}/documents/tea", "http://127.0.0.2:{port}"),  # userinfo trick
        ("http://someone@127.0.0.1:{port}/documents/tea", "a URL with credentials in it"),
    ],
)
def test_a_redirect_to_another_scheme_name_or_user_is_refused(location, shown):
    def respond(method, path):
        return (302, {"Location": location.format(port=port)}, b"{}") if path == "/documents/tea" else (200, {}, STORED)

    with origin(respond) as (home, seen):
        port = int(home.rsplit(":", 1)[1])
        with pytest.raises(SemsearchError, match="not followed") as err:
            RemoteCollection(home, api_key=KEY).get("tea")
        assert shown.format(port=port) in str(err.value)
        assert [p for _, p, _, _, _ in seen] == ["/documents/tea"]


def test_a_redirect_within_the_origin_is_followed_with_the_key_and_the_body():
    hits = json.dumps({"hits": []}).encode()

    def respond(method, path):
        if path.startswith("/v2/"):
            return 200, {}, STORED if method == "GET" else hits
        return 307 if method == "POST" else 302, {"Location": "/v2" + path}, b"{}"

    with origin(respond) as (home, seen):
        remote = RemoteCollection(home, api_key=KEY)
        assert remote.get("tea").text == "Green tea."
        assert remote.search("green tea", k=2) == []
        assert [(m, p, a) for m, p, _, a, _ in seen] == [
            ("GET", "/documents/tea", f"Bearer {KEY}"),
            ("GET", "/v2/documents/tea", f"Bearer {KEY}"),
            ("POST", "/search", f"Bearer {KEY}"),
            ("POST", "/v2/search", f"Bearer {KEY}"),
        ]
        assert seen[2][4] == seen[3][4] and json.loads(seen[3][4])["query"] == "green tea"  # 307 keeps the body


@pytest.mark.parametrize(
    "current, location, refused",
    [
        ("https://search.example/stats", "http://search.example/stats", "redirected to http://search.example, another"),
        (
            "http://search.example/stats",
            "https://search.example/stats",
            "redirected to https://search.example, another",
        ),
        (
            "http://search.example/stats",
            "HTTP://Search.Example:80/v2/stats",
            None,
        ),  # the same origin, written otherwise
        ("https://search.example:8443/a", "/b?c=1", None),
        ("https://search.example/a", "//search.example.evil/a", "redirected to https://search.example.evil, another"),
        ("https://search.example/a", "https://search.example:99999/a", "which is not an http(s) URL"),
        ("https://search.example/a", "javascript:alert(1)", "which is not an http(s) URL"),
    ],
)
def test_redirect_rules_keep_scheme_host_and_port(current, location, refused):
    problem = redirect_refusal(current, location)
    assert problem is None if refused is None else refused in problem, problem
