"""Collections whose catalog is a real PostgreSQL server, through the public API only.

The server comes from ``tests/postgres.py`` (password authentication over TCP);
tests that must hold on every catalog run on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retriever import Collection, SemsearchError
from retriever.storage.catalog_url import PASSWORD_ENV, PASSWORD_FILE_ENV

REPO = Path(__file__).resolve().parents[3]
DOCS = [
    {
        "id": "tea",
        "title": "Green tea",
        "text": "Green tea is steamed right after picking. " * 30,
        "metadata": {"lang": "en", "year": 2021, "tags": {"kind": "drink"}},
    },
    {
        "id": "coffee",
        "title": "Coffee",
        "text": "Coffee beans are roasted at high temperature.",
        "metadata": {"lang": "en", "year": 2019},
    },
    {"id": "kaffee", "title": "Kaffee", "text": "Kaffee wird geröstet.", "metadata": {"lang": "de", "year": 2020}},
    {
        "id": "rivers",
        "title": "Rivers",
        "text": "Rivers flow into the sea through deltas.",
        "metadata": {"lang": "en", "year": "unknown", "größe": 3},
    },
]


def hidden(url: str) -> str:
    """``url`` as messages show it once a password is known: the password as ``***``."""
    return url.replace("semsearch@", "semsearch:***@")


def ids(hits) -> list[str]:
    return [hit.id for hit in hits]


def test_every_verb_works_the_same_on_each_catalog(catalog_url, tiny_embedder, tmp_path):
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, catalog_url=catalog_url) as col:
        report = col.add(DOCS)
        assert sorted(report.added) == sorted(d["id"] for d in DOCS) and report.chunks > len(DOCS)
        assert len(col) == 4 and "tea" in col
        assert col.get("kaffee").metadata == {"lang": "de", "year": 2020}
        assert sorted(ids(col.search("drinks", k=10, where={"lang": "en"}))) == ["coffee", "rivers", "tea"]
        assert ids(col.search("drinks", k=10, where={"year": {"$gte": 2020}, "lang": "de"})) == ["kaffee"]
        assert ids(col.search("drinks", k=10, where={"tags.kind": "drink"})) == ["tea"]
        assert ids(col.search("drinks", k=10, where={"größe": {"$lt": 4}})) == ["rivers"]
        assert ids(col.search("roasted coffee beans", k=1, mode="bm25")) == ["coffee"]

        assert sorted(col.upsert(DOCS).unchanged) == sorted(d["id"] for d in DOCS)
        changed = dict(DOCS[1], text="Coffee is brewed from ground beans.")
        assert col.upsert([changed]).updated == ["coffee"]
        assert col.get("coffee").text == changed["text"]
        assert col.upsert([dict(DOCS[2], metadata={"lang": "de", "year": 2024})]).updated == ["kaffee"]
        assert ids(col.search("drinks", k=10, where={"year": 2024})) == ["kaffee"]
        assert col.delete(["rivers", "absent"]).deleted == ["rivers"]
        assert "rivers" not in ids(col.search("rivers sea deltas", k=10))
        info = col.info()
        assert (info["documents"], info["generation"]) == (3, 4)  # add, text change, metadata change, delete
        expected = ids(col.search("ground beans", k=3))

    with Collection.open(path) as again:
        assert len(again) == 3 and again.get("rivers") is None
        assert ids(again.search("ground beans", k=3)) == expected
        assert sorted(again.ids()) == ["coffee", "kaffee", "tea"]


def test_postgres_catalog_keeps_rows_in_the_database_not_the_directory(postgres_url, tiny_embedder, tmp_path):
    with Collection.create(tmp_path / "col", tiny_embedder, catalog_url=postgres_url) as col:
        col.add(DOCS)
        assert col.info()["catalog"] == hidden(postgres_url)
    assert not list((tmp_path / "col").glob("catalog.sqlite*"))
    manifest = json.loads((tmp_path / "col" / "manifest.json").read_text())
    assert manifest["catalog_url"] == postgres_url


def test_two_collections_cannot_share_one_database(postgres_url, tiny_embedder, tmp_path):
    Collection.create(tmp_path / "a", tiny_embedder, catalog_url=postgres_url).close()
    with pytest.raises(SemsearchError, match="already belongs") as info:
        Collection.create(tmp_path / "b", tiny_embedder, catalog_url=postgres_url)
    assert hidden(postgres_url) in str(info.value)


def _files_mention(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_password_in_the_url_never_lands_on_disk(postgres_server, tiny_embedder, tmp_path, monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.delenv(PASSWORD_FILE_ENV, raising=False)
    database = postgres_server.create_database()
    secret_url = postgres_server.url_with_password(database)
    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder, catalog_url=secret_url) as col:  # the password works at once
        col.add(DOCS)
        shown = [str(col.info()), repr(col)]
    password = postgres_server.password
    quoted = secret_url.split(":")[2].split("@")[0]  # as it appears, percent-encoded, in the URL
    assert quoted != password
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["catalog_url"] == postgres_server.url(database)
    assert _files_mention(path, password) == [] and _files_mention(path, quoted) == []
    assert not any(password in text or quoted in text for text in shown)

    # another process knows the password only from the environment (or a file it names)
    command = [sys.executable, "-m", "app.cli", "info", "-c", str(path), "--json"]
    base_env = {k: v for k, v in os.environ.items() if k not in (PASSWORD_ENV, PASSWORD_FILE_ENV)}
    base_env["PYTHONPATH"] = str(REPO)
    base_env["SEMSEARCH_CATALOG_HOSTS"] = "127.0.0.1"  # a later process sends the password to listed hosts only
    without = subprocess.run(command, cwd=REPO, env=base_env, capture_output=True, text=True, timeout=120)
    assert without.returncode == 1 and without.stderr.count("\n") == 1, without.stderr
    assert "password" in without.stderr and password not in without.stderr
    secret_file = tmp_path / "secret"
    secret_file.write_text(password + "\n")
    for extra in ({PASSWORD_ENV: password}, {PASSWORD_FILE_ENV: str(secret_file)}):
        done = subprocess.run(command, cwd=REPO, env=base_env | extra, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["documents"] == 4
        assert password not in done.stdout + done.stderr and quoted not in done.stdout + done.stderr


def test_a_wrong_password_is_an_error_that_does_not_show_it(
    postgres_server, postgres_url, tiny_embedder, tmp_path, monkeypatch
):
    Collection.create(tmp_path / "col", tiny_embedder, catalog_url=postgres_url).close()
    wrong = "Wr0ng-pa55word-" + postgres_server.password[:4]
    monkeypatch.setenv(PASSWORD_ENV, wrong)
    with pytest.raises(SemsearchError) as info:
        Collection.open(tmp_path / "col")
    assert "password authentication failed" in str(info.value) and wrong not in str(info.value)

    wrong_url = postgres_url.replace("semsearch@", f"semsearch:{wrong}@")
    with pytest.raises(SemsearchError) as info:
        Collection.create(tmp_path / "other", tiny_embedder, catalog_url=wrong_url)
    assert "password authentication failed" in str(info.value) and wrong not in str(info.value)
    assert not (tmp_path / "other" / "manifest.json").exists()


def test_a_bad_catalog_url_is_reported_without_its_password(tiny_embedder, tmp_path):
    for url in ("nosuchdb://user:Secret-123@host/db", "postgresql+psycopg://user:Secret-123@host:notaport/db"):
        with pytest.raises(SemsearchError) as info:
            Collection.create(tmp_path / "col", tiny_embedder, catalog_url=url)
        assert "Secret-123" not in str(info.value) and "catalog URL" in str(info.value)


def test_incremental_indexing_and_prune_on_each_catalog(catalog_url, tiny_embedder, tmp_path):
    """The indexer's catalog queries (content hashes, sources under a folder) on both catalogs."""
    from indexer.job import index_paths

    folder = tmp_path / "notes 100%_done"  # LIKE wildcards in the source prefix must match literally
    folder.mkdir()
    for name, text in [
        ("a.txt", "Rivers flow into the sea."),
        ("b.md", "# Tea\nGreen tea is steamed."),
        ("c.txt", "Mountains rise above the clouds."),
    ]:
        (folder / name).write_text(text)
    (tmp_path / "notes 1000_done").mkdir()  # a sibling that a wildcard would take for the folder
    (tmp_path / "notes 1000_done" / "d.txt").write_text("Databases store rows.")
    with Collection.create(tmp_path / "col", tiny_embedder, catalog_url=catalog_url) as col:
        first = index_paths(col, [folder, tmp_path / "notes 1000_done"], progress=False).written
        assert len(first.added) == 4
        again = index_paths(col, [folder], progress=False).written
        assert (again.added, again.updated, len(again.unchanged)) == ([], [], 3)
        (folder / "a.txt").write_text("Rivers flow into the sea through deltas.")
        (folder / "c.txt").unlink()
        report = index_paths(col, [folder], prune=True, progress=False).written
        assert report.updated == [str((folder / "a.txt").resolve())]
        assert report.deleted == [str((folder / "c.txt").resolve())]
        assert len(col) == 3 and str((tmp_path / "notes 1000_done" / "d.txt").resolve()) in col
        assert "source" in col.metadata_fields()
