"""The UI's markup: icons, the style sheet, and escaping for HTML and markdown.

Streamlit's HTML sanitiser drops raw ``<svg>``, so icons are ``<img>`` data
URIs. Every piece of user or document text the pages put into HTML goes
through ``esc``; into a label or markdown, through ``md_escape``.
"""

from __future__ import annotations

import base64
import html
from typing import Any


def svg_img(svg: str, size: int, style: str) -> str:
    """An inline SVG as an ``<img>`` data URI.

    Args:
        svg: the ``<svg>`` document.
        size: width and height in pixels.
        style: the ``style`` attribute of the ``<img>``.

    Returns:
        The ``<img>`` tag.
    """
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" width="{size}" height="{size}" alt="" style="{style}">'


LOGO = svg_img(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#4f46e5" stroke-width="2.6" '
    'stroke-linecap="round"><circle cx="10.5" cy="10.5" r="6.5"/><path d="M15.5 15.5 21 21"/></svg>',
    24,
    "vertical-align:-4px;margin-right:.45rem",
)
FILE_ICON = svg_img(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#8a8a99" stroke-width="2" '
    'stroke-linejoin="round"><path d="M14 3H6a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V9z"/><path d="M14 3v6h6"/></svg>',
    12,
    "vertical-align:-1px;margin-right:.3rem",
)
BRAND = f'<div class="ss-brand">{LOGO}semsearch</div>'  # the logo and name heading a page or the sidebar
CSS = """<style>
.ss-brand {font-size:1.65rem; font-weight:700; letter-spacing:-.01em; margin:0 0 .1rem 0}
.ss-sub {color:rgba(128,128,140,1); font-size:.9rem; margin-bottom:.6rem}
.ss-meta {color:rgba(128,128,140,1); font-size:.85rem; margin:.2rem 0 .6rem 0}
.ss-card-head {display:flex; align-items:baseline; gap:.6rem}
.ss-rank {font-size:.8rem; font-weight:600; color:rgba(128,128,140,1); min-width:1.6rem}
.ss-title {font-size:1.08rem; font-weight:600; flex:1; line-height:1.35; word-break:break-word}
.ss-score {font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:.78rem; padding:.1rem .5rem;
           border-radius:.6rem; background:rgba(79,70,229,.13); color:rgb(99,91,255); white-space:nowrap}
.ss-source {font-size:.8rem; color:rgba(128,128,140,1); margin:.15rem 0 .5rem 2.2rem; word-break:break-all}
.ss-place {font-weight:600; word-break:normal}
.ss-passage {font-size:.93rem; line-height:1.6; margin-left:2.2rem}
.ss-passage mark, .ss-doc mark {background:rgba(250,204,21,.42); color:inherit; padding:.05rem .12rem; border-radius:.2rem}
.ss-passage .ss-term {font-weight:700}
.ss-passage mark.ss-semantic {background:transparent; text-decoration:underline 2px rgba(234,179,8,.8);
                              text-underline-offset:.22rem}
.ss-chips {margin:.5rem 0 0 2.2rem}
.ss-chip {display:inline-block; font-size:.72rem; padding:.08rem .5rem; margin:0 .3rem .2rem 0; border-radius:.7rem;
          background:rgba(128,128,140,.14)}
.ss-doc {white-space:pre-wrap; font-size:.95rem; line-height:1.65; max-height:72vh; overflow-y:auto;
         padding:1rem 1.25rem; border:1px solid rgba(128,128,140,.3); border-radius:.5rem}
.ss-stats {display:grid; grid-template-columns:auto 1fr; gap:.2rem .8rem; font-size:.82rem; margin:.2rem 0 .4rem 0}
.ss-stats dt {color:rgba(128,128,140,1)} .ss-stats dd {margin:0; word-break:break-all}
.ss-kv {border-collapse:collapse; width:100%; font-size:.9rem}
.ss-kv th {text-align:left; font-weight:500; color:rgba(128,128,140,1); padding:.35rem 1.2rem .35rem 0; white-space:nowrap;
           vertical-align:top; width:1%}
.ss-kv td {padding:.35rem 0; word-break:break-all} .ss-kv tr {border-bottom:1px solid rgba(128,128,140,.18)}
.ss-meta a {color:inherit; text-decoration:underline dotted}
</style>"""


def md_escape(text: Any) -> str:
    """Text for a Streamlit label or markdown, with markdown syntax made literal.

    Args:
        text: anything; ``str()`` of it is escaped.

    Returns:
        The text with each markdown-special character backslash-escaped.
    """
    out = []
    for ch in str(text):
        out.append("\\" + ch if ch in "\\`*_{}[]()<>#+-.!|$~:" else ch)
    return "".join(out)


def esc(text: Any) -> str:
    """``str(text)`` escaped for HTML (quotes included)."""
    return html.escape(str(text))


def plural(count: int, noun: str) -> str:
    """``plural(1, "file")`` -> ``"1 file"``, ``plural(3, "file")`` -> ``"3 files"``."""
    return f"{count} {noun}{'s' if count != 1 else ''}"


def table_html(rows: list[tuple[Any, Any]]) -> str:
    """A two-column key/value table (``ss-kv``) of ``(label, value)`` rows, both escaped."""
    return (
        '<table class="ss-kv">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows) + "</table>"
    )


def stats_html(rows: list[tuple[Any, Any, Any]]) -> str:
    """A compact list (``ss-stats``) of ``(label, value, tooltip)`` rows, all escaped."""
    return (
        '<dl class="ss-stats">'
        + "".join(f'<dt>{esc(k)}</dt><dd title="{esc(tip)}">{esc(v)}</dd>' for k, v, tip in rows)
        + "</dl>"
    )
