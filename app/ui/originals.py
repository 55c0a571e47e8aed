"""A hit's original file, for the browser: which file, whether it may be served, its bytes, a PDF opener. No Streamlit.

Only the file a stored document names as its ``source`` (an absolute path,
as the loaders record it) is ever served, never a path from the browser,
and only while it is a regular file (not a link, folder or device): a file
gone since it was indexed is a reason shown instead. The UI and the browser
may run on different machines, so the bytes go to the browser: a PDF up to
``MAX_OPEN_BYTES`` opens in the browser's own PDF viewer at its page
(``pdf_opener_html``: a Blob URL made from the bytes, ``#page=N``), anything
else, or a larger PDF, is a download of up to ``MAX_DOWNLOAD_BYTES``.
"""

from __future__ import annotations

import base64
import html
import json
import mimetypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_OPEN_BYTES = 20 * 1024 * 1024  # a PDF up to this size opens in the browser; a larger one is downloaded
MAX_DOWNLOAD_BYTES = 200 * 1024 * 1024  # a larger original is not served at all
ARCHIVE_MEMBER = "::"  # the loaders' "<archive>::<member>" sources


@dataclass(frozen=True)
class Original:
    """A document's source file, checked to be a regular file when found.

    Attributes:
        path: The absolute path the document names.
        size: Its size in bytes when it was checked.
        pdf: Whether it opens in a PDF viewer (the document's ``format`` is pdf, or the name ends ``.pdf``).
    """

    path: Path
    size: int
    pdf: bool

    @property
    def name(self) -> str:
        """The file's name, for a download."""
        return self.path.name

    @property
    def mime(self) -> str:
        """Its media type, from its name (``application/octet-stream`` when unknown)."""
        if self.pdf:
            return "application/pdf"
        return mimetypes.guess_type(self.name)[0] or "application/octet-stream"

    @property
    def opens(self) -> bool:
        """Whether the browser opens it in place (a PDF within ``MAX_OPEN_BYTES``) rather than downloading it."""
        return self.pdf and self.size <= MAX_OPEN_BYTES


def names_a_file(metadata: Any) -> bool:
    """Whether ``metadata``'s ``source`` is a file path the UI would try to serve (an absolute path)."""
    source = metadata.get("source") if isinstance(metadata, dict) else None
    return isinstance(source, str) and "\0" not in source and os.path.isabs(source)


def find_original(metadata: dict[str, Any] | None) -> tuple[Original | None, str]:
    """The source file a document's metadata names, or why it cannot be served.

    Args:
        metadata: A stored document's (or hit's) metadata; its ``source`` and ``format`` are read.

    Returns:
        ``(original, "")`` for a regular file within ``MAX_DOWNLOAD_BYTES``;
        ``(None, reason)`` for a file path that cannot be served (gone, a
        link, not a regular file, too large, inside an archive);
        ``(None, "")`` when the source names no file at all (no ``source``,
        or one that is not an absolute path).
    """
    if not names_a_file(metadata):
        return None, ""
    source = metadata["source"]
    if ARCHIVE_MEMBER in source:
        return None, "the original is inside an archive"
    try:
        found = os.lstat(source)
    except OSError:
        return None, "the original file is no longer there"
    if stat.S_ISLNK(found.st_mode):
        return None, "the original is now a link, not the file that was indexed"
    if not stat.S_ISREG(found.st_mode):
        return None, "the original is not a regular file"
    if found.st_size > MAX_DOWNLOAD_BYTES:
        return None, f"the original is over {MAX_DOWNLOAD_BYTES // (1024 * 1024)} MB, too large to serve"
    path = Path(source)
    pdf = (metadata or {}).get("format") == "pdf" or path.suffix.lower() == ".pdf"
    return Original(path, found.st_size, pdf), ""


def read_original(original: Original) -> bytes:
    """The bytes of ``original``, read only while it is still a regular file within ``MAX_DOWNLOAD_BYTES``.

    Raises:
        OSError: it is gone, became a link or something other than a regular file, or grew too large.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(original.path, flags)
    with os.fdopen(descriptor, "rb") as file:
        found = os.fstat(file.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise OSError(f"{original.path} is not a regular file")
        data = file.read(MAX_DOWNLOAD_BYTES + 1)
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise OSError(f"{original.path} is over {MAX_DOWNLOAD_BYTES} bytes")
    return data


def open_label(original: Original, page: int | None) -> str:
    """What the control that opens ``original`` says, e.g. ``"Open report.pdf at page 12"``."""
    return f"Open {original.name}" + (f" at page {page}" if page else "")


def pdf_opener_html(data: bytes, label: str, page: int | None) -> str:
    """A small page (for ``st.iframe``) whose link opens PDF ``data`` in the browser's viewer.

    The bytes become a Blob URL in the browser, with ``#page=N`` when
    ``page`` is given; the link opens it in a new tab. ``label`` is escaped;
    the data travels as base64, which needs no escaping.
    """
    payload = base64.b64encode(data).decode("ascii")
    fragment = json.dumps(f"#page={int(page)}" if page else "")
    return f"""<!doctype html><meta charset="utf-8">
<style>
body {{margin:0; font-family:"Source Sans Pro",system-ui,sans-serif}}
a {{display:inline-block; font-size:.9rem; padding:.3rem .75rem; border-radius:.5rem; color:rgb(79,70,229);
    border:1px solid rgba(79,70,229,.35); text-decoration:none; cursor:pointer}}
a:hover {{background:rgba(79,70,229,.08)}} a[aria-disabled] {{opacity:.5; cursor:progress}}
</style>
<a id="open" class="ss-open" target="_blank" aria-disabled="true">{html.escape(label)} ↗</a>
<script>
fetch("data:application/pdf;base64,{payload}").then(answer => answer.blob()).then(blob => {{
  const link = document.getElementById("open");
  link.href = URL.createObjectURL(new Blob([blob], {{type: "application/pdf"}})) + {fragment};
  link.removeAttribute("aria-disabled");
}});
</script>"""
