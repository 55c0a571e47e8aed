"""``POST /files``: uploaded files read as ``semsearch index`` reads them, over real HTTP handling (TestClient)."""

from __future__ import annotations

import io
import shutil
import subprocess
import zipfile

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("multipart")


@pytest.fixture()
def client(tmp_path, tiny_model_dir):
    from fastapi.testclient import TestClient

    from app.server import create_app
    from retriever import Collection

    Collection.create(tmp_path / "col", tiny_model_dir).close()
    with TestClient(create_app(tmp_path / "col", warm_up=False), base_url="http://127.0.0.1") as test_client:
        yield test_client


def search_ids(client, query: str) -> list[str]:
    response = client.post("/search", json={"query": query, "k": 5, "mode": "bm25"})
    assert response.status_code == 200, response.text
    return [hit["id"] for hit in response.json()["hits"]]


def zipped(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def cut_workbook(tmp_path) -> bytes:
    """The first half of a real workbook written by openpyxl: a truncated file."""
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["river", "length"])
    book.active.append(["Nile", 6650])
    book.save(tmp_path / "real.xlsx")
    data = (tmp_path / "real.xlsx").read_bytes()
    return data[: len(data) // 2]


def test_uploaded_files_of_several_formats_become_searchable_and_bad_ones_are_listed(client, tmp_path):
    files = [
        ("files", ("notes.md", b"# Glaciers\n\nGlaciers carve fjords along the coast.\n", "text/markdown")),
        (
            "files",
            (
                "bundle.zip",
                zipped({"a.txt": "Volcanoes erupt basalt.", "b.txt": "Tides follow the moon."}),
                "application/zip",
            ),
        ),
        ("files", ("broken.xlsx", cut_workbook(tmp_path), "application/octet-stream")),
    ]
    response = client.post("/files", files=files)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["files"] == 3
    assert sorted(answer["added"]) == ["bundle.zip::a.txt", "bundle.zip::b.txt", "notes.md"]
    assert [error["file"] for error in answer["errors"]] == ["broken.xlsx"]
    assert answer["errors"][0]["reason"]
    assert search_ids(client, "fjords")[0] == "notes.md"
    assert search_ids(client, "basalt")[0] == "bundle.zip::a.txt"


@pytest.mark.skipif(shutil.which("pandoc") is None, reason="pandoc makes the Word file")
def test_a_word_file_uploaded_again_replaces_its_document(client, tmp_path):
    source = tmp_path / "memo.md"
    target = tmp_path / "memo.docx"
    source.write_text("# Budget\n\nThe harbour crane budget was approved.\n", encoding="utf-8")
    subprocess.run(["pandoc", str(source), "-o", str(target)], check=True)
    first = client.post("/files", files=[("files", ("memo.docx", target.read_bytes()))]).json()
    assert first["added"] == ["memo.docx"] and first["errors"] == []
    source.write_text("# Budget\n\nThe lighthouse budget was refused.\n", encoding="utf-8")
    subprocess.run(["pandoc", str(source), "-o", str(target)], check=True)
    second = client.post("/files", files=[("files", ("memo.docx", target.read_bytes()))]).json()
    assert second["updated"] == ["memo.docx"]
    assert search_ids(client, "lighthouse") == ["memo.docx"]
    assert search_ids(client, "crane") == []
    document = client.get("/documents/memo.docx").json()
    assert document["metadata"]["format"] == "docx"


def test_a_request_without_files_is_refused(client):
    response = client.post("/files")
    assert response.status_code == 422
