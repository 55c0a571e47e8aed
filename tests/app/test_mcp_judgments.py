"""The MCP tools ``judge``, ``list_judgments`` and ``evaluate``, driven by the MCP SDK's own client: over stdio
(a ``semsearch mcp`` subprocess) and over streamable HTTP behind scoped keys (served in this process)."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Iterator

import anyio
import pytest
from mcp import Client

from app.server.access import ApiKey, KeyRing, digest
from retriever import Collection
from tests.app.test_mcp_server import answer, session
from tests.app.test_server import DOCS
from tests.processes import free_port

TOKENS = {"reader": "mcp-read-token", "writer": "mcp-write-token"}


@pytest.fixture()
def collection(tmp_path, tiny_model_dir) -> Path:
    path = tmp_path / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(DOCS)
    return path


def test_judge_list_and_evaluate_over_stdio(collection):
    async def run():
        async with session(collection) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {"judge", "list_judgments", "evaluate"} <= set(tools)
            assert "ctx" not in tools["judge"].input_schema["properties"]
            judged = answer(await client.call_tool("judge", {"query": "green tea", "id": "tea", "grade": 2}))
            assert (judged["query"], judged["id"], judged["grade"], judged["who"]) == ("green tea", "tea", 2, "mcp")
            answer(await client.call_tool("judge", {"query": "roasted coffee", "id": "coffee"}))
            answer(await client.call_tool("judge", {"query": "roasted coffee", "id": "tea", "grade": 0}))
            listed = answer(await client.call_tool("list_judgments", {"id": "tea"}))["judgments"]
            assert sorted((j["query"], j["grade"]) for j in listed) == [("green tea", 2), ("roasted coffee", 0)]

            missing = await client.call_tool("judge", {"query": "green tea", "id": "nope"})
            assert missing.is_error and "no document 'nope'" in missing.content[0].text
            bad = await client.call_tool("judge", {"query": "green tea", "id": "tea", "grade": 5})
            assert bad.is_error and "grade" in bad.content[0].text
            wrong = await client.call_tool("evaluate", {"fusion": "max"})
            assert wrong.is_error and "fusion" in wrong.content[0].text
            # keywords only: the figures do not hang on this process's choice of encoder backend
            return answer(await client.call_tool("evaluate", {"mode": "bm25", "per_query": True}))

    measured = anyio.run(run)
    with Collection.open(collection) as local:
        assert {j.who for j in local.judgments()} == {"mcp"} and local.judgment_count() == (3, 2)
        assert measured == local.evaluate(mode="bm25", per_query=True).to_dict()
        assert measured["queries"] == 2 and measured["settings"]["mode"] == "bm25"


@contextlib.contextmanager
def mcp_http(collection: Path) -> Iterator[str]:
    """``app.mcp_server.http_app`` behind keys ``reader`` (col:read) and ``writer`` (col:write), served by
    uvicorn in a thread; yields the endpoint URL."""
    import uvicorn

    from app.mcp_server import http_app

    ring = KeyRing(
        [
            ApiKey("reader", digest(TOKENS["reader"]), {"col": "read"}),
            ApiKey("writer", digest(TOKENS["writer"]), {"col": "write"}),
        ]
    )
    port = free_port()
    with Collection.open(collection) as opened:
        app = http_app(opened, "127.0.0.1", None, keys=ring)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, name=f"mcp-test-{port}", daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the MCP test server did not start"
            time.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            server.should_exit = True
            thread.join(timeout=15)


def test_over_http_a_read_key_may_evaluate_but_not_judge_and_a_write_key_judges_under_its_name(collection):
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    def client(url: str, who: str) -> Client:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKENS[who]}"})
        return Client(streamable_http_client(url, http_client=http))

    async def run(url: str):
        async with client(url, "writer") as writer:
            judged = answer(await writer.call_tool("judge", {"query": "green tea", "id": "tea", "grade": 3}))
            assert judged["who"] == "writer"
        async with client(url, "reader") as reader:
            refused = await reader.call_tool("judge", {"query": "green tea", "id": "coffee"})
            assert refused.is_error and "forbidden: key 'reader'" in refused.content[0].text
            assert "(needs col:write)" in refused.content[0].text
            listed = answer(await reader.call_tool("list_judgments", {}))["judgments"]
            assert [(j["id"], j["who"]) for j in listed] == [("tea", "writer")]
            return answer(await reader.call_tool("evaluate", {}))

    with mcp_http(collection) as url:
        measured = anyio.run(run, url)
    with Collection.open(collection) as local:
        assert local.judgment_count() == (1, 1)
        assert measured == local.evaluate().to_dict()
