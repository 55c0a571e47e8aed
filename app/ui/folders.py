"""Which collections the UI's ``-c`` folder holds, and each one's identity. No Streamlit.

A collection is a directory with a ``manifest.json``; the ``-c`` folder is one,
or holds them as sub-folders.
"""

from __future__ import annotations

import json
from pathlib import Path

MANIFEST = "manifest.json"


def find_collections(root: str | Path) -> list[Path]:
    """The collections under ``root``: ``[root]`` when it holds one, else its
    sub-folders holding a ``manifest.json`` (hidden ones skipped), sorted by name
    ignoring case; ``[]`` when ``root`` is no directory."""
    root = Path(root).expanduser()
    if (root / MANIFEST).is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(
        (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).is_file()),
        key=lambda p: p.name.lower(),
    )


def manifest_uuid(path: str | Path) -> str:
    """The collection's uuid, so a cache keyed on it notices a re-created collection; ``""`` when unreadable."""
    try:
        return json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8")).get("uuid", "")
    except (OSError, ValueError):
        return ""
