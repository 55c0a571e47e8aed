"""A document's own properties as flat, filterable metadata: ``author``, ``created``, ``modified``.

Timestamps become ISO 8601 strings (``"2024-03-05T10:00:00+00:00"``, or a
bare date ``"2024-03-05"`` where the file gives only a date), so they sort
and compare as text; values a file leaves blank are left out.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Any

# ISO 8601 as files write it: a date, optionally a time with any fraction and a zone.
_ISO_STAMP = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?)(?:[.,](\d+))?\s*(Z|[+-]\d{2}:?\d{2})?)?", re.IGNORECASE
)


def one_line(value: Any) -> str:
    """``value`` as text on one line with single spaces; "" for None."""
    return " ".join(str(value).split()) if value is not None else ""


def iso_timestamp(value: Any, naive_is_utc: bool = False) -> str | None:
    """An ISO 8601 string for a ``datetime``, ``date`` or ISO-like string; None when there is none.

    Aware datetimes are given in UTC. A naive one stays naive (its zone is
    unknown) unless ``naive_is_utc`` says the format stores UTC (OOXML does).
    A string is read as ``YYYY-MM-DD[THH:MM[:SS][.fraction][zone]]``; other
    strings give None.
    """
    if isinstance(value, str):
        value = _parse_stamp(value.strip())
    if isinstance(value, datetime):
        if value.tzinfo is None and naive_is_utc:
            value = value.replace(tzinfo=timezone.utc)
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return None


def _parse_stamp(text: str) -> datetime | date | None:
    """A ``datetime`` (or ``date`` for a bare date) from an ISO 8601 string, or None."""
    match = _ISO_STAMP.fullmatch(text)
    if not match:
        return None
    day, clock, fraction, zone = match.groups()
    try:
        if clock is None:
            return date.fromisoformat(day)
        stamp = f"{day}T{clock}" + (f".{fraction[:6].ljust(6, '0')}" if fraction else "")
        if zone:
            stamp += "+00:00" if zone.upper() == "Z" else zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
        return datetime.fromisoformat(stamp)
    except ValueError:
        return None


def property_fields(author: Any = None, created: Any = None, modified: Any = None, naive_is_utc: bool = False) -> dict:
    """``{"author": ..., "created": ..., "modified": ...}`` without the ones a file leaves blank.

    Args:
        author: The author's name (or names, joined by ``"; "``).
        created: When the document was created (see ``iso_timestamp``).
        modified: When it was last changed.
        naive_is_utc: Whether naive timestamps are in UTC (see ``iso_timestamp``).
    """
    if isinstance(author, (list, tuple)):
        author = "; ".join(name for name in (one_line(item) for item in author) if name)
    fields = {
        "author": one_line(author),
        "created": iso_timestamp(created, naive_is_utc),
        "modified": iso_timestamp(modified, naive_is_utc),
    }
    return {key: value for key, value in fields.items() if value}


def ooxml_core(properties: Any) -> tuple[str, dict]:
    """``(title, fields)`` from an OOXML package's core properties.

    Takes python-docx's and python-pptx's ``CoreProperties`` (``author``) or
    openpyxl's ``DocumentProperties`` (``creator``); OOXML stores UTC.
    """
    author = getattr(properties, "author", None) or getattr(properties, "creator", None)
    fields = property_fields(author, properties.created, properties.modified, naive_is_utc=True)
    return one_line(properties.title), fields
