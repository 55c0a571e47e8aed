"""Passages and documents as safe HTML for the UI: the evidence of a hit marked, the query's terms in bold.

Every piece of document text goes through ``html.escape`` here.
"""

from __future__ import annotations

import html
import re
from typing import Any, Sequence

CONTEXT_CHARS = 300
DOCUMENT_VIEW_CHARS = 200_000

_SPACE = re.compile(r"\s+")


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text)


def passage_html(text: str, start: int, end: int, evidence: Sequence[Any] = (), context: int = CONTEXT_CHARS) -> str:
    """The chunk ``text[start:end]`` with ``context`` characters each side (cut at word
    boundaries, "…" where cut), whitespace folded, HTML-escaped.

    With ``evidence`` (``Hit.evidence``: sentences with document offsets and
    their query terms), those sentences are marked (``<mark class="ss-evidence">``)
    and the terms in them bold (``<b class="ss-term">``); without, the whole
    chunk is marked.
    """
    start = max(0, min(start, len(text)))
    end = max(start, min(end, len(text)))
    left_at = max(0, start - context)
    if left_at > 0:
        space = text.find(" ", left_at, start)
        left_at = space + 1 if space != -1 else left_at
    right_at = min(len(text), end + context)
    if right_at < len(text):
        space = text.rfind(" ", end, right_at)
        right_at = space if space != -1 else right_at
    if evidence:
        body = _marked(text, left_at, right_at, evidence)
    else:
        left, chunk, right = text[left_at:start], text[start:end], text[end:right_at]
        body = (
            html.escape(_squash(left).lstrip())
            + f"<mark>{html.escape(_squash(chunk))}</mark>"
            + html.escape(_squash(right).rstrip())
        )
    return ("… " if left_at > 0 else "") + body + (" …" if right_at < len(text) else "")


_EVIDENCE_KINDS = {  # method: (extra class, tooltip)
    "terms": ("", "holds the query's words"),
    "semantic": (" ss-semantic", "closest in meaning to the query"),
}


def _marked(text: str, lo: int, hi: int, evidence: Sequence[Any]) -> str:
    """``text[lo:hi]`` escaped, whitespace folded, each evidence sentence marked and its terms bold."""
    pieces, at = [], lo
    for sentence in sorted(evidence, key=lambda s: s.start):
        s_start, s_end = max(sentence.start, at), min(sentence.end, hi)
        if s_start >= s_end:
            continue
        pieces.append(html.escape(_squash(text[at:s_start])))
        inner, inside_at = [], s_start
        for term in sorted(sentence.terms, key=lambda t: t.start):
            if term.start < inside_at or term.end > s_end:
                continue
            inner.append(html.escape(_squash(text[inside_at : term.start])))
            inner.append(f'<b class="ss-term">{html.escape(text[term.start : term.end])}</b>')
            inside_at = term.end
        inner.append(html.escape(_squash(text[inside_at:s_end])))
        kind = _EVIDENCE_KINDS.get(sentence.method, ("", ""))
        pieces.append(f'<mark class="ss-evidence{kind[0]}" title="{kind[1]}">{"".join(inner)}</mark>')
        at = s_end
    pieces.append(html.escape(_squash(text[at:hi])))
    return "".join(pieces).strip()


def document_html(
    text: str, start: int | None = None, end: int | None = None, limit: int = DOCUMENT_VIEW_CHARS
) -> tuple[str, str]:
    """The whole document as escaped HTML (line breaks kept by CSS), the span
    ``start:end`` highlighted. Past ``limit`` characters only a window around the
    span is shown; the second value then says which part (never a silent cut)."""
    n = len(text)
    has_span = start is not None and end is not None and 0 <= start < end <= n
    lo, hi = 0, n
    if n > limit:
        centre = (start + end) // 2 if has_span else 0
        lo = max(0, min(centre - limit // 2, n - limit))
        hi = lo + limit
    note = "" if (lo, hi) == (0, n) else f"Showing characters {lo:,}–{hi:,} of {n:,}."
    if not has_span or not (lo <= start and end <= hi):
        return html.escape(text[lo:hi]), note
    return (
        html.escape(text[lo:start])
        + f'<mark id="match">{html.escape(text[start:end])}</mark>'
        + html.escape(text[end:hi])
    ), note
