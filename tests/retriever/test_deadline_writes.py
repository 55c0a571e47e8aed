"""Deadlines and writes: a query on PostgreSQL stops at the deadline; a commit is never undone by its merge."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from retriever import Collection
from retriever.deadline import deadline
from retriever.storage.merging import MergePolicy


def doc(i: int) -> dict:
    return {"id": f"d{i}", "text": f"document number {i} about rivers and tea"}


def test_a_write_under_a_deadline_commits_without_running_a_merge(tiny_embedder, tmp_path, monkeypatch):
    """The merge that follows a commit used to run inside the request's deadline (and answer 503 if slow)."""
    col = Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(factor=2, floor_chunks=1000))
    merges = []
    real_merge = col.writer.merge
    monkeypatch.setattr(col.writer, "merge", lambda *a: merges.append(a) or real_merge(*a))
    col.upsert([doc(0)])
    with deadline(60):
        col.upsert([doc(1)])  # two segments of one tier: the policy asks for a merge
    assert merges == [] and len(col) == 2
    assert col.writer.merge_policy.plan(col.writer.state()[1].parts)  # still due
    col.upsert([doc(2)])  # a write without a deadline merges as before
    assert merges and len(col) == 3
    col.close()


def test_on_postgresql_a_query_past_the_deadline_is_stopped_by_the_server(postgres_url, tiny_embedder, tmp_path):
    col = Collection.create(tmp_path / "col", tiny_embedder, catalog_url=postgres_url)
    engine = col.catalog.engine
    started = time.monotonic()
    with pytest.raises(DBAPIError, match="statement timeout"):
        with deadline(0.5):
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_sleep(5)"))
    assert time.monotonic() - started < 3
    with engine.connect() as conn:  # outside a deadline the limit is lifted again
        assert conn.execute(text("SELECT pg_sleep(0.7), 1")).all()[0][1] == 1
        assert conn.execute(text("SHOW statement_timeout")).scalar() in ("0", "0ms")
    col.close()


def test_the_service_merges_in_the_background_after_a_write_answered(tiny_embedder, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from app.server import create_app

    Collection.create(tmp_path / "col", tiny_embedder, merge_policy=MergePolicy(factor=2, floor_chunks=1000)).close()
    app = create_app(tmp_path / "col", warm_up=False, deadline_s=30)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for i in range(2):
            assert client.post("/documents", json={"documents": [doc(i)]}).status_code == 200
        deadline_at = time.monotonic() + 30
        while app.state.merges.running.locked() and time.monotonic() < deadline_at:
            time.sleep(0.05)
        col = app.state.collection
        assert len(col.writer.state()[1].parts) == 1 and len(col) == 2
