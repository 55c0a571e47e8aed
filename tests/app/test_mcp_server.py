"""``semsearch mcp`` driven by the MCP SDK's own client over a real stdio subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.app.test_server import DOCS

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def collection(tmp_path_factory, tiny_model_dir):
    from retriever import Collection

    path = tmp_path_factory.mktemp("mcp") / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(DOCS)
    return path


def session(collection):
    """A client of ``semsearch mcp -c collection`` started as a subprocess."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp", "-c", str(collection)],
                                   cwd=str(REPO))
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

            found = answer(await client.call_tool("search", {"query": "Kaffee", "k": 2, "where": {"lang": "de"},
                                                             "mode": "bm25"}))
            hit = found["hits"][0]
            assert [h["id"] for h in found["hits"]] == ["kaffee"]
            assert set(hit) == {"id", "title", "score", "passage", "start", "end", "metadata"}

            passage = answer(await client.call_tool("fetch", {"id": hit["id"], "start": hit["start"],
                                                              "end": hit["end"]}))
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
