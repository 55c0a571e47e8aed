"""Sentence spans of passages (evidence)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from retriever.search.sentences import MAX_SENTENCE_CHARS, sentence_spans


def sentences(text: str, start: int = 0, end: int | None = None) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text, start, end)]


def test_splits_at_sentence_ends_but_not_after_abbreviations_or_initials():
    text = "Hello world. This is e.g. a test! Is it? Yes.  J. Smith et al. (2010) showed it, cf. Fig. 2."
    assert sentences(text) == [
        "Hello world.",
        "This is e.g. a test!",
        "Is it?",
        "Yes.",
        "J. Smith et al. (2010) showed it, cf. Fig. 2.",
    ]


def test_closing_quotes_stay_with_their_sentence_and_lower_case_does_not_start_one():
    assert sentences('He said "stop." Then left.') == ['He said "stop."', "Then left."]
    assert sentences("Version 3.11 adds it. pip. installs it") == ["Version 3.11 adds it. pip. installs it"]


def test_blank_lines_end_a_sentence_single_newlines_do_not():
    text = "A heading\n\nWrapped text that\ngoes on. Next one"
    assert sentences(text) == ["A heading", "Wrapped text that\ngoes on.", "Next one"]


def test_long_runs_are_cut_at_white_space():
    text = " ".join(["word"] * 300)  # 1,499 characters, no punctuation
    spans = sentence_spans(text)
    assert len(spans) == 4 and all(b - a <= MAX_SENTENCE_CHARS for a, b in spans)
    assert " ".join(text[a:b] for a, b in spans) == text
    unbroken = "x" * 1000
    assert [b - a for a, b in sentence_spans(unbroken)] == [400, 400, 200]


def test_offsets_are_in_the_whole_text_when_a_window_is_given():
    text = "Skip me. Inside one. Inside two. Skip too."
    lo, hi = text.index("Inside one"), text.index("Skip too")
    assert sentences(text, lo, hi) == ["Inside one.", "Inside two."]


@given(st.text(alphabet=st.sampled_from("ab .!?\n\"'()AZ9é"), max_size=600))
def test_spans_are_ordered_stripped_bounded_and_non_empty(text):
    spans = sentence_spans(text)
    previous = 0
    for a, b in spans:
        assert previous <= a < b <= len(text) and b - a <= MAX_SENTENCE_CHARS
        assert not text[a].isspace() and not text[b - 1].isspace()
        previous = b
    assert "".join(text.split()) == "".join("".join(text[a:b] for a, b in spans).split())


@given(st.text(alphabet=st.sampled_from("ab .!?\n\t\"'()[]\u201c\u2019AZ9é"), max_size=300), st.data())
def test_sentence_ends_are_found_as_the_pattern_finds_them_within_bounds(text, data):
    from retriever.search.sentences import _END, _ends

    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    assert [m.span() for m in _ends(text, start, end)] == [m.span() for m in _END.finditer(text, start, end)]
