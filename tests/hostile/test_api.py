"""Generated Python API calls: each returns, or raises a BadInputError naming the argument; refused writes change nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retriever.documents import Document
from retriever.errors import BadInputError, DeadlineExceededError
from tests.hostile.conftest import case, examples, fingerprint
from tests.hostile.strategies import (
    filters,
    foreign_catalog_urls,
    hostile_float,
    hostile_int,
    hostile_text,
    json_like,
    nested,
)

WRITES = {"add", "upsert", "delete"}

doc_dicts = st.fixed_dictionaries(
    {
        "id": st.one_of(hostile_text, st.just("tea"), st.just("h-ok"), json_like),
        "text": st.one_of(hostile_text, st.just("Fresh text about tea."), json_like),
    },
    optional={
        "title": st.one_of(hostile_text, json_like),
        "metadata": st.one_of(json_like, nested(40)),
        "extra": json_like,
    },
)
doc_objects = st.builds(
    Document,
    id=st.one_of(hostile_text, json_like),
    text=hostile_text,
    title=st.one_of(hostile_text, json_like),
    metadata=st.one_of(json_like, nested(40)),
)
documents_arg = st.one_of(
    doc_dicts,
    doc_objects,
    st.lists(st.one_of(doc_dicts, doc_objects), max_size=3),
    st.lists(doc_dicts, max_size=2).map(iter),
    json_like,
    st.binary(max_size=8),
)
ids_arg = st.one_of(
    hostile_text,
    st.lists(st.one_of(hostile_text, json_like), max_size=4),
    st.lists(hostile_text, max_size=3).map(iter),
    st.lists(hostile_text, max_size=3).map(tuple),
    json_like,
    st.binary(max_size=8),
)
search_kwargs = st.fixed_dictionaries(
    {"query": st.one_of(hostile_text, st.just("green tea"), json_like)},
    optional={
        "k": st.one_of(hostile_int, hostile_float, json_like),
        "where": st.one_of(filters, json_like),
        "mode": st.one_of(st.sampled_from(["dense", "bm25", "hybrid"]), hostile_text, json_like),
        "fusion": st.one_of(st.sampled_from(["rrf", "convex"]), hostile_text),
        "alpha": st.one_of(hostile_float, hostile_int, json_like),
    },
)
calls = st.one_of(
    st.tuples(st.just("search"), search_kwargs),
    st.tuples(st.sampled_from(["add", "upsert"]), documents_arg.map(lambda d: {"documents": d})),
    st.tuples(st.just("delete"), ids_arg.map(lambda i: {"ids": i})),
    st.tuples(st.sampled_from(["get", "contains"]), st.one_of(hostile_text, json_like).map(lambda i: {"doc_id": i})),
    st.tuples(
        st.just("embed"),
        st.one_of(hostile_text, st.lists(hostile_text, max_size=3), json_like).map(lambda t: {"texts": t}),
    ),
)


def _call(col, method: str, kwargs: dict):
    if method == "contains":
        return kwargs["doc_id"] in col
    return getattr(col, method)(**kwargs)


@settings(max_examples=examples(150))
@given(call=calls)
def test_a_call_returns_or_names_its_bad_argument(col, call):
    method, kwargs = call
    with case("python-api"):
        before = fingerprint(col) if method in WRITES else None
        try:
            _call(col, method, kwargs)
        except BadInputError as exc:
            assert str(exc).strip()
            if method in WRITES:
                assert fingerprint(col) == before, (method, kwargs)


def test_delete_refuses_a_bare_string(col):
    before = fingerprint(col)
    with pytest.raises(BadInputError, match="not one str"):
        col.delete("tea")
    assert fingerprint(col) == before and "tea" in col


def test_ids_with_control_characters_are_refused_on_every_write(col):
    for bad in ("a\nb", "a\x00", "tab\there", "\x7f", "x" * 1025, "\ud800"):
        before = fingerprint(col)
        for write in (col.add, col.upsert):
            with pytest.raises(BadInputError):
                write([{"id": bad, "text": "some text"}])
        assert fingerprint(col) == before


def test_a_write_past_its_deadline_rolls_back(col):
    from retriever.deadline import deadline

    before = fingerprint(col)
    with deadline(0), pytest.raises(DeadlineExceededError):
        col.upsert([{"id": "late", "text": "This write comes too late."}])
    assert fingerprint(col) == before and "late" not in col
    with deadline(0), pytest.raises(DeadlineExceededError):
        col.delete(["tea"])  # no embedding to stop: the commit itself is refused
    assert fingerprint(col) == before and "tea" in col


def test_a_query_past_its_deadline_is_interrupted(col):
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from retriever.deadline import deadline

    slow = text(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) SELECT count(*) FROM c"
    )
    with col.catalog.engine.connect() as conn:
        with deadline(0), pytest.raises(OperationalError, match="interrupt"):
            conn.execute(slow)
        assert conn.execute(text("SELECT 1")).scalar() == 1  # the connection is usable again


SECRET = "users-catalog-secret"


@pytest.fixture(scope="module")
def crafted_root(hostile_collection, tmp_path_factory):
    """A directory with the hostile collection's manifest only: its catalog URL is rewritten per case."""
    import shutil

    root = tmp_path_factory.mktemp("crafted") / "col"
    root.mkdir()
    shutil.copy(hostile_collection / "manifest.json", root / "manifest.json")
    return root


@settings(max_examples=examples(100))
@given(url=foreign_catalog_urls())
def test_a_crafted_manifest_never_gets_the_catalog_password(crafted_root, url, monkeypatch_module):
    """Opening a collection someone else made must not send SEMSEARCH_CATALOG_PASSWORD to the host it names."""
    import json

    import sqlalchemy

    from retriever import Collection, SemsearchError
    from retriever.storage import catalog as catalog_module

    sent = []

    def no_network(url, **_kwargs):
        sent.append(url)
        raise SemsearchError("no connection in this test")

    monkeypatch_module.setattr(catalog_module, "create_engine", no_network)
    data = json.loads((crafted_root / "manifest.json").read_text())
    data["catalog_url"] = url
    (crafted_root / "manifest.json").write_text(json.dumps(data))
    with case("crafted catalog url"):
        try:
            Collection.open(crafted_root).close()
        except SemsearchError as exc:
            assert SECRET not in str(exc)
        for sent_url in sent:
            parsed = sent_url if isinstance(sent_url, sqlalchemy.engine.URL) else None
            assert parsed is None or parsed.password != SECRET, url


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SEMSEARCH_CATALOG_PASSWORD", SECRET)
        patch.delenv("SEMSEARCH_CATALOG_HOSTS", raising=False)
        patch.delenv("SEMSEARCH_CATALOG_PASSWORD_FILE", raising=False)
        yield patch
