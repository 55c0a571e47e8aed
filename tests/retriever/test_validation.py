"""Argument checks of the public API, the id rules and the Unicode policy."""

from __future__ import annotations

import dataclasses

import pytest

from retriever import validation
from retriever.documents import Document, coerce_document
from retriever.errors import BadInputError, FilterError
from retriever.search.options import SearchOptions
from retriever.unicode_policy import has_control, is_utf8, printable


def search_args(**changes):
    args = {"query": "tea", "k": 10, "where": None, "mode": "hybrid", "fusion": "convex", "alpha": 0.6} | changes
    return args


def check_search(query="tea", **fields):
    """What ``Collection.search`` checks: the query, then the options (when made), then the two together."""
    validation.check_query(query)
    options = SearchOptions(**fields)
    validation.check_search_args(query, options)
    return options


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"query": b"tea"}, "query must be a string"),
        ({"query": "\ud800"}, "query cannot be encoded as UTF-8"),
        ({"query": "  "}, "query is empty"),
        ({"k": True}, "k must be an integer"),
        ({"k": 10**30}, "k must be an integer"),
        ({"k": 2.0}, "k must be an integer"),
        ({"mode": ["dense"]}, "unknown search mode"),
        ({"fusion": 3}, "unknown fusion"),
        ({"feedback": "yes"}, "feedback must be True or False"),
        ({"alpha": float("nan")}, "alpha must be a number"),
        ({"alpha": 10**400}, "alpha must be a number"),
        ({"exact": 1}, "exact must be True or False"),
        ({"evidence": "all"}, "evidence must be one of"),
    ],
)
def test_search_arguments_are_named(changes, words):
    with pytest.raises(BadInputError, match=words):
        check_search(**search_args(**changes))


def test_a_bad_where_is_a_filter_error():
    with pytest.raises(FilterError):
        check_search(**search_args(where={"year": 2**64}))
    check_search(**search_args(where={"year": 2**63 - 1}))


def test_search_options_are_one_checked_frozen_value():
    options = check_search(**search_args())
    assert (options.k, options.mode, options.fusion, options.alpha, options.feedback) == (
        10,
        "hybrid",
        "convex",
        0.6,
        None,
    )
    settled = options.settled({"fusion": "rrf", "alpha": 0.1, "feedback": False})
    assert (settled.fusion, settled.alpha, settled.feedback) == ("convex", 0.6, False)  # only the unset one
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.k = 3  # type: ignore[misc]
    assert options.with_mode("dense").mode == "dense" and options.depth == 100
    with pytest.raises(BadInputError, match="bm25 search needs a query text"):
        validation.check_search_args(None, SearchOptions(mode="bm25"), has_vector=True)


def test_ids_and_documents_arguments():
    with pytest.raises(BadInputError, match="not one str"):
        validation.check_ids("abc")
    with pytest.raises(BadInputError, match=r"ids\[1\]"):
        validation.check_ids(["a", 3])
    assert validation.check_ids(iter(["a", "b"])) == ["a", "b"]  # a generator is read once
    with pytest.raises(BadInputError, match="documents must be"):
        validation.check_documents("text")
    with pytest.raises(BadInputError, match=r"documents\[1\]"):
        validation.check_documents([{"id": "a", "text": "x"}, 5])
    assert len(validation.check_documents(Document("a", "x"))) == 1
    with pytest.raises(BadInputError, match=r"texts\[0\]"):
        validation.check_texts(["\udfff"])
    with pytest.raises(BadInputError, match="path must be"):
        validation.check_open_args(3, None, 60.0)
    with pytest.raises(BadInputError, match="lock_timeout"):
        validation.check_open_args("dir", None, float("inf"))


@pytest.mark.parametrize("doc_id", ["a\nb", "\x00", "tab\tid", "del\x7f", "c1\x85", "x" * 1025, "", "  ", "\ud800"])
def test_id_rules(doc_id):
    with pytest.raises(BadInputError):
        coerce_document({"id": doc_id, "text": "some text"})


@pytest.mark.parametrize(
    "metadata, words",
    [
        ({"k": 2**64}, "64-bit"),
        ({"k": float("nan")}, "finite"),
        ({"k": ["\ud800"]}, r"metadata.k\[0\] cannot be encoded"),
        ({1: "x"}, "keys must be strings"),
        ({"\udc80": 1}, "key cannot be encoded"),
        ({"k": object()}, "not JSON-serialisable"),
    ],
)
def test_metadata_is_plain_json(metadata, words):
    with pytest.raises(BadInputError, match=words):
        coerce_document({"id": "a", "text": "x", "metadata": metadata})


def test_deep_metadata_is_refused_not_a_recursion_error():
    deep: dict = {}
    for _ in range(5000):
        deep = {"k": deep}
    with pytest.raises(BadInputError, match="nested more than"):
        coerce_document({"id": "a", "text": "x", "metadata": deep})


def test_unicode_helpers():
    assert is_utf8("größe 🙂") and not is_utf8("a\ud800")
    assert has_control("a\nb") and has_control("\x9f") and not has_control("a b ü")
    assert printable("\ud800\n") == "'\\ud800\\n'"  # escaped, so any terminal or log shows it
    assert printable("x" * 100, 10) == "'xxxxxxxxxx'..."


def test_embedder_arguments_are_named(tiny_embedder):
    for texts, words in ((3, "texts must be"), (b"x", "texts must be"), (["ok", "\ud800"], r"texts\[1\] cannot")):
        with pytest.raises(BadInputError, match=words):
            tiny_embedder.embed(texts)
    for batch_size in (0, -5, 2.5, True):
        with pytest.raises(BadInputError, match="batch_size"):
            tiny_embedder.embed(["a"], batch_size=batch_size)
