"""One ``semsearch serve`` for several collections, each under ``/collections/NAME``, behind scoped keys."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.processes import free_port, stop, wait_until_listening

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402

from app.cli import main  # noqa: E402
from app.server.access import ApiKey, KeyRing, digest  # noqa: E402
from app.server.multi import create_multi_app  # noqa: E402
from retriever import Collection  # noqa: E402
from retriever.errors import AuthenticationError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TOKENS = {"reader": "read-only-token", "writer": "write-token", "admin": "admin-token", "owner": "owner-token"}
RING = KeyRing(
    [
        ApiKey("reader", digest(TOKENS["reader"]), {"alpha": "read"}),
        ApiKey("writer", digest(TOKENS["writer"]), {"alpha": "write", "beta": "read"}),
        ApiKey("admin", digest(TOKENS["admin"]), {"*": "write"}),
        ApiKey("owner", digest(TOKENS["owner"]), {"alpha": "admin"}),
    ]
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tiny_model_dir) -> Path:
    """A folder holding collections ``alpha`` (3 documents) and ``beta`` (2)."""
    root = tmp_path_factory.mktemp("many")
    for name, n in (("alpha", 3), ("beta", 2)):
        with Collection.create(root / name, tiny_model_dir) as col:
            col.add([{"id": f"{name}-{i}", "text": f"{name} document number {i} about rivers"} for i in range(n)])
    return root


@pytest.fixture(scope="module")
def client(folder):
    app = create_multi_app({"alpha": folder / "alpha", "beta": folder / "beta"}, keys=RING, warm_up=False)
    with TestClient(app) as test_client:
        yield test_client


def call(client, method, path, who=None, body=None, **headers):
    if who:
        headers["Authorization"] = f"Bearer {TOKENS[who]}"
    response = client.request(method, path, headers=headers, **({"json": body} if body is not None else {}))
    return response.status_code, (response.json() if "json" in response.headers.get("content-type", "") else None)


def test_health_is_open_and_every_other_route_needs_a_known_key(client):
    assert call(client, "GET", "/health") == (200, {"status": "ok"})
    status, body = call(client, "GET", "/collections/alpha/stats")
    assert status == 401 and "missing API key" in body["detail"]
    status, body = call(client, "GET", "/collections", Authorization="Bearer not-a-key")
    assert status == 401 and body["detail"] == "wrong API key"
    assert call(client, "GET", "/collections/alpha/stats", Authorization=f"Bearer {digest(TOKENS['admin'])}")[0] == 401


def test_each_key_lists_only_the_collections_it_may_read(client):
    assert call(client, "GET", "/collections", "reader")[1]["collections"] == [
        {"name": "alpha", "url": "/collections/alpha", "documents": 3, "model": "model", "access": "read"}
    ]
    listed = call(client, "GET", "/collections", "writer")[1]["collections"]
    assert [(c["name"], c["access"], c["documents"]) for c in listed] == [("alpha", "write", 3), ("beta", "read", 2)]


def test_a_read_key_searches_its_collection_and_gets_403_elsewhere(client):
    status, body = call(client, "POST", "/collections/alpha/search", "reader", {"query": "rivers", "k": 5})
    assert status == 200 and {h["id"] for h in body["hits"]} == {"alpha-0", "alpha-1", "alpha-2"}
    status, body = call(client, "POST", "/collections/beta/search", "reader", {"query": "rivers"})
    assert status == 403 and "key 'reader' has no scope on collection 'beta'" in body["detail"]
    assert "needs beta:read" in body["detail"]
    status, body = call(
        client,
        "POST",
        "/collections/alpha/documents",
        "reader",
        {"documents": [{"id": "sneaky", "text": "should not land"}]},
    )
    assert status == 403 and "may read collection 'alpha' but not write to it" in body["detail"]
    assert call(client, "DELETE", "/collections/alpha/documents/alpha-0", "reader")[0] == 403
    assert call(client, "POST", "/collections/alpha/admin/snapshot", "reader", {"dest": "/tmp/x"})[0] == 403
    assert call(client, "GET", "/collections/alpha/documents/sneaky", "admin")[0] == 404  # nothing was written
    assert call(client, "GET", "/collections/alpha/stats", "admin")[1]["documents"] == 3


def test_a_write_key_writes_where_scoped_and_each_collection_keeps_its_own(client):
    status, body = call(
        client,
        "POST",
        "/collections/alpha/documents",
        "writer",
        {"documents": [{"id": "alpha-new", "text": "a new alpha document about lakes"}]},
    )
    assert status == 200 and body["added"] == ["alpha-new"]
    try:
        assert call(client, "GET", "/collections/alpha/documents/alpha-new", "reader")[0] == 200
        assert call(client, "GET", "/collections/beta/documents/alpha-new", "admin")[0] == 404
        status, body = call(client, "DELETE", "/collections/beta/documents/beta-0", "writer")
        assert status == 403 and "needs beta:write" in body["detail"]
        assert call(client, "GET", "/collections/beta/stats", "writer")[1]["documents"] == 2
    finally:
        assert call(client, "DELETE", "/collections/alpha/documents/alpha-new", "writer")[0] == 200


def test_admin_routes_need_the_admin_scope_which_write_does_not_give(client, tmp_path):
    for who in ("writer", "admin"):  # alpha:write, and *:write
        status, body = call(client, "POST", "/collections/alpha/admin/snapshot", who, {"dest": str(tmp_path / who)})
        assert status == 403 and "needs alpha:admin" in body["detail"], (who, body)
        assert not (tmp_path / who).exists()
    status, body = call(client, "POST", "/collections/alpha//admin/snapshot", "writer", {"dest": str(tmp_path / "w")})
    assert status == 403 and "needs alpha:admin" in body["detail"]
    status, body = call(client, "POST", "/collections/alpha/admin/snapshot", "owner", {})
    assert status != 401 and not body["detail"].startswith("forbidden"), body  # the route answers (no snapshot root)
    assert call(client, "GET", "/collections/alpha/stats", "owner")[0] == 200  # admin includes read
    status, body = call(client, "POST", "/collections/beta/admin/snapshot", "owner", {})
    assert status == 403 and "needs beta:admin" in body["detail"]


def test_an_admin_of_one_collection_snapshots_it_only_under_the_root_and_never_into_another(folder, tmp_path):
    import shutil

    for name in ("alpha", "beta"):
        shutil.copytree(folder / name, tmp_path / name)
    app = create_multi_app(
        {"alpha": tmp_path / "alpha", "beta": tmp_path / "beta"},
        keys=RING,
        warm_up=False,
        snapshot_root=tmp_path / "snapshots",
    )
    with TestClient(app) as client:
        for body in (
            {"dest": str(tmp_path / "beta" / "taggers")},
            {"name": "../beta"},
            {"name": "beta/taggers"},
            {"dest": str(tmp_path / "missing" / "x")},
        ):
            status, answer = call(client, "POST", "/collections/alpha/admin/snapshot", "owner", body)
            assert status == 422 and str(tmp_path) not in json.dumps(answer), (body, answer)
        status, answer = call(client, "POST", "/collections/alpha/admin/snapshot", "owner", {"name": "monday"})
        assert status == 200 and answer["path"] == "alpha/monday" and answer["documents"] == 3
        status, answer = call(
            client,
            "POST",
            "/collections/beta/documents",
            "admin",
            {"documents": [{"id": "beta-new", "text": "beta still takes writes"}]},
        )
        assert status == 200 and answer["added"] == ["beta-new"]
    assert not (tmp_path / "missing").exists() and not (tmp_path / "beta" / "taggers").exists()
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["alpha"]
    with Collection.open(tmp_path / "snapshots" / "alpha" / "monday") as snap:
        assert sorted(snap.ids()) == ["alpha-0", "alpha-1", "alpha-2"]


def test_an_unknown_collection_is_404_naming_those_the_key_may_use(client):
    status, body = call(client, "POST", "/collections/gamma/search", "reader", {"query": "x"})
    assert status == 404 and "no collection 'gamma' here; this key may use: alpha" in body["detail"]


def test_openai_routes_and_metrics_work_under_a_collections_prefix(client):
    import openai

    base = str(client.base_url) + "/collections/alpha/v1"
    models = call(client, "GET", "/collections/alpha/v1/models", "reader")[1]["data"]
    status, body = call(
        client, "POST", "/collections/alpha/v1/embeddings", "reader", {"input": "rivers", "model": "no-such-model"}
    )
    assert status == 404 and body["error"]["type"] == "not_found_error"  # OpenAI's error shape under the prefix
    sdk = openai.OpenAI(base_url=base, api_key=TOKENS["reader"], http_client=client)
    vector = sdk.embeddings.create(input="rivers", model=models[0]["id"]).data[0].embedding
    assert len(vector) == 32
    with pytest.raises(openai.PermissionDeniedError, match="no scope on collection 'beta'"):
        openai.OpenAI(
            base_url=str(client.base_url) + "/collections/beta/v1", api_key=TOKENS["reader"], http_client=client
        ).embeddings.create(input="x", model=models[0]["id"])
    text = client.get("/collections/alpha/metrics", headers={"Authorization": f"Bearer {TOKENS['reader']}"}).text
    assert "semsearch_documents 3.0" in text and 'route="/v1/embeddings"' in text
    beta = client.get("/collections/beta/metrics", headers={"Authorization": f"Bearer {TOKENS['writer']}"}).text
    assert "semsearch_documents 2.0" in beta and 'route="/v1/embeddings"' not in beta


def test_without_keys_only_loopback_host_names_are_answered(folder):
    app = create_multi_app({"alpha": folder / "alpha"}, warm_up=False)
    with TestClient(app, base_url="http://127.0.0.1") as test_client:
        assert call(test_client, "GET", "/collections")[1]["collections"][0]["access"] == "write"
        status, body = call(test_client, "GET", "/collections/alpha/stats", Host="attacker.example")
        assert status == 403 and "loopback" in body["detail"]


def test_a_bad_collection_name_or_none_at_all_is_refused(folder):
    from retriever.errors import BadInputError

    with pytest.raises(BadInputError, match="collection name"):
        create_multi_app({"../up": folder / "alpha"}, warm_up=False)
    with pytest.raises(BadInputError, match="at least one collection"):
        create_multi_app({}, warm_up=False)


# -- the command line ----------------------------------------------------------
@pytest.mark.parametrize(
    "arguments, problem",
    [
        (["-c", "{root}/nothing-here"], "neither a collection nor a folder holding collections"),
        (["-c", "a={root}/alpha", "-c", "a={root}/beta"], "a second collection named 'a'"),
        (["-c", "a={root}"], "is not a collection"),
        (["-c", "{root}", "--keys-file", "{root}/no-keys"], "--keys-file .*no such file"),
        (["-c", "b@d={root}/alpha"], "collection name"),
    ],
)
def test_serve_refuses_bad_collections_and_keys_in_one_line(folder, capsys, arguments, problem):
    assert main(["serve", *[a.format(root=folder) for a in arguments], "--port", str(free_port())]) == 2
    assert __import__("re").search(problem, capsys.readouterr().err)


def test_a_key_in_the_environment_must_be_a_hash(folder, capsys, monkeypatch):
    monkeypatch.setenv("SEMSEARCH_KEYS", "ci plain-token alpha:read")
    assert main(["serve", "-c", str(folder), "--port", str(free_port())]) == 2
    assert "$SEMSEARCH_KEYS, entry 1" in capsys.readouterr().err


def test_serve_with_a_keys_file_and_two_workers_scopes_every_worker(folder, tmp_path):
    """The real command: a folder of collections, keys made by ``semsearch keys add``, two worker processes."""
    from retriever.remote import RemoteCollection

    keys = tmp_path / "keys"
    tokens = {}
    for name, scope in (("ci", "alpha:read"), ("ops", "*:write")):
        made = subprocess.run(
            [sys.executable, "-m", "app.cli", "keys", "add", name, "--scope", scope, "-f", str(keys)],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        tokens[name] = made.stdout.strip()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("SEMSEARCH_API_KEY", "SEMSEARCH_KEYS")}
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "serve",
            "-c",
            str(folder),
            "--keys-file",
            str(keys),
            "--port",
            str(port),
            "--workers",
            "2",
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_workers(base, proc, tmp_path / "server.log")
        assert tokens["ci"] not in os.environ.get("SEMSEARCH_KEYS", "")
        ci = RemoteCollection(base + "/collections/alpha", api_key=tokens["ci"])
        for _ in range(6):  # several connections: both workers answer, each with the same scopes
            assert {h.id for h in ci.search("rivers", k=5)} >= {"alpha-0", "alpha-1", "alpha-2"}
            with pytest.raises(AuthenticationError, match="may read collection 'alpha' but not write"):
                ci.add([{"id": "x", "text": "not allowed"}])
            with pytest.raises(AuthenticationError, match="no scope on collection 'beta'"):
                RemoteCollection(base + "/collections/beta", api_key=tokens["ci"]).search("rivers")
        ops = RemoteCollection(base + "/collections/beta", api_key=tokens["ops"])
        ops.add([{"id": "beta-ops", "text": "added by the operations key"}])
        assert "beta-ops" in {h.id for h in ops.search("operations key", k=10)}
        ops.delete(["beta-ops"])
        text = (tmp_path / "server.log").read_text()
        assert "alpha at /collections/alpha" in text and tokens["ops"] not in text
    finally:
        stop(proc)
        log.close()


def wait_for_workers(base: str, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}: {log.read_text()}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as answer:
                if json.loads(answer.read())["workers"]["ready"] == 2:
                    return
        except (OSError, urllib.error.URLError, KeyError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"two workers were not ready within {timeout} s: {log.read_text()}")


def test_a_removed_key_is_refused_within_seconds_and_a_broken_keys_file_changes_nothing(folder, tmp_path, capsys):
    """``serve --keys-file`` reads the file again when it changes, and on SIGHUP; no restart."""
    keys = tmp_path / "keys"
    for name in ("ci", "ops"):
        assert main(["keys", "add", name, "--scope", "alpha:read", "-f", str(keys)]) == 0
    tokens = dict(zip(("ci", "ops"), capsys.readouterr().out.split()))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("SEMSEARCH_API_KEY", "SEMSEARCH_KEYS")}
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "serve",
                "-c",
                str(folder / "alpha"),
                "--keys-file",
                str(keys),
                "--port",
                str(port),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def status(who: str) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/stats", headers={"Authorization": f"Bearer {tokens[who]}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def soon(condition, failure: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if proc.poll() is not None:
                raise AssertionError(f"serve exited with {proc.returncode}: {log_path.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{failure} after {timeout:g} s: {log_path.read_text()}")
            time.sleep(0.2)

    try:
        wait_until_listening(proc, port, log_path)
        assert status("ci") == 200 and status("ops") == 200
        assert main(["keys", "remove", "ci", "-f", str(keys)]) == 0
        soon(lambda: status("ci") == 401, "the removed key was still accepted")
        assert status("ops") == 200

        keys.write_text(f"ops {tokens['ops']} alpha:read\n")  # the key itself where its hash belongs: malformed
        soon(
            lambda: status("ops") == 200 and str(keys) in log_path.read_text(),  # the file is looked at on requests
            "the broken keys file was not reported",
        )
        assert status("ops") == 200 and status("ci") == 401  # the last good keys stay in force
        reported = [line for line in log_path.read_text().splitlines() if str(keys) in line]
        assert len(reported) == 1 and "stored only as hashes" in reported[0], reported

        keys.write_text("# every key removed\n")
        proc.send_signal(signal.SIGHUP)  # read it again at once; the server goes on
        soon(lambda: status("ops") == 401, "the emptied keys file was not read after SIGHUP")
        assert proc.poll() is None
    finally:
        stop(proc)
