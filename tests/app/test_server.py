"""The HTTP API, run as a real ``semsearch serve`` process on a loopback port and called over HTTP."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from tests.processes import stop

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from app.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KEY = "test-key-123"
HIT_KEYS = {"id", "score", "title", "text", "start", "end", "metadata", "evidence", "location"}
DOCS = [
    {
        "id": "tea",
        "title": "Green tea",
        "text": "Green tea is steamed right after picking. " * 20,
        "metadata": {"lang": "en", "year": 2021},
    },
    {
        "id": "coffee",
        "title": "Coffee",
        "text": "Coffee beans are roasted at high temperature.",
        "metadata": {"lang": "en", "year": 2019},
    },
    {"id": "kaffee", "title": "Kaffee", "text": "Kaffee wird geröstet.", "metadata": {"lang": "de", "year": 2020}},
    {
        "id": "/notes/rivers and seas.md",
        "title": "Rivers",
        "text": "Rivers flow into the sea through deltas.",
        "metadata": {"source": "/notes/rivers and seas.md"},
    },
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Api:
    """A running ``semsearch serve`` and a tiny JSON client for it."""

    def __init__(self, base: str, key: str | None):
        self.base, self.key = base, key

    def call(self, method: str, path: str, body=None, *, key: str | None = "default", headers=None, raw=None):
        key = self.key if key == "default" else key
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        head = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {key}"} if key else {})
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=head | (headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def search(self, **body):
        return self.call("POST", "/search", body)


def start_server(collection: Path, tmp: Path, env_key: str | None, *options: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "SEMSEARCH_API_KEY"}
    if env_key:
        env["SEMSEARCH_API_KEY"] = env_key
    log = open(tmp / f"server-{port}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "-c", str(collection), "--port", str(port), *options],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}: {(tmp / f'server-{port}.log').read_text()}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as response:
                if response.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("server did not answer /health within 90 s")


@contextlib.contextmanager
def serving(tmp: Path, model_dir: Path) -> Iterator[tuple[str, Path]]:
    """``semsearch serve`` (key ``KEY``) over a new collection of ``DOCS`` in ``tmp``: ``(base URL, collection)``."""
    from retriever import Collection

    path = tmp / "col"
    with Collection.create(path, model_dir) as col:
        col.upsert(DOCS)
    proc, base = start_server(path, tmp, KEY, "--snapshot-root", str(tmp / "snapshots"))
    try:
        yield base, path
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    with serving(tmp_path_factory.mktemp("served"), tiny_model_dir) as (base, path):
        yield Api(base, KEY), path


@pytest.fixture()
def api(served) -> Api:
    return served[0]


def test_health_needs_no_key_and_everything_else_does(api):
    assert api.call("GET", "/health", key=None) == (200, {"status": "ok"})
    status, body = api.call("GET", "/stats", key=None)
    assert status == 401 and "API key" in body["detail"]
    assert api.call("GET", "/stats", key="wrong")[0] == 401
    assert api.call("POST", "/search", {"query": "tea"}, key=None)[0] == 401
    status, stats = api.call("GET", "/stats", key=None, headers={"X-API-Key": KEY})
    assert status == 200
    status, stats = api.call("GET", "/stats")
    assert status == 200 and stats["documents"] >= 4 and stats["index"] and stats["model"]
    assert stats["encoder"]["query_batching"]["chosen"] in ("batched", "concurrent")  # measured at start
    assert set(stats) >= {"documents", "chunks", "model", "index", "size_bytes", "updated_at", "search_modes"}
    for docs in ("/openapi.json", "/docs", "/redoc"):
        assert api.call("GET", docs, key=None)[0] == 401, docs
    status, schema = api.call("GET", "/openapi.json")
    assert status == 200 and {"/search", "/embed", "/documents", "/health", "/stats"} <= set(schema["paths"])
    assert str(REPO) not in json.dumps(schema) and "/tmp" not in json.dumps(schema)  # no absolute paths


def test_requests_are_logged_only_with_access_log(served, tmp_path):
    api, path = served
    assert api.search(query="tea")[0] == 200
    default_log = path.parent / f"server-{api.base.rsplit(':', 1)[1]}.log"  # the module's server: no flag
    proc, base = start_server(path, tmp_path, KEY, "--access-log")
    try:
        assert Api(base, KEY).search(query="tea")[0] == 200
    finally:
        stop(proc)
    logged = (tmp_path / f"server-{base.rsplit(':', 1)[1]}.log").read_text()
    assert '"POST /search HTTP/1.1" 200' in logged
    assert "POST /search" not in default_log.read_text()


def test_search_returns_hits_like_the_cli(api):
    from retriever import Collection

    status, body = api.search(query="roasted coffee", k=3)
    assert status == 200 and set(body) == {"hits"}
    hits = body["hits"]
    assert 1 <= len(hits) <= 3 and all(set(hit) == HIT_KEYS for hit in hits)
    status, body = api.search(query="coffee", k=10, where={"lang": "de"})
    assert status == 200 and [hit["id"] for hit in body["hits"]] == ["kaffee"]
    for mode in Collection.SEARCH_MODES:
        status, body = api.search(query="tea", k=2, mode=mode)
        assert status == 200 and body["hits"], mode


def test_admin_snapshot_is_kept_under_the_snapshot_root_by_a_name_the_server_checks(served):
    from retriever import Collection

    api, path = served
    root = path.parent / "snapshots"
    status, body = api.call("POST", "/admin/snapshot", {"name": "first"})
    assert status == 200 and body["path"] == "col/first" and body["documents"] == len(DOCS) and body["linked"] > 0
    with Collection.open(root / "col" / "first") as snap:
        assert len(snap) == len(DOCS) and snap.search("Kaffee", mode="bm25")[0].id == "kaffee"
    status, body = api.call("POST", "/admin/snapshot", {"name": "first"})
    assert status == 409 and "exists" in body["detail"] and str(root) not in body["detail"]
    status, body = api.call("POST", "/admin/snapshot", {})
    assert status == 200 and body["path"] == f"col/{body['name']}"
    status, body = api.call("POST", "/admin/snapshot", {"dest": str(path.parent / "papers" / "taggers")})
    assert status == 422 and "server chooses" in body["detail"] and not (path.parent / "papers").exists()
    for name in ("../papers", "a/b", "/tmp/x", ".hidden", "x" * 65):
        status, body = api.call("POST", "/admin/snapshot", {"name": name})
        assert status == 422 and "name" in body["detail"], name
    status, body = api.call("GET", "/admin/snapshots")
    assert status == 200 and [s["name"] for s in body["snapshots"]][0] == "first" and len(body["snapshots"]) == 2
    assert api.call("DELETE", "/admin/snapshots/first") == (200, {"removed": "first"})
    assert api.call("DELETE", "/admin/snapshots/first")[0] == 404 and not (root / "col" / "first").exists()
    assert api.call("POST", "/admin/snapshot", {"name": "x"}, key=None)[0] == 401


def test_without_a_snapshot_root_no_snapshot_is_taken_over_http(tmp_path, tiny_model_dir):
    from fastapi.testclient import TestClient

    from app.server import create_app
    from retriever import Collection

    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.upsert(DOCS[:1])
    with TestClient(create_app(tmp_path / "col", warm_up=False), base_url="http://127.0.0.1") as client:
        response = client.post("/admin/snapshot", json={"name": "x"})
        assert response.status_code == 403 and "--snapshot-root" in response.json()["detail"]
        assert client.get("/admin/snapshots").status_code == 403
    assert sorted(p.name for p in tmp_path.iterdir()) == ["col"]


def test_one_snapshot_at_a_time_and_no_more_than_the_server_keeps(tmp_path, tiny_model_dir):
    from fastapi.testclient import TestClient
    from filelock import FileLock

    from app.server import create_app
    from retriever import Collection

    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.upsert(DOCS[:2])
    app = create_app(tmp_path / "col", warm_up=False, snapshot_root=tmp_path / "snaps", max_snapshots=2)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        (tmp_path / "snaps" / "col").mkdir()
        with FileLock(str(tmp_path / "snaps" / "col" / ".taking.lock")):  # as another worker taking one
            response = client.post("/admin/snapshot", json={"name": "a"})
        assert response.status_code == 429 and response.headers["Retry-After"] and "being taken" in response.text
        assert [client.post("/admin/snapshot", json={"name": n}).status_code for n in "abc"] == [200, 200, 507]
        assert "2 snapshots" in client.post("/admin/snapshot", json={"name": "c"}).json()["detail"]
    assert sorted(p.name for p in (tmp_path / "snaps" / "col").iterdir() if not p.name.startswith(".")) == ["a", "b"]


def test_a_snapshot_root_inside_or_around_a_collection_is_refused(tmp_path, tiny_model_dir):
    from app.server import create_app
    from retriever import Collection
    from retriever.errors import BadInputError

    Collection.create(tmp_path / "cols" / "col", tiny_model_dir).close()
    for root in (tmp_path / "cols" / "col" / "snaps", tmp_path / "cols", tmp_path):
        with pytest.raises(BadInputError, match="lies inside or holds the collection"):
            create_app(tmp_path / "cols" / "col", warm_up=False, snapshot_root=root)
    assert not (tmp_path / "cols" / "col" / "snaps").exists()


def test_search_hits_carry_evidence_unless_asked_for_none(api):
    status, body = api.search(query="roasted coffee", k=1, mode="bm25")
    sentence = body["hits"][0]["evidence"][0]
    assert status == 200 and sentence["method"] == "terms" and sentence["text"] == body["hits"][0]["text"]
    assert [t["term"] for t in sentence["terms"]] == ["Coffee", "roasted"]
    status, body = api.search(query="roasted coffee", k=1, evidence="none")
    assert status == 200 and body["hits"][0]["evidence"] == []
    status, body = api.search(query="roasted coffee", evidence="everything")
    assert status == 422 and "evidence" in json.dumps(body)


@pytest.mark.parametrize(
    "body, status, names",
    [
        ({"query": ""}, 422, "query"),
        ({"query": "   "}, 422, "query"),
        ({"query": "x" * 2001}, 422, "query"),
        ({"query": "tea", "k": 0}, 422, "k"),
        ({"query": "tea", "k": 1001}, 422, "k"),
        ({"query": "tea", "k": "ten"}, 422, "k"),
        ({"query": "tea", "mode": "psychic"}, 422, "mode"),
        ({"query": "tea", "where": ["lang"]}, 422, "where"),
        ({"query": "tea", "where": {"year": {"$between": [1, 2]}}}, 400, "where"),
        ({"query": "tea", "limit": 3}, 422, "limit"),
        ({"query": "tea", "": 3}, 422, "body['']"),
        (
            {"query": "tea", "where": {"$not": {"$not": {"lang": {"$in": list(range(1001))}}}}},
            400,
            "where: $not.$not.lang.$in",
        ),
        ({"k": 3}, 422, "query"),
    ],
)
def test_bad_searches_name_the_problem(api, body, status, names):
    got, answer = api.search(**body)
    assert got == status and names in answer["detail"], answer


def test_malformed_and_oversized_bodies(api):
    status, body = api.call("POST", "/search", raw=b'{"query": "tea",')
    assert status == 422 and "invalid JSON" in body["detail"]
    status, body = api.call("POST", "/search", raw=b"[1, 2]")
    assert status == 422 and "body" in body["detail"]
    assert api.call("GET", "/no/such/route")[0] == 404


def test_body_over_the_limit_gets_413_before_it_is_sent(api):
    """A client that announces 11 MB (and waits, as ``Expect: 100-continue`` asks) gets 413 at once."""
    url = urllib.parse.urlsplit(api.base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.putrequest("POST", "/documents")
        for name, value in (
            ("Content-Type", "application/json"),
            ("Content-Length", str(11 * 1024 * 1024)),
            ("Expect", "100-continue"),
            ("Authorization", f"Bearer {KEY}"),
        ):
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 413 and "larger than the limit" in json.loads(response.read())["detail"]
    finally:
        conn.close()


def test_body_over_the_limit_sent_in_full_gets_a_readable_413(api):
    """A client that sends all 11 MB at once reads a 413, not a reset connection."""
    url = urllib.parse.urlsplit(api.base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    try:
        conn.request(
            "POST",
            "/documents",
            body=b" " * (11 * 1024 * 1024),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
        )
        response = conn.getresponse()
        assert response.status == 413 and json.loads(response.read())["detail"].startswith("body:")
    finally:
        conn.close()


def test_ids_with_a_newline_and_lone_surrogates_are_refused_by_name(api):
    status, body = api.call("POST", "/documents", {"documents": [{"id": "a\nb", "text": "x"}]})
    assert status == 422 and "documents[0].id" in body["detail"] and "control character" in body["detail"]
    raw = b'{"documents": [{"id": "ok", "text": "x", "metadata": {"k": "\\ud800"}}]}'
    status, body = api.call("POST", "/documents", raw=raw)
    assert status == 422 and "documents[0].metadata" in body["detail"] and "UTF-8" in body["detail"]
    status, body = api.call("POST", "/embed", raw=b'{"texts": ["ok", "\\ud800"]}')
    assert status == 422 and "texts[1]" in body["detail"]
    status, body = api.call("POST", "/search", raw=b'{"query": "tea", "where": {"lang": "\\udfff"}}')
    assert status == 400 and body["detail"].startswith("where: lang")


def test_chunked_body_over_the_limit_gets_413(api):
    """Without a Content-Length the middleware counts the bytes as they arrive."""
    url = urllib.parse.urlsplit(api.base)

    def post_chunked(chunks):
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        try:
            conn.request(
                "POST",
                "/search",
                body=iter(chunks),
                encode_chunked=True,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
            )
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    status, body = post_chunked([b'{"query": ', b'"green tea", "k": 2}'])
    assert status == 200 and len(body["hits"]) == 2
    padding = b" " * (1024 * 1024)
    status, body = post_chunked([b'{"query": "tea"'] + [padding] * 10 + [b"}"])
    assert status == 413 and "larger than the limit" in body["detail"]


def test_embed(api, served, tiny_embedder):
    status, body = api.call("POST", "/embed", {"texts": ["green tea", "rivers"]})
    assert status == 200 and body["dim"] == len(body["embeddings"][0]) and len(body["embeddings"]) == 2
    vectors = np.array(body["embeddings"], dtype=np.float32)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert np.allclose(vectors, tiny_embedder.embed(["green tea", "rivers"]), atol=1e-5)  # same model, same path

    long_text = "tea " * 500
    status, body = api.call("POST", "/embed", {"texts": ["ok", long_text]})
    assert status == 400 and "texts[1]" in body["detail"] and "truncate" in body["detail"]
    status, body = api.call("POST", "/embed", {"texts": ["ok", long_text], "truncate": True})
    assert status == 200 and body["truncated"] == [1]

    assert api.call("POST", "/embed", {"texts": []})[0] == 422
    status, body = api.call("POST", "/embed", {"texts": ["x"] * 257})
    assert status == 422 and "texts" in body["detail"]
    status, body = api.call("POST", "/embed", {"texts": ["x", "y" * 100_001]})
    assert status == 422 and "texts[1]" in body["detail"]
    status, body = api.call("POST", "/embed", {"texts": ["x", 3]})
    assert status == 422 and "texts[1]" in body["detail"]


def test_documents_add_get_upsert_delete(api):
    doc_id = "/papers/volcanoes & lava.txt"
    path = "/documents/" + urllib.parse.quote(doc_id, safe="")
    doc = {"id": doc_id, "title": "Volcanoes", "text": "Volcanic eruptions pour lava.", "metadata": {"lang": "en"}}
    status, body = api.call("POST", "/documents", {"documents": [doc]})
    assert status == 200 and body["added"] == [doc_id] and body["chunks"] >= 1
    status, body = api.call("GET", path)
    assert status == 200 and body == {k: doc[k] for k in ("id", "title", "text", "metadata")}
    assert api.call("POST", "/documents", {"documents": [doc]})[1]["unchanged"] == [doc_id]
    status, body = api.call("POST", "/documents", {"documents": [doc], "upsert": False})
    assert status == 409 and doc_id in body["detail"]
    changed = doc | {"text": "Lava cools into basalt."}
    assert api.call("POST", "/documents", {"documents": [changed]})[1]["updated"] == [doc_id]
    _, found = api.search(query="lava basalt", k=10, where={"lang": "en"})
    assert doc_id in [hit["id"] for hit in found["hits"]]

    assert api.call("DELETE", path) == (200, {"deleted": doc_id})
    status, body = api.call("GET", path)
    assert status == 404 and "not found" in body["detail"]
    assert api.call("DELETE", path)[0] == 404
    _, found = api.search(query="lava basalt", k=10)
    assert doc_id not in [hit["id"] for hit in found["hits"]]


@pytest.mark.parametrize(
    "body, names",
    [
        ({"documents": []}, "documents"),
        ({"documents": [{"id": "a"}]}, "documents[0].text"),
        ({"documents": [{"id": "", "text": "x"}]}, "documents[0].id"),
        ({"documents": [{"id": "a", "text": "x", "lang": "en"}]}, "documents[0].lang"),
        ({"documents": [{"id": "a", "text": "x", "metadata": [1]}]}, "documents[0].metadata"),
        ({"documents": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, "appears more than once"),
        ({"documents": [{"id": f"d{i}", "text": "x"} for i in range(1001)]}, "documents"),
    ],
)
def test_bad_documents_name_the_problem(api, body, names):
    status, answer = api.call("POST", "/documents", body)
    assert status == 422 and names in answer["detail"], answer


def test_searches_keep_answering_while_a_batch_job_writes(api, served, tmp_path, tiny_embedder):
    """The batch job runs in this process (another one than the server), commit after commit."""
    import threading

    from indexer.job import index_paths
    from retriever import Collection

    _, path = served
    corpus = tmp_path / "late.jsonl"
    corpus.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"late-{i}",
                    "title": f"Late {i}",
                    "text": f"Late document number {i} about tea.",
                    "batch": "late",
                }
            )
            + "\n"
            for i in range(60)
        ),
        encoding="utf-8",
    )
    reports = []

    def job():
        with Collection.open(path, tiny_embedder) as col:
            reports.append(index_paths(col, [corpus], batch_docs=4, progress=False))

    writer = threading.Thread(target=job)
    writer.start()
    statuses, counts = [], []
    while writer.is_alive():
        status, body = api.search(query="tea", k=100, where={"batch": "late"})
        statuses.append(status)
        counts.append(len(body.get("hits", [])))
    writer.join()
    assert reports and len(reports[0].written.added) == 60 and not reports[0].skipped
    assert statuses and set(statuses) == {200}
    assert counts == sorted(counts)  # each answer shows the last commit: never fewer than before
    _, body = api.search(query="tea", k=200, where={"batch": "late"})
    assert len(body["hits"]) == 60  # every commit of the job is visible, no restart


def test_serve_refuses_public_address_without_key(monkeypatch, capsys, served):
    _, path = served
    monkeypatch.delenv("SEMSEARCH_API_KEY", raising=False)
    assert main(["serve", "-c", str(path), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to listen on 0.0.0.0 without an API key" in err
    assert main(["serve", "-c", str(path.parent / "missing")]) == 2
    assert "missing" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["serve", "-c", str(path), "--port", str(taken.getsockname()[1])]) == 1
        assert "cannot listen" in capsys.readouterr().err
    assert main(["ui", "-c", str(path / "manifest.json")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_without_a_key_every_route_is_open_and_parallel_searches_agree(tmp_path, tiny_model_dir):
    """``create_app`` on uvicorn in a thread of this process, still called over HTTP."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import uvicorn

    from app.server import create_app
    from retriever import Collection

    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.upsert(DOCS)
    server = uvicorn.Server(
        uvicorn.Config(create_app(tmp_path / "col"), host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "in-thread server did not start"
            time.sleep(0.05)
        api = Api(f"http://127.0.0.1:{server.config.port}", key=None)
        assert api.call("GET", "/stats")[0] == 200
        expected = api.search(query="roasted coffee", k=4)[1]["hits"]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: api.search(query="roasted coffee", k=4), range(32)))
        assert all(status == 200 and body["hits"] == expected for status, body in answers)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def test_documents_and_searches_with_vectors_computed_elsewhere(api):
    status, body = api.call("GET", "/stats")
    dim = body["dim"]
    rng = np.random.default_rng(11)
    vectors = rng.normal(size=(2, dim))
    docs = [
        {"id": f"vec-{i}", "text": f"embedded elsewhere, number {i}", "metadata": {"lang": "xx"}, "vector": list(v)}
        for i, v in enumerate(vectors)
    ]
    status, body = api.call("POST", "/documents", {"documents": docs})
    assert status == 200 and sorted(body["added"]) == ["vec-0", "vec-1"] and body["chunks"] == 2
    status, body = api.search(vector=list(vectors[1]), k=1, where={"lang": "xx"})
    assert status == 200 and body["hits"][0]["id"] == "vec-1"
    assert body["hits"][0]["score"] == pytest.approx(1.0, abs=1e-4)
    status, body = api.search(query="embedded elsewhere", vector=list(vectors[0]), k=2, where={"lang": "xx"})
    assert status == 200 and body["hits"][0]["id"] == "vec-0"
    status, body = api.search(vector=[1.0] * (dim + 1))
    assert status == 400 and "shape" in body["detail"]
    status, body = api.search(k=3)
    assert status == 422 and "vector" in body["detail"]
    mixed = [dict(docs[0], id="vec-2"), {k: v for k, v in docs[1].items() if k != "vector"} | {"id": "vec-3"}]
    status, body = api.call("POST", "/documents", {"documents": mixed})
    assert status == 422 and "documents[1].vector" in body["detail"]
    for i in range(2):
        assert api.call("DELETE", f"/documents/vec-{i}")[0] == 200


def test_concurrent_searches_go_through_the_micro_batcher(tmp_path, tiny_model_dir):
    """The server encodes concurrent queries the faster way it measured; parallel searches each get their own hits."""
    from concurrent.futures import ThreadPoolExecutor

    from fastapi.testclient import TestClient

    from app.server import create_app
    from retriever import Collection
    from retriever.encoding.batching import BatchedBackend

    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.upsert(DOCS)
    app = create_app(tmp_path / "col")
    queries = ["roasted coffee", "green tea", "rivers and the sea", "snow on mountains"] * 6
    with TestClient(app, base_url="http://127.0.0.1") as client:  # no key: loopback names only
        embedder = app.state.collection.embedder
        assert isinstance(embedder._backend, BatchedBackend) == (
            embedder.decision["query_batching"]["chosen"] == "batched"
        )
        alone = {
            q: client.post("/search", json={"query": q, "k": 3, "mode": "dense"}).json()["hits"] for q in set(queries)
        }
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(lambda q: client.post("/search", json={"query": q, "k": 3, "mode": "dense"}), queries)
            )
    assert all(r.status_code == 200 for r in answers)
    for query, response in zip(queries, answers):
        got = response.json()["hits"]
        assert [h["id"] for h in got] == [h["id"] for h in alone[query]]
        assert [h["score"] for h in got] == pytest.approx([h["score"] for h in alone[query]], abs=1e-5)


def _worker_processes(pid: int) -> list[int]:
    """Processes started by ``pid`` through multiprocessing's spawn (uvicorn's workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def test_workers_serve_one_collection_from_several_processes(tmp_path, tiny_model_dir):
    from retriever import Collection

    path = tmp_path / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(DOCS)
    proc, base = start_server(path, tmp_path, KEY, "--workers", "2")
    try:
        api = Api(base, KEY)
        wait_until = time.monotonic() + 60
        while len(_worker_processes(proc.pid)) < 2 and time.monotonic() < wait_until:
            time.sleep(0.2)
        workers = _worker_processes(proc.pid)
        assert len(workers) == 2
        health = api.call("GET", "/health", key=None)
        while health[1]["workers"]["ready"] < 2 and time.monotonic() < wait_until:  # the second may still load
            time.sleep(0.2)
            health = api.call("GET", "/health", key=None)
        assert health == (200, {"status": "ok", "workers": {"ready": 2, "of": 2}})
        assert api.call("POST", "/documents", {"documents": [{"id": "ash", "text": "volcanic ash settles"}]})[0] == 200
        for _ in range(8):  # each request on a new connection, to whichever worker takes it
            status, body = api.search(query="volcanic", mode="bm25", k=3)
            assert status == 200 and [hit["id"] for hit in body["hits"]] == ["ash"]
        status, body = api.search(query="green tea", k=2)
        assert status == 200 and len(body["hits"]) == 2
        from tests.app.test_metrics import scrape

        samples = scrape(base)  # whichever worker answers counts for both
        searches = (("method", "POST"), ("route", "/search"), ("status", "200"))
        assert samples[("semsearch_requests_total", searches)] == 9
        assert samples[("semsearch_search_stage_seconds_count", (("stage", "bm25"),))] == 9
    finally:
        stop(proc)
    deadline = time.monotonic() + 30
    while [pid for pid in workers if Path(f"/proc/{pid}").exists()] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]  # stopping the server stops its workers
    assert not list(Path(tempfile.gettempdir()).glob(f"semsearch-workers-*/{workers[0]}"))  # its ready marks are gone


def test_a_worker_group_counts_the_ready_workers_that_still_run(tmp_path):
    from app.server import WorkerGroup

    group = WorkerGroup(tmp_path, 3)
    assert group.ready() == 0
    group.mark_ready()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / dead.stdout.strip()).touch()  # a worker that was ready and has died
    (tmp_path / "12.tmp").touch()  # not a mark
    assert group.ready() == 1


def test_workers_must_be_a_sensible_count(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "-c", str(tmp_path), "--workers", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "--workers must be between 1 and 64" in result.stderr


def test_without_a_key_only_loopback_host_names_are_answered(tmp_path, tiny_model_dir):
    """DNS rebinding: a web page whose name resolves to 127.0.0.1 must not read or write through the API."""
    from fastapi.testclient import TestClient

    from app.server import create_app
    from retriever import Collection

    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.upsert(DOCS[:1])
    with TestClient(create_app(tmp_path / "col", warm_up=False), base_url="http://127.0.0.1:8000") as client:
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.example"):
            response = client.get("/stats", headers={"Host": host})
            assert response.status_code == 403 and host.split(":")[0] in response.json()["detail"], host
            assert "SEMSEARCH" not in response.text
            deleted = client.delete(f"/documents/{DOCS[0]['id']}", headers={"Host": host})
            assert deleted.status_code == 403
        for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "127.0.0.1"):
            assert client.get("/stats", headers={"Host": host}).status_code == 200, host
    app = create_app(tmp_path / "col", warm_up=False, allowed_hosts=["search.internal"])
    with TestClient(app, base_url="http://search.internal") as client:
        assert client.get("/stats").status_code == 200
        assert client.get("/stats", headers={"Host": "evil.example"}).status_code == 403
    keyed = create_app(tmp_path / "col", api_key="k", warm_up=False)
    with TestClient(keyed, base_url="http://search.example") as client:  # the key is what a page cannot send
        assert client.get("/stats", headers={"X-API-Key": "k"}).status_code == 200


def test_stats_and_error_answers_show_no_absolute_path_or_database_host(tmp_path, tiny_model_dir, monkeypatch):
    from fastapi.testclient import TestClient

    from app.server import create_app
    from retriever import Collection, SemsearchError

    root = tmp_path / "private-place" / "col"
    with Collection.create(root, tiny_model_dir) as col:
        col.upsert(DOCS[:1])
    app = create_app(root, warm_up=False)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as client:
        stats = client.get("/stats")
        assert stats.status_code == 200 and str(tmp_path) not in stats.text and str(tiny_model_dir) not in stats.text
        assert stats.json()["path"] == "col" and stats.json()["catalog"] == "sqlite"

        def failing(*_args, **_kwargs):
            raise SemsearchError(
                f"cannot read {root.resolve()}/segments/seg-1/text.bin: broken; "
                "catalog postgresql+psycopg://ann:***@db.internal:5432/search failed"
            )

        monkeypatch.setattr(app.state.collection, "search", failing)
        answer = client.post("/search", json={"query": "tea"})
        assert answer.status_code == 500
        detail = answer.json()["detail"]
        assert str(tmp_path) not in detail and "db.internal" not in detail and "segments/seg-1/text.bin" in detail


def test_a_title_only_document_is_taken_and_found_by_its_title(tmp_path, tiny_model_dir):
    from fastapi.testclient import TestClient

    from app.server import create_app
    from retriever import Collection

    Collection.create(tmp_path / "col", tiny_model_dir).close()
    with TestClient(create_app(tmp_path / "col", warm_up=False), base_url="http://127.0.0.1") as client:
        answer = client.post("/documents", json={"documents": [{"id": "t", "title": "Aurora borealis sightings"}]})
        assert answer.status_code == 200 and answer.json()["added"] == ["t"]
        hits = client.post("/search", json={"query": "aurora", "mode": "bm25"}).json()["hits"]
        assert [hit["id"] for hit in hits] == ["t"] and hits[0]["title"] == "Aurora borealis sightings"
