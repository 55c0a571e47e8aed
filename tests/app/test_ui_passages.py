"""Passages and documents as HTML: context, escaping, evidence and terms marked."""

from __future__ import annotations

from app.ui import passages
from retriever.documents import Evidence, TermMatch


def test_passage_html_escapes_and_marks_with_context():
    text = "a" * 500 + " <b>chunk</b> & more " + "z " * 400
    start = text.index("<b>")
    end = start + len("<b>chunk</b>")
    out = passages.passage_html(text, start, end, context=50)
    assert out.startswith("… ") and out.endswith(" …")
    assert "<mark>&lt;b&gt;chunk&lt;/b&gt;</mark>" in out and "<b>" not in out
    assert len(out) < 250
    assert passages.passage_html("short", 0, 5) == "<mark>short</mark>"


def test_passage_html_marks_evidence_sentences_and_terms():
    text = "Intro words here. Tea <leaves> are steamed.   Other\n text follows. Tail."
    s = text.index("Tea")
    e = text.index("steamed.") + len("steamed.")
    evidence = [Evidence(text[s:e], s, e, 1.0, "terms", (TermMatch("Tea", s, s + 3),))]
    out = passages.passage_html(text, 0, len(text), evidence)
    assert out == (
        'Intro words here. <mark class="ss-evidence" title="holds the query\'s words">'
        '<b class="ss-term">Tea</b> &lt;leaves&gt; are steamed.</mark> Other text follows. Tail.'
    )
    semantic = [Evidence(text[s:e], s, e, 0.4, "semantic")]
    assert '<mark class="ss-evidence ss-semantic" title="closest in meaning to the query">Tea' in (
        passages.passage_html(text, 0, len(text), semantic)
    )
    # an evidence span outside the window shown is left out, not half-drawn
    tail = text.index("Tail.")
    outside = [Evidence("Tail.", tail, tail + 5, 1.0, "terms")]
    assert "ss-evidence" not in passages.passage_html(text, 0, 10, outside, context=0)


def test_document_html_windows_long_text_and_says_so():
    text = "x" * 1000
    body, note = passages.document_html(text, 900, 950, limit=200)
    assert '<mark id="match">' in body and "Showing characters 800–1,000 of 1,000" in note
    body, note = passages.document_html("<p>hi</p>", None, None)
    assert body == "&lt;p&gt;hi&lt;/p&gt;" and note == ""
