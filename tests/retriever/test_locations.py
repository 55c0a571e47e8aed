"""``retriever.locations``: columns built part by part, the part an offset falls in, malformed columns, words."""

from __future__ import annotations

import pytest

from retriever.documents import Document, coerce_document
from retriever.errors import BadInputError
from retriever.locations import (
    LocatedText,
    check_document_locations,
    check_locations,
    describe,
    location_at,
    without_locations,
)

PAGES = ["First page about rivers.", "   ", "Second page about coffee.", "Third page about tea."]


def built_pages() -> LocatedText:
    built = LocatedText()
    for number, text in enumerate(PAGES, start=1):
        built.add(text, page=number)
    return built


def test_columns_start_where_each_part_starts_in_the_text():
    built = built_pages()
    columns = built.locations()
    assert built.parts == 3 and len(built) == len(built.text)  # the blank page is left out
    assert columns["page"] == [1, 3, 4] and set(columns) == {"start", "page"}
    for start, text in zip(columns["start"], [PAGES[0], PAGES[2], PAGES[3]]):
        assert built.text[start:].startswith(text)
    assert built.text == "\n\n".join([PAGES[0], PAGES[2], PAGES[3]])
    assert LocatedText().locations() == {}


def test_labels_a_part_lacks_are_none_and_only_used_labels_are_columns():
    built = LocatedText(separator="\n")
    built.add("Before any heading.")
    built.add("Under the intro.", section=["Intro"])
    built.add("Under scope.", section=["Intro", "Scope"])
    columns = built.locations()
    assert columns == {"start": [0, 20, 37], "section": [None, ["Intro"], ["Intro", "Scope"]]}
    assert built.text.split("\n") == ["Before any heading.", "Under the intro.", "Under scope."]


@pytest.mark.parametrize(
    "labels",
    [
        {"chapter": 1},
        {"page": 0},
        {"page": "3"},
        {"page": True},
        {"sheet": 1},
        {"section": "Intro"},
        {"section": ["Intro", 2]},
        {"row": 1.5},
    ],
)
def test_unknown_labels_and_values_of_the_wrong_kind_are_refused(labels):
    with pytest.raises(ValueError, match="location labels"):
        LocatedText().add("text", **labels)


def test_location_at_part_boundaries():
    built = built_pages()
    metadata = {"locations": built.locations()}
    second, third = built.locations()["start"][1:]
    assert location_at(metadata, 0) == {"page": 1}
    assert location_at(metadata, second - 1) == {"page": 1}  # the separator belongs to the part before it
    assert location_at(metadata, second) == {"page": 3}
    assert location_at(metadata, third - 1) == {"page": 3}
    assert location_at(metadata, third) == {"page": 4}
    assert location_at(metadata, len(built.text) + 100) == {"page": 4}


def test_location_at_drops_missing_labels_and_says_none_before_the_first_part():
    columns = {"start": [5, 10], "sheet": ["Q1", "Q2"], "row": [None, 7], "section": [[], None]}
    assert location_at({"locations": columns}, 4) is None
    assert location_at({"locations": columns}, 5) == {"sheet": "Q1"}
    assert location_at({"locations": columns}, 12) == {"sheet": "Q2", "row": 7}
    assert location_at({"title": "no locations"}, 3) is None and location_at(None, 3) is None


@pytest.mark.parametrize(
    "columns",
    [
        None,
        "page 3",
        [0, 10],
        {},
        {"page": [1]},
        {"start": []},
        {"start": "0"},
        {"start": [0, 5], "page": [1]},
        {"start": [0], "chapter": [1]},
        {"start": [0], "page": 1},
        {"start": ["0"], "page": [1]},
        {"start": [True], "page": [1]},
        {"start": [0], "page": ["one"]},
        {"start": [0], "section": ["Intro"]},
        {"start": [0], "page": [0]},
        {"start": [0, "5"], "page": [1, 2]},
    ],
)
def test_malformed_columns_give_no_location(columns):
    assert location_at({"locations": columns}, 3) is None


def test_describe_says_the_place_in_words():
    assert describe({"page": 12}) == "page 12"
    assert describe({"slide": 3}) == "slide 3"
    assert describe({"sheet": "Q1", "row": 5}) == "sheet Q1, row 5"
    assert describe({"section": ["Intro", "Scope"]}) == "Intro › Scope"
    assert describe({"message": 17, "section": ["Re: budget"]}) == "message 17, Re: budget"
    assert describe(None) == "" and describe({}) == ""


def test_without_locations_drops_only_location_columns():
    columns = built_pages().locations()
    metadata = {"source": "/r.pdf", "locations": columns}
    assert without_locations(metadata) == {"source": "/r.pdf"} and metadata["locations"] == columns
    plain = {"source": "/r.pdf"}
    assert without_locations(plain) is plain
    own = {"locations": ["Berlin", "Paris"]}  # the caller's own field under the same name stays
    assert without_locations(own) is own


def test_columns_are_checked_on_write_and_a_callers_own_field_is_kept():
    check_locations(built_pages().locations())
    with pytest.raises(BadInputError, match="here must be a mapping of equal-length lists"):
        check_locations({"start": [10, 0], "page": [1, 2]}, "here")  # starts not ascending
    check_document_locations({"locations": ["Berlin", "Paris"]})
    check_document_locations({"locations": {"city": "Berlin"}})
    check_document_locations("not metadata at all")

    good = coerce_document({"id": "r", "text": "x", "metadata": {"locations": built_pages().locations()}})
    assert good.metadata["locations"]["page"] == [1, 3, 4]
    own = coerce_document(Document("c", "x", metadata={"locations": ["Berlin", "Paris"]}))
    assert own.metadata["locations"] == ["Berlin", "Paris"]
    for columns in ({"start": [0, 5], "page": [1]}, {"start": [0], "page": ["one"]}, {"start": [0, "1"]}):
        with pytest.raises(BadInputError, match=r"document 'r': metadata\.locations must be"):
            coerce_document({"id": "r", "text": "x", "metadata": {"locations": columns}})
