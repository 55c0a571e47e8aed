"""Facts as a person reads them in the UI: sizes, ages, model names, a hit's source, metadata chips. No Streamlit.

Every piece of user or document text that reaches HTML here goes through
``html.escape``.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any, Sequence

from app.ui.filters import HIDDEN_FIELDS


def format_bytes(n: int) -> str:
    """``1536`` -> ``"1.5 KB"``."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"  # pragma: no cover


def format_age(iso: str, now: dt.datetime | None = None) -> str:
    """An ISO timestamp as ``"5 minutes ago"`` (the timestamp itself when unparsable)."""
    try:
        then = dt.datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return str(iso)
    if then.tzinfo is None:
        then = then.replace(tzinfo=dt.timezone.utc)
    seconds = ((now or dt.datetime.now(dt.timezone.utc)) - then).total_seconds()
    if seconds < 0:
        return then.strftime("%Y-%m-%d %H:%M UTC")
    for limit, unit, div in (
        (60, "second", 1),
        (3600, "minute", 60),
        (86400, "hour", 3600),
        (86400 * 30, "day", 86400),
    ):
        if seconds < limit:
            value = int(seconds // div)
            return "just now" if unit == "second" and value < 10 else f"{value} {unit}{'s' if value != 1 else ''} ago"
    return then.strftime("%Y-%m-%d")


def model_label(name: str) -> str:
    """A model's short name: the last path component of a local directory."""
    name = str(name)
    if "/" in name and Path(name).is_absolute():
        parts = [p for p in Path(name).parts if p not in ("model", "/")]
        return parts[-1] if parts else name
    return name


def source_of(hit: Any) -> str:
    """Where a hit comes from: its file path, else its id."""
    meta = getattr(hit, "metadata", None) or {}
    source = meta.get("source")
    return str(source) if source else str(hit.id)


def metadata_chips(metadata: dict[str, Any], skip: Sequence[str] = ("source", *HIDDEN_FIELDS), limit: int = 6) -> str:
    """Small escaped ``key: value`` labels for a result card."""
    chips = []
    for key, value in metadata.items():
        if key in skip or isinstance(value, (dict, list)):
            continue
        shown = str(value)
        if len(shown) > 40:
            shown = shown[:39] + "…"
        chips.append(f'<span class="ss-chip">{html.escape(str(key))}: {html.escape(shown)}</span>')
        if len(chips) == limit:
            break
    return "".join(chips)
