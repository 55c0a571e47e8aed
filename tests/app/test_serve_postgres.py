"""A PostgreSQL-backed collection from the command line and behind two ``semsearch serve`` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

from tests.app.test_server import Api, start_server
from tests.processes import stop

REPO = Path(__file__).resolve().parents[2]


def semsearch(*args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def allow_host(url: str, monkeypatch) -> None:
    """List ``url``'s host in SEMSEARCH_CATALOG_HOSTS: a later process gets the password only for listed hosts."""
    from sqlalchemy.engine import make_url

    monkeypatch.setenv("SEMSEARCH_CATALOG_HOSTS", make_url(url).host)


def test_index_with_catalog_url_then_two_servers_see_each_others_commits(
    postgres_server, postgres_url, tiny_model_dir, tmp_path, monkeypatch
):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {"id": "tea", "title": "Green tea", "text": "Green tea is steamed right after picking.", "lang": "en"},
                {"id": "kaffee", "title": "Kaffee", "text": "Kaffee wird geröstet.", "lang": "de"},
            ]
        )
        + "\n"
    )
    path = tmp_path / "col"
    done = semsearch("index", str(docs), "-c", str(path), "--model", str(tiny_model_dir), "--catalog-url", postgres_url)
    assert done.returncode == 0, done.stderr
    assert json.loads((path / "manifest.json").read_text())["catalog_url"] == postgres_url
    assert postgres_server.password not in done.stdout + done.stderr

    allow_host(postgres_url, monkeypatch)
    first, base_a = start_server(path, tmp_path, env_key=None)
    try:
        second, base_b = start_server(path, tmp_path, env_key=None)
        try:
            a, b = Api(base_a, None), Api(base_b, None)
            assert a.call("GET", "/stats")[1]["documents"] == b.call("GET", "/stats")[1]["documents"] == 2
            doc = {
                "id": "volcano/1",
                "title": "Volcanoes",
                "text": "Volcanic eruptions pour lava.",
                "metadata": {"lang": "en"},
            }
            status, body = a.call("POST", "/documents", {"documents": [doc]})
            assert status == 200 and body["added"] == ["volcano/1"]
            route = "/documents/" + urllib.parse.quote(doc["id"], safe="")
            assert b.call("GET", route) == (200, {k: doc[k] for k in ("id", "title", "text", "metadata")})
            _, found = b.search(query="lava eruptions", k=3, where={"lang": "en"})
            assert "volcano/1" in [hit["id"] for hit in found["hits"]]  # b searches a's commit (rank: a random model)

            assert b.call("DELETE", "/documents/tea") == (200, {"deleted": "tea"})
            assert a.call("GET", "/documents/tea")[0] == 404
            _, found = a.search(query="green tea", k=5)
            assert "tea" not in [hit["id"] for hit in found["hits"]]
        finally:
            stop(second)
    finally:
        stop(first)
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("server-*.log"))
    assert postgres_server.password not in logs


def test_a_password_typed_into_catalog_url_is_used_but_not_stored(
    postgres_server, tiny_model_dir, tmp_path, monkeypatch
):
    """A password typed into --catalog-url works for that run; later runs take it from the environment."""
    monkeypatch.delenv("SEMSEARCH_CATALOG_PASSWORD", raising=False)
    database = postgres_server.create_database()
    docs = tmp_path / "a.txt"
    docs.write_text("Rivers flow into the sea through deltas.")
    path = tmp_path / "col"
    done = semsearch(
        "index",
        str(docs),
        "-c",
        str(path),
        "--model",
        str(tiny_model_dir),
        "--catalog-url",
        postgres_server.url_with_password(database),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((path / "manifest.json").read_text())["catalog_url"] == postgres_server.url(database)
    monkeypatch.setenv("SEMSEARCH_CATALOG_PASSWORD", postgres_server.password)
    done = semsearch("search", "river delta", "-c", str(path), "--json")
    assert done.returncode != 0 and "SEMSEARCH_CATALOG_HOSTS" in done.stderr  # a later process: host not listed
    assert postgres_server.password not in done.stdout + done.stderr
    allow_host(postgres_server.url(database), monkeypatch)
    done = semsearch("search", "river delta", "-c", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert [hit["id"] for hit in json.loads(done.stdout)] == [str(docs.resolve())]
