"""Sentence spans of a passage, for showing the evidence of a hit.

Rule-based, as Lucene's highlighters break passages: a sentence ends at
``.``, ``!`` or ``?`` (closing quotes and brackets kept) followed by
white space and something that can start a sentence, or at a blank line.
A dot after a common abbreviation ("e.g.", "Fig.", "et al.") or a single
letter ("J. Smith") ends nothing. A "sentence" longer than
``MAX_SENTENCE_CHARS`` (code, tables, text without punctuation) is cut at
white space so that evidence stays short.
"""

from __future__ import annotations

import re

MAX_SENTENCE_CHARS = 400

_END = re.compile(r"[.!?]+[\"'\u2019\u201d)\]]*(?=\s+[\"'\u2018\u201c(\[]?[A-Z0-9\u00c0-\u024f])|\n[ \t]*\n")
_END_FIRST = re.compile(r"[.!?\n]")  # the characters an end of sentence (``_END``) can start with
_WORD_BEFORE = re.compile(r"([A-Za-z]+)\.*[\"'\u2019\u201d)\]]*$")
_ABBREVIATIONS = frozenset(
    "al approx cf dr e eg etc fig figs i ie jr mr mrs ms no nos prof sr st vol vs resp ref refs eq eqs".split()
)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``[(start, end)]`` character spans of the sentences of ``text[start:end]``.

    Spans are offsets in ``text``, in order, stripped of surrounding white
    space, never empty, and each at most ``MAX_SENTENCE_CHARS`` long.
    """
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    at = start
    for match in _ends(text, start, end):
        if match.group().startswith((".", "!", "?")) and _after_abbreviation(text, at, match.start()):
            continue
        spans.extend(_pieces(text, at, match.end()))
        at = match.end()
    spans.extend(_pieces(text, at, end))
    return spans


def _ends(text: str, start: int, end: int):
    """The matches of ``_END`` in ``text[start:end]``, as ``finditer`` finds them, in a third of the time: the
    scan jumps from one character that can start an end to the next and tries ``_END`` only there."""
    candidate = _END_FIRST.search(text, start, end)
    while candidate is not None:
        match = _END.match(text, candidate.start(), end)
        if match is not None:
            yield match
        candidate = _END_FIRST.search(text, match.end() if match is not None else candidate.start() + 1, end)


def _after_abbreviation(text: str, start: int, dot: int) -> bool:
    """Whether the dot at ``dot`` follows an abbreviation or a lone initial rather than ending a sentence."""
    if text[dot] != ".":
        return False
    word = _WORD_BEFORE.search(text, max(start, dot - 12), dot)
    if word is None:
        return False
    name = word.group(1)
    return len(name) == 1 or name.lower() in _ABBREVIATIONS


def _pieces(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``text[start:end]`` stripped, cut at white space into pieces of at most ``MAX_SENTENCE_CHARS``."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    pieces = []
    while end - start > MAX_SENTENCE_CHARS:
        cut = text.rfind(" ", start + MAX_SENTENCE_CHARS // 2, start + MAX_SENTENCE_CHARS)
        if cut == -1:
            cut = start + MAX_SENTENCE_CHARS
        pieces.append((start, cut))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        pieces.append((start, end))
    return pieces
