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
from retriever.remote import RemoteCollection  # noqa: E402
from tests.app.test_server import DOCS  # noqa: E402
from tests.processes import free_port  # noqa: E402
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
            want, got = local.search("green tea steamed", k=3, mode=mode), remote.search("green tea steamed", k=3,
                                                                                          mode=mode)
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
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

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


@pytest.mark.parametrize("status, body, error, message", [
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
])
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
