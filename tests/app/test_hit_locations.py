"""Every hit says where in its source it is: the Python API in each mode, the CLI, HTTP, RemoteCollection, MCP.

The documents are added through the Python API with their ``locations``
columns built by ``LocatedText``, as the loaders build them; each part ends
with a phrase found nowhere else, after more filler than one chunk window
(64 tokens for the tiny model), so every chunk holding the phrase starts in
that part.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from bisect import bisect_right
from pathlib import Path

import anyio
import pytest

from app.cli import main
from retriever import Collection
from retriever.errors import BadInputError
from retriever.locations import LocatedText

FILLER = "Rivers flow into the sea and mountains rise above the clouds. " * 8
KINDS = {  # document id -> its parts: (labels, phrase)
    "report": [
        ({"page": 1}, "alpha zebra quartz"),
        ({"page": 2}, "bravo walrus harbour"),
        ({"page": 3}, "charlie falcon lantern"),
    ],
    "deck": [({"slide": 1}, "delta otter violin"), ({"slide": 2}, "echo badger compass")],
    "budget": [({"sheet": "Q1", "row": 2}, "foxtrot heron anvil"), ({"sheet": "Q2", "row": 5}, "golf lynx kettle")],
    "handbook": [
        ({}, "hotel bison meadow"),
        ({"section": ["Intro"]}, "india gecko ribbon"),
        ({"section": ["Intro", "Scope"]}, "juliet puffin saddle"),
    ],
    "mailbox": [({"message": 1}, "kilo marmot tulip"), ({"message": 2}, "lima condor pebble")],
}
CASES = [(doc_id, labels or None, phrase) for doc_id, parts in KINDS.items() for labels, phrase in parts]


def documents() -> list[dict]:
    docs = []
    for doc_id, parts in KINDS.items():
        built = LocatedText()
        for labels, phrase in parts:
            built.add(f"{FILLER}{phrase}.", **labels)
        docs.append(
            {
                "id": doc_id,
                "title": doc_id.capitalize(),
                "text": built.text,
                "metadata": {"source": f"/nowhere/{doc_id}", "locations": built.locations()},
            }
        )
    docs.append({"id": "plain", "text": f"{FILLER} mike stork quiver.", "metadata": {"source": "/nowhere/plain"}})
    docs.append(
        {"id": "own", "text": f"{FILLER} november ibex saffron.", "metadata": {"locations": ["Berlin", "Paris"]}}
    )  # the caller's own field, not columns
    return docs


def expected_at(doc: dict, offset: int) -> dict | None:
    """The labels of the part holding ``offset``, from the columns as written (the test's own reading)."""
    columns = doc["metadata"].get("locations")
    if not isinstance(columns, dict):
        return None
    index = bisect_right(columns["start"], offset) - 1
    found = {name: column[index] for name, column in columns.items() if name != "start" and column[index] is not None}
    return found or None


@pytest.fixture(scope="module")
def collection(tmp_path_factory, tiny_model_dir) -> Path:
    path = tmp_path_factory.mktemp("locations") / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(documents())
    return path


def test_each_hit_is_located_in_the_part_holding_its_phrase_in_every_mode(collection):
    docs = {doc["id"]: doc for doc in documents()}
    with Collection.open(collection) as col:
        for doc_id, labels, phrase in CASES:
            (hit,) = col.search(phrase, k=1, mode="bm25")
            assert (hit.id, hit.location) == (doc_id, labels) and phrase in hit.text, phrase
            assert "locations" not in hit.metadata and hit.metadata["source"] == f"/nowhere/{doc_id}"
            for mode in ("dense", "hybrid"):  # what the chunk embeds (title, then text): the query's own vector
                (found,) = col.search(f"{hit.title}\n{hit.text}", k=1, mode=mode)
                assert (found.id, found.start, found.location) == (doc_id, hit.start, labels), (mode, phrase)
        for mode in Collection.SEARCH_MODES:
            for hit in col.search("rivers flow into the sea", k=len(docs), mode=mode):
                assert hit.location == expected_at(docs[hit.id], hit.start), (mode, hit.id, hit.start)
                assert hit.to_dict()["location"] == hit.location
        stored = col.get("report")  # the stored document keeps its columns whole
        assert stored.metadata["locations"] == docs["report"]["metadata"]["locations"]


def test_documents_without_columns_have_no_location_and_keep_their_own_field(collection):
    with Collection.open(collection) as col:
        (plain,) = col.search("mike stork quiver", k=1, mode="bm25")
        (own,) = col.search("november ibex saffron", k=1, mode="bm25")
    assert plain.id == "plain" and plain.location is None and plain.metadata["source"] == "/nowhere/plain"
    assert own.id == "own" and own.location is None and own.metadata["locations"] == ["Berlin", "Paris"]


def test_malformed_columns_are_refused_by_name_and_nothing_is_written(tmp_path, tiny_model_dir):
    bad = {"id": "bad", "text": "Some text.", "metadata": {"locations": {"start": [0, 4], "page": [1]}}}
    good = {"id": "good", "text": "Other text."}
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        with pytest.raises(BadInputError, match=r"document 'bad': metadata\.locations must be a mapping"):
            col.add([good, bad])
        assert len(col) == 0


def test_a_pdf_indexed_from_disk_says_its_page(tmp_path, tiny_model_dir):
    from pypdf import PdfReader, PdfWriter

    from indexer.job import index_paths
    from tests.indexer.test_loaders import write_pdf

    writer = PdfWriter()
    pages = [
        ["Quarterly revenue grew in the north."] * 30,
        ["Rivers flow into the sea."] * 20 + ["The committee approved the harbour."],
    ]  # past a chunk window
    for number, lines in enumerate(pages):
        writer.append(PdfReader(write_pdf(tmp_path / f"page{number}.pdf", lines)))
    pdf = tmp_path / "docs" / "report.pdf"
    pdf.parent.mkdir()
    with pdf.open("wb") as out:
        writer.write(out)
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        report = index_paths(col, [pdf.parent], progress=False)
        assert report.skipped == [], report.summary()
        (hit,) = col.search("committee approved harbour", k=1, mode="bm25")
    assert hit.id == str(pdf.resolve()) and hit.location == {"page": 2} and "locations" not in hit.metadata


def run_cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(arg) for arg in argv])
    return code, capsys.readouterr().out


def test_cli_text_and_json_show_the_place(capsys, collection):
    code, out = run_cli(capsys, "search", "bravo walrus harbour", "-c", collection, "--mode", "bm25", "-k", "1")
    lines = out.splitlines()
    assert code == 0 and lines[0].endswith("  Report") and lines[1] == "    report · page 2"
    code, out = run_cli(capsys, "search", "golf lynx kettle", "-c", collection, "--mode", "bm25", "-k", "1")
    assert code == 0 and out.splitlines()[1] == "    budget · sheet Q2, row 5"
    code, out = run_cli(
        capsys, "search", "juliet puffin saddle", "-c", collection, "--mode", "bm25", "-k", "1", "--json"
    )
    (hit,) = json.loads(out)
    assert code == 0 and hit["location"] == {"section": ["Intro", "Scope"]} and "locations" not in hit["metadata"]
    code, out = run_cli(capsys, "search", "mike stork quiver", "-c", collection, "--mode", "bm25", "-k", "1")
    assert code == 0 and out.splitlines()[1].strip().startswith("Rivers flow")  # no place line for no place


def test_http_hits_remote_collection_and_the_openapi_schema(collection):
    from retriever.remote import RemoteCollection
    from tests.retriever.live_server import live_server

    with live_server(collection, api_key="k") as url:

        def call(path: str, body: dict | None = None) -> dict:
            data = json.dumps(body).encode() if body is not None else None
            request = urllib.request.Request(
                url + path,
                data=data,
                method="POST" if body is not None else "GET",
                headers={"Authorization": "Bearer k", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.load(answer)

        (hit,) = call("/search", {"query": "echo badger compass", "k": 1, "mode": "bm25"})["hits"]
        assert (hit["id"], hit["location"]) == ("deck", {"slide": 2}) and "locations" not in hit["metadata"]
        (plain,) = call("/search", {"query": "mike stork quiver", "k": 1, "mode": "bm25"})["hits"]
        assert plain["id"] == "plain" and plain["location"] is None
        stored = call("/documents/" + urllib.parse.quote("deck", safe=""))
        assert stored["metadata"]["locations"]["slide"] == [1, 2]
        schema = call("/openapi.json")["components"]["schemas"]["HitOut"]["properties"]["location"]
        assert "where in its source" in schema["description"]

        remote = RemoteCollection(url, api_key="k")
        with Collection.open(collection) as local:
            for mode in Collection.SEARCH_MODES:
                want = local.search("lima condor pebble", k=3, mode=mode)
                got = remote.search("lima condor pebble", k=3, mode=mode)
                assert [h.location for h in got] == [h.location for h in want] and got[0].location is not None
        with pytest.raises(BadInputError, match=r"metadata\.locations must be"):
            remote.add([{"id": "bad", "text": "x", "metadata": {"locations": {"start": [0], "page": ["one"]}}}])


def test_mcp_search_and_fetch_say_where(collection):
    pytest.importorskip("mcp")
    from mcp import Client

    from app.mcp_server import build_server

    async def run(col: Collection) -> tuple[dict, dict, dict]:
        async with Client(build_server(col)) as client:
            found = await client.call_tool("search", {"query": "charlie falcon lantern", "k": 1, "mode": "bm25"})
            hit = found.structured_content["hits"][0]
            passage = await client.call_tool("fetch", {"id": hit["id"], "start": hit["start"], "end": hit["end"]})
            whole = await client.call_tool("fetch", {"id": hit["id"]})
            return hit, passage.structured_content, whole.structured_content

    with Collection.open(collection) as col:
        hit, passage, whole = anyio.run(run, col)
    assert (hit["id"], hit["location"]) == ("report", {"page": 3}) and "locations" not in hit["metadata"]
    assert passage["location"] == {"page": 3} and passage["text"] == hit["passage"]
    assert whole["location"] == {"page": 1} and "locations" not in whole["metadata"]
