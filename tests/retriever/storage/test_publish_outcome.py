"""A publish whose outcome the writer cannot see (connection lost in COMMIT, Ctrl-C after it).

The writer decides by reading the committed generation again: a commit that
landed keeps its files, one that did not removes them, and one whose outcome
cannot be read keeps them for the next writer to judge under the lock.
"""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError

from retriever import Collection, SemsearchError
from retriever.storage.catalog import Catalog

DOCS = [{"id": f"d{i}", "text": f"tea rivers note {i} " * 4, "metadata": {"n": i}} for i in range(4)]
MORE = [{"id": "late", "text": "coffee beans are roasted", "metadata": {"n": 99}}]
LOST = OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly"))


def texts(path, model) -> dict[str, str]:
    """Every document's text, read by a fresh reader (what any other process would see)."""
    with Collection.open(path, model) as col:
        return {doc_id: col.get(doc_id).text for doc_id in col.ids()}


def built(path, model, catalog_url=None):
    """A collection of ``DOCS`` at ``path``."""
    with Collection.create(path, model, catalog_url=catalog_url) as col:
        col.add(DOCS)
    return path


def committed_then(error: BaseException):
    """A ``Catalog.publish`` whose COMMIT reaches the database, after which ``error`` is raised."""
    real = Catalog.publish

    def publish(self, expected, change):
        real(self, expected, change)
        raise error

    return publish


def test_a_commit_that_reached_the_database_keeps_its_files(catalog_url, tiny_embedder, tmp_path, monkeypatch):
    path = built(tmp_path / "col", tiny_embedder, catalog_url)
    with monkeypatch.context() as patch, Collection.open(path, tiny_embedder) as col:
        patch.setattr(Catalog, "publish", committed_then(LOST))  # the answer lost on the way back
        col.add(MORE)  # the committed generation says it landed: no error
    found = texts(path, tiny_embedder)
    assert found["late"] == MORE[0]["text"] and len(found) == 5


def test_ctrl_c_after_the_commit_keeps_the_collection_readable(catalog_url, tiny_embedder, tmp_path, monkeypatch):
    path = built(tmp_path / "col", tiny_embedder, catalog_url)
    with monkeypatch.context() as patch, Collection.open(path, tiny_embedder) as col:
        patch.setattr(Catalog, "publish", committed_then(KeyboardInterrupt()))
        with pytest.raises(KeyboardInterrupt):
            col.delete(["d0"])
    assert sorted(texts(path, tiny_embedder)) == ["d1", "d2", "d3"]


def test_a_commit_that_never_reached_the_database_leaves_the_old_generation(tiny_embedder, tmp_path, monkeypatch):
    path = built(tmp_path / "col", tiny_embedder)

    def lost(self, expected, change):
        raise LOST

    with monkeypatch.context() as patch, Collection.open(path, tiny_embedder) as col:
        patch.setattr(Catalog, "publish", lost)
        with pytest.raises(OperationalError):
            col.add(MORE)
    assert sorted(texts(path, tiny_embedder)) == [d["id"] for d in DOCS]
    assert not [p for p in (path / "segments").iterdir() if p.name.startswith(".staged-")]


def test_an_unreadable_outcome_keeps_the_files_and_says_so(tiny_embedder, tmp_path, monkeypatch):
    path = built(tmp_path / "col", tiny_embedder)
    real_state, publish, down = Catalog.state, committed_then(LOST), []

    def publish_then_down(self, expected, change):
        down.append(True)  # from here on the catalog cannot be reached
        publish(self, expected, change)

    def state(self):
        if down:
            raise SemsearchError("cannot read catalog: connection refused")
        return real_state(self)

    with monkeypatch.context() as patch, Collection.open(path, tiny_embedder) as col:
        patch.setattr(Catalog, "publish", publish_then_down)
        patch.setattr(Catalog, "state", state)
        with pytest.raises(SemsearchError, match="outcome"):
            col.add(MORE)
    found = texts(path, tiny_embedder)  # the next reader (and writer) sees the commit whole
    assert found["late"] == MORE[0]["text"]
    with Collection.open(path, tiny_embedder) as col:
        col.add([dict(MORE[0], id="later")])
    assert len(texts(path, tiny_embedder)) == 6
