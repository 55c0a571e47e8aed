"""``semsearch mcp`` driven by the MCP SDK's own client over a real stdio subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.app.test_server import DOCS
from tests.processes import free_port, stop, wait_until_listening

REPO = Path(__file__).resolve().parents[2]
KEY = "mcp-test-key"


@pytest.fixture(scope="module")
def collection(tmp_path_factory, tiny_model_dir):
    from retriever import Collection

    path = tmp_path_factory.mktemp("mcp") / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(DOCS)
    return path


def session(collection):
    """A client of ``semsearch mcp -c collection`` started as a subprocess."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "app.cli", "mcp", "-c", str(collection)], cwd=str(REPO)
    )
    return Client(params)


def answer(result) -> dict:
    """A tool result's structured content, which its text repeats as JSON."""
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def test_tools_search_fetch_and_fields(collection):
    async def run():
        async with session(collection) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) >= {"search", "fetch", "fields"}
            assert "where" in tools["search"].input_schema["properties"]

            fields = answer(await client.call_tool("fields", {}))
            assert fields["documents"] == len(DOCS) and "lang" in fields["fields"] and "hybrid" in fields["modes"]

            found = answer(
                await client.call_tool("search", {"query": "Kaffee", "k": 2, "where": {"lang": "de"}, "mode": "bm25"})
            )
            hit = found["hits"][0]
            assert [h["id"] for h in found["hits"]] == ["kaffee"]
            assert set(hit) == {"id", "title", "score", "passage", "start", "end", "evidence", "location", "metadata"}
            sentence = hit["evidence"][0]
            assert sentence["method"] == "terms" and [t["term"] for t in sentence["terms"]] == ["Kaffee"]
            assert hit["passage"][sentence["start"] - hit["start"] : sentence["end"] - hit["start"]] == sentence["text"]

            passage = answer(
                await client.call_tool("fetch", {"id": hit["id"], "start": hit["start"], "end": hit["end"]})
            )
            assert passage["text"] == hit["passage"] and passage["metadata"]["lang"] == "de"
            whole = answer(await client.call_tool("fetch", {"id": "/notes/rivers and seas.md"}))
            assert whole["text"] == DOCS[-1]["text"] and not whole["cut"]

            bad = await client.call_tool("search", {"query": "tea", "where": {"$bogus": 1}})
            assert bad.is_error and "where: $bogus: unknown operator" in bad.content[0].text
            missing = await client.call_tool("fetch", {"id": "nope"})
            assert missing.is_error and "no document 'nope'" in missing.content[0].text
            outside = await client.call_tool("fetch", {"id": "kaffee", "start": 5, "end": 10_000})
            assert outside.is_error and "outside the document" in outside.content[0].text

    anyio.run(run)


def test_without_the_sdk_the_command_names_the_extra(collection, capsys, monkeypatch):
    import importlib.util

    from app.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    assert main(["mcp", "-c", str(collection)]) == 2
    assert "pip install 'semsearch[mcp]'" in capsys.readouterr().err


@pytest.fixture()
def http_server(collection, tmp_path):
    """``semsearch mcp --http`` with an API key, as a subprocess; yields its endpoint URL."""
    port = free_port()
    log = tmp_path / "mcp-http.log"
    env = dict(os.environ, SEMSEARCH_API_KEY=KEY)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "mcp", "-c", str(collection), "--http", "--port", str(port)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_until_listening(proc, port, log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


def test_streamable_http_behind_the_key(http_server):
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def run():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"})
        async with Client(streamable_http_client(http_server, http_client=http)) as client:
            found = answer(await client.call_tool("search", {"query": "Kaffee", "k": 1, "mode": "bm25"}))
            assert [h["id"] for h in found["hits"]] == ["kaffee"] and found["hits"][0]["evidence"]
            fields = answer(await client.call_tool("fields", {}))
            assert fields["documents"] == len(DOCS)

    anyio.run(run)
    request = urllib.request.Request(
        http_server, data=b"{}", method="POST", headers={"content-type": "application/json"}
    )
    for headers, problem in (({}, "missing API key"), ({"Authorization": "Bearer wrong"}, "wrong API key")):
        for name, value in headers.items():
            request.add_header(name, value)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401 and problem in refused.value.read().decode()


def test_http_flags_are_checked_before_anything_starts(collection, capsys, monkeypatch):
    from app.cli import main

    monkeypatch.delenv("SEMSEARCH_API_KEY", raising=False)
    assert main(["mcp", "-c", str(collection), "--http", "--host", "0.0.0.0"]) == 2
    assert "without an API key" in capsys.readouterr().err
    assert main(["mcp", "-c", str(collection), "--api-key", "k"]) == 2
    assert "apply to --http only" in capsys.readouterr().err


def test_without_a_key_http_answers_only_loopback_host_names(collection, tmp_path):
    """DNS rebinding: bound to a loopback address the SDK does not guard (127.0.0.2), a page's name gets 403."""
    port = free_port()
    log = tmp_path / "mcp-open.log"
    env = {k: v for k, v in os.environ.items() if k != "SEMSEARCH_API_KEY"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "mcp",
                "-c",
                str(collection),
                "--http",
                "--host",
                "127.0.0.2",
                "--port",
                str(port),
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_for_address("127.0.0.2", port, proc, log)
        fetch = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "fetch", "arguments": {"id": "kaffee"}},
            }
        ).encode()

        def post(host: str) -> tuple[int, str]:
            request = urllib.request.Request(
                f"http://127.0.0.2:{port}/mcp",
                data=fetch,
                method="POST",
                headers={
                    "Host": host,
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        for foreign in ("evil.example", f"evil.example:{port}", "127.0.0.2.nip.io"):
            status, text = post(foreign)
            assert status == 403 and "loopback" in text and "Kaffee" not in text, (foreign, status, text)
        status, text = post(f"127.0.0.2:{port}")
        assert status == 200 and "Kaffee wird" in text, text
    finally:
        stop(proc)


def wait_for_address(host: str, port: int, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    """Return once ``host:port`` accepts connections; fail with the server's log if it exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"semsearch mcp exited with {proc.returncode}: {log.read_text()}")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"nothing listened on {host}:{port} within {timeout:g} s: {log.read_text()}")
            time.sleep(0.2)
