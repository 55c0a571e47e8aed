"""Markdown and HTML files: their headings as section paths, their text as before."""

from __future__ import annotations

import warnings

from bs4 import XMLParsedAsHTMLWarning

from indexer.loaders import load_path
from indexer.loaders.markup import html_parts, parse_html
from indexer.loaders.text import text_document
from tests.indexer.made_files import located

MARKDOWN = """Intro before any heading.

# Rivers

Rivers carry silt.

```python
# not a heading, code
```

Deltas
------

Where rivers meet the sea.

- a list item
---

### Fans ###

Alluvial fans spread out.

Mountains
=========

Plates collide.
"""


def test_markdown_headings_give_sections_and_the_text_stays_as_written(tmp_path):
    document = text_document(MARKDOWN, "notes.md", "md", "notes", {"source": "notes.md"})
    assert document.text == MARKDOWN
    assert document.title == "Rivers"
    assert located(document, "Intro before") is None  # no heading above it: no section
    assert located(document, "Rivers carry silt") == {"section": ["Rivers"]}
    assert located(document, "not a heading, code") == {"section": ["Rivers"]}
    assert located(document, "Where rivers meet") == {"section": ["Rivers", "Deltas"]}
    assert located(document, "a list item") == {"section": ["Rivers", "Deltas"]}  # its "---" is a rule
    assert located(document, "Alluvial fans") == {"section": ["Rivers", "Deltas", "Fans"]}
    assert located(document, "Plates collide") == {"section": ["Mountains"]}


def test_markdown_front_matter_holds_no_heading():
    text = "---\ntitle: Draft\ntags: [a]\n---\n\nBody first.\n\n# Findings\n\nSilt.\n"
    document = text_document(text, "f.md", "md", "f", {})
    assert document.title == "Findings"
    assert located(document, "tags") is None and located(document, "Silt") == {"section": ["Findings"]}


def test_markdown_without_headings_has_no_locations(tmp_path):
    document = text_document("just words\n\n#hashtag\n", "n.md", "md", "n", {})
    assert document.title == "n" and "locations" not in document.metadata


def test_markdown_file_loads_with_sections(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(MARKDOWN, encoding="utf-8")
    (document,) = load_path(path)
    assert located(document, "Plates collide") == {"section": ["Mountains"]}


def test_html_headings_give_sections():
    page = (
        "<html><head><title>Atlas</title></head><body><p>Preface.</p><h1>Rivers</h1><p>Silt moves.</p>"
        "<h2>Deltas</h2><ul><li>one</li><li>two</li></ul><table><tr><th>Name</th><th>Length</th></tr>"
        "<tr><td>Nile</td><td>6650</td></tr></table><h1>Mountains</h1><p>They rise.</p></body></html>"
    )
    document = text_document(page, "atlas.html", "html", "atlas", {})
    assert document.title == "Atlas"
    assert "one\ntwo" in document.text and "Name | Length\nNile | 6650" in document.text
    assert located(document, "Preface") is None
    assert located(document, "Nile | 6650") == {"section": ["Rivers", "Deltas"]}
    assert located(document, "They rise") == {"section": ["Mountains"]}
    assert parse_html(page)[1] == document.text


def test_html_parts_levels_and_source_white_space():
    title, parts = html_parts("<h2>  Big\n   <b>News</b></h2>\n<p>First\n   line</p><pre>a\nb</pre>")
    assert title == ""
    assert [(part.level, part.heading) for part in parts] == [(2, "Big News")]
    assert parts[0].text == "Big News\n\nFirst line\n\na\nb"  # white space collapsed as shown, <pre> lines kept


def test_html_without_headings_has_no_locations():
    document = text_document("<p>plain page</p>", "p.html", "html", "p", {})
    assert document.text == "plain page" and "locations" not in document.metadata


def test_xhtml_with_an_xml_declaration_reads_without_warning():
    page = (
        "<?xml version='1.0' encoding='utf-8'?>\n<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\">"
        "<head><title>Chapter</title></head><body><h1>One</h1><p>Text.</p></body></html>"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        title, text = parse_html(page)
    assert (title, text) == ("Chapter", "One\n\nText.")
    assert not [warning for warning in caught if issubclass(warning.category, XMLParsedAsHTMLWarning)]
