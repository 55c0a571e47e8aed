"""Catalog URLs: the stored form has no password, messages hide it, connections get it at run time."""

from __future__ import annotations

import pytest

from retriever import SemsearchError
from retriever.storage.catalog_url import PASSWORD_ENV, PASSWORD_FILE_ENV, for_manifest, redact, with_password


@pytest.fixture(autouse=True)
def no_password_in_env(monkeypatch):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.delenv(PASSWORD_FILE_ENV, raising=False)


def test_redact_hides_only_the_password():
    assert redact("postgresql+psycopg://ann:s3cr%40t@db:5432/search?sslmode=require") == (
        "postgresql+psycopg://ann:***@db:5432/search?sslmode=require"
    )
    assert redact("postgresql+psycopg://ann@db/search") == "postgresql+psycopg://ann@db/search"
    assert redact("sqlite:////tmp/c/catalog.sqlite") == "sqlite:////tmp/c/catalog.sqlite"
    assert "s3cr" not in redact("not a url ann:s3cr@db")


def test_the_stored_form_drops_the_password_and_this_process_remembers_it():
    stored = for_manifest("postgresql+psycopg://ann:p%40ss%2Fword@db-remember:5432/search?sslmode=require")
    assert stored == "postgresql+psycopg://ann@db-remember:5432/search?sslmode=require"
    connect = with_password(stored)
    assert connect.password == "p@ss/word"
    assert "p@ss" not in str(connect) and "p@ss" not in repr(connect)
    assert for_manifest(None) is None
    assert for_manifest("sqlite:////x/catalog.sqlite") == "sqlite:////x/catalog.sqlite"
    with pytest.raises(SemsearchError, match="not a SQLAlchemy URL"):
        for_manifest("user:secret@host")


def test_the_password_comes_from_the_environment_or_a_file_it_names(tmp_path, monkeypatch):
    url = "postgresql+psycopg://ann@db-env/search"
    monkeypatch.setenv("SEMSEARCH_CATALOG_HOSTS", "db-env")  # the environment's password goes to listed hosts only
    assert with_password(url).password is None
    secret = tmp_path / "secret"
    secret.write_text("from-file\nignored second line\n")
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(secret))
    assert with_password(url).password == "from-file"
    monkeypatch.setenv(PASSWORD_ENV, "from-env")
    assert with_password(url).password == "from-env"  # the variable wins over the file
    assert with_password("postgresql+psycopg://ann:own@db-env/search").password == "own"  # the URL's own wins
    assert with_password("sqlite:////x/catalog.sqlite") == "sqlite:////x/catalog.sqlite"


def test_an_unreadable_password_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(PASSWORD_FILE_ENV, str(tmp_path / "missing"))
    with pytest.raises(SemsearchError, match=PASSWORD_FILE_ENV):
        with_password(for_manifest("postgresql+psycopg://ann@db-file/search"))


HOSTS_ENV = "SEMSEARCH_CATALOG_HOSTS"


def test_a_host_named_only_by_a_manifest_gets_no_password_from_the_environment(monkeypatch):
    """A collection directory from someone else must not collect the user's catalog password."""
    monkeypatch.setenv(PASSWORD_ENV, "users-secret")
    monkeypatch.delenv(HOSTS_ENV, raising=False)
    with pytest.raises(SemsearchError, match=HOSTS_ENV) as info:
        with_password("postgresql+psycopg://ann@evil.example:5432/search")
    assert "users-secret" not in str(info.value) and "evil.example" in str(info.value)
    monkeypatch.setenv(HOSTS_ENV, "db.internal, evil.example:5432")
    assert with_password("postgresql+psycopg://ann@evil.example:5432/search").password == "users-secret"
    with pytest.raises(SemsearchError, match=HOSTS_ENV):  # a listed host, but libpq would go elsewhere
        with_password("postgresql+psycopg://ann@db.internal/search?host=attacker.example")


def test_a_password_is_sent_only_with_scram_required(monkeypatch):
    from sqlalchemy import create_engine, event

    stored = for_manifest("postgresql+psycopg://ann:pw@127.0.0.1:1/search?require_auth=password")
    engine = create_engine(with_password(stored))
    sent = []

    @event.listens_for(engine, "do_connect")
    def record(_dialect, _record, _cargs, cparams):
        sent.append(dict(cparams))
        raise SemsearchError("recorded")

    with pytest.raises(Exception, match="recorded"):
        engine.connect()
    assert sent[0]["password"] == "pw" and sent[0]["require_auth"] == "scram-sha-256"
    with pytest.raises(SemsearchError, match="SCRAM"):
        with_password("postgresql+pg8000://ann:pw@db-scram/search")


def test_a_password_given_as_a_query_parameter_is_neither_stored_nor_shown():
    url = "postgresql+psycopg://ann@db-query/search?password=s3cret&sslmode=require"
    stored = for_manifest(url)
    assert "s3cret" not in stored and "sslmode=require" in stored
    assert "s3cret" not in redact(url)
    connect = with_password(stored)
    assert connect.password == "s3cret" and "password" not in connect.query


def test_opening_a_crafted_collection_refuses_to_send_the_password(tiny_embedder, tmp_path, monkeypatch):
    import json

    from retriever import Collection

    Collection.create(tmp_path / "col", tiny_embedder).close()
    manifest = tmp_path / "col" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["catalog_url"] = "postgresql+psycopg://victim@collector.example/db"
    manifest.write_text(json.dumps(data))
    monkeypatch.setenv(PASSWORD_ENV, "users-secret")
    with pytest.raises(SemsearchError, match=HOSTS_ENV):
        Collection.open(tmp_path / "col", tiny_embedder)
