"""The catalog password never travels in Ray's runtime_env (which the cluster stores and shows)."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")


def test_workers_get_a_password_file_path_and_the_allowed_hosts_never_the_password(monkeypatch, tmp_path):
    import indexer.ray_job as ray_job

    assert "SEMSEARCH_CATALOG_PASSWORD" not in ray_job.FORWARDED_ENV
    monkeypatch.setenv("SEMSEARCH_CATALOG_PASSWORD", "the-secret")
    monkeypatch.setenv("SEMSEARCH_CATALOG_PASSWORD_FILE", str(tmp_path / "pw"))
    monkeypatch.setenv("SEMSEARCH_CATALOG_HOSTS", "other.internal")
    env = ray_job.worker_env("postgresql+psycopg://ann@db.internal:5432/search")
    assert "the-secret" not in repr(env)
    assert env["SEMSEARCH_CATALOG_PASSWORD_FILE"] == str(tmp_path / "pw")
    assert set(env["SEMSEARCH_CATALOG_HOSTS"].split(",")) == {"other.internal", "db.internal:5432"}
    assert ray_job.worker_env(None)["SEMSEARCH_CATALOG_HOSTS"] == "other.internal"
