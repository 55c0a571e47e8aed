"""Odd input typed or pasted into the UI is a message, never an uncaught error."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from app.ui.uploads import pasted_document  # noqa: E402
from retriever.errors import BadInputError  # noqa: E402
from tests.app.test_ui import app, cards, collection, html_of, no_failure  # noqa: E402,F401  (fixture)

DEEP = "[" * 50_000 + "]" * 50_000
DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000
DEEP_FILTER = '{"a":' * 5_000 + "1" + "}" * 5_000  # Streamlit drops a query string over 512 KiB


@pytest.mark.parametrize("raw", [DEEP, DEEP_OBJECT, '{"n": ' + "9" * 5000 + "}"])
def test_pasted_metadata_nested_or_huge_is_a_bad_input_error(raw):
    with pytest.raises(BadInputError, match="metadata"):
        pasted_document("some text", metadata_json=raw)


def test_a_deeply_nested_filter_is_a_message(monkeypatch, collection):
    at = app(monkeypatch, collection, q="tea", where=DEEP_FILTER)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("JSON filter" in w.value for w in at.warning)


@pytest.mark.parametrize("span", ["²-3", "1-³", "٣-5", "-", "5-2", "99999999999999999999999-1"])
def test_an_odd_span_in_the_url_opens_the_document_without_a_mark(monkeypatch, collection, span):
    at = app(monkeypatch, collection, doc="tea", span=span)
    no_failure(at)
    page = html_of(at)
    assert "ss-doc" in page and "steamed right after picking" in page  # the document is shown
    assert "<mark" not in page  # and no span of it is marked
