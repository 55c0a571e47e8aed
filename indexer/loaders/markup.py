"""Formats that need a parser: the text and title of an HTML page (PDF files: ``indexer.loaders.pdf``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bs4 import BeautifulSoup, NavigableString

from retriever.locations import PART_SEPARATOR

_HTML_DROPPED_TAGS = ("script", "style", "noscript", "template", "head")

_HTML_BLOCK_TAGS = (
    "address",
    "article",
    "aside",
    "blockquote",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "ul",
)
_HTML_LINE_TAGS = ("li", "tr", "dt", "dd")  # each on a line of its own, without a blank line between them
_HTML_CELL_TAGS = ("td", "th")
_HTML_PREFORMATTED = ("pre", "textarea")
_SPACE_RUN = re.compile(r"[ \t\n\r\f]{2,}|[\t\n\r\f]")
_HTML_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# Marks put around each heading before the text is taken out, then split on; removed from the input first.
_MARK, _MARK_TEXT, _MARK_END = "\x00", "\x01", "\x02"
_HEADING_MARKS = re.compile("\x00([1-6])\x01([^\x00\x02]*)\x02")
_STRAY_MARKS = re.compile("\x00[1-6]\x01|[\x00-\x02]")
_NO_MARKS = {0: None, 1: None, 2: None}
# XHTML (an EPUB's chapters, .xhtml files) is read with the HTML parser on purpose: it forgives what XML would
# not. Its XML declaration, which that parser skips anyway, is taken off first: markup starting with one is what
# makes BeautifulSoup warn (XMLParsedAsHTMLWarning).
_XML_DECLARATION = re.compile(r"\A\ufeff?\s*<\?xml[^>]*>")


@dataclass(frozen=True)
class HtmlPart:
    """A stretch of an HTML page: a heading and what follows it up to the next heading.

    Attributes:
        level: The heading's level (1 for ``<h1>`` ... 6); 0 for the text
            before the first heading.
        heading: The heading's text on one line ("" when ``level`` is 0).
        text: The part's text, the heading's line first, tidied as ``parse_html`` says.
    """

    level: int
    heading: str
    text: str


def parse_html(markup: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML page; the title is "" when it has none.

    The title is the ``<title>`` text, else the first ``<h1>``. The text
    leaves out scripts, styles and the head, collapses the page's white
    space as a browser does (``<pre>`` aside), breaks lines at block elements
    and ``<br>`` (inline elements such as ``<b>`` stay in their sentence),
    puts list items and table rows on lines of their own (a row's cells
    joined by ``" | "``), trims every line and keeps at most one blank line
    in a row; a heading starts a paragraph (see ``html_parts``).
    """
    title, parts = html_parts(markup)
    return title, PART_SEPARATOR.join(part.text for part in parts)


def html_parts(markup: str) -> tuple[str, list[HtmlPart]]:
    """``(title, parts)`` of an HTML (or XHTML) page: its text split at each ``<h1>``-``<h6>``.

    Blank parts are left out; a page without headings is one part of level 0.
    """
    soup = BeautifulSoup(_XML_DECLARATION.sub("", markup.translate(_NO_MARKS), count=1), "lxml")
    title = _html_title(soup)
    for tag in soup(_HTML_DROPPED_TAGS):
        tag.decompose()
    _collapse_spaces(soup)
    for tag in soup("br"):
        tag.replace_with("\n")
    for tag in soup(_HTML_BLOCK_TAGS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    for tag in soup(_HTML_LINE_TAGS):
        tag.insert_before("\n")
    for tag in soup(_HTML_CELL_TAGS):
        if tag.find_previous_sibling(_HTML_CELL_TAGS) is not None:
            tag.insert_before(" | ")
    for tag in soup(_HTML_HEADINGS):
        tag.insert_before(f"{_MARK}{tag.name[1]}{_MARK_TEXT}")
        tag.insert_after(_MARK_END)
    pieces = _HEADING_MARKS.split(soup.get_text())
    parts = [HtmlPart(0, "", _tidy(pieces[0]))]
    for index in range(1, len(pieces) - 2, 3):
        level, heading, after = int(pieces[index]), " ".join(pieces[index + 1].split()), pieces[index + 2]
        parts.append(HtmlPart(level, heading, _tidy(pieces[index + 1] + "\n" + after)))
    return title, [part for part in parts if part.text]


def _collapse_spaces(soup: BeautifulSoup) -> None:
    """Runs of white space in the page's text become one space, as a browser shows them (``<pre>`` kept)."""
    for string in soup.find_all(string=_SPACE_RUN.search):
        if type(string) is NavigableString and string.find_parent(_HTML_PREFORMATTED) is None:
            string.replace_with(_SPACE_RUN.sub(" ", string))


def _tidy(text: str) -> str:
    """Lines trimmed and their spaces collapsed, at most one blank line in a row, stray marks removed."""
    lines = (" ".join(line.split()) for line in _STRAY_MARKS.sub("", text).splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _html_title(soup: BeautifulSoup) -> str:
    """The head's ``<title>`` text, else the first ``<h1>`` text, else "", on one line."""
    candidates = [soup.head.find("title") if soup.head else None, soup.find("h1")]
    for tag in candidates:
        title = " ".join(tag.get_text(" ").split()) if tag else ""
        if title:
            return title
    return ""
