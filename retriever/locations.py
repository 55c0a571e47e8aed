"""Where in its source a part of a document lies: the page, slide, sheet and row, section or message.

A loader that knows its source's structure records it in the document's
metadata under ``LOCATIONS_KEY`` (``"locations"``): a mapping of columns of
equal length. ``"start"`` holds ascending character offsets into the
document's text where each part begins; every other column labels the parts:

- ``page``: int, from 1 (PDF pages, scanned or not; pages of a multi-page TIFF);
- ``slide``: int, from 1 (presentations);
- ``sheet``: str, and ``row``: int, the spreadsheet's own row number (spreadsheets);
- ``section``: list of str, the headings above the part, outermost first;
- ``message``: int, from 1, the message's place in its mailbox.

A column may hold ``None`` where a part has no such label (a paragraph
before the first heading has no section). Example, a PDF of three pages::

    {"start": [0, 1810, 3702], "page": [1, 2, 3]}

``location_at`` names the part an offset falls in (a hit's location is the
part its chunk starts in); ``LocatedText`` joins a source's parts into the
text and its columns at once, so the offsets cannot drift from the text.

Checked on write, loosely: a ``"locations"`` value that claims to be columns
(a mapping with a ``"start"`` key) must follow the shape above, or the
document is refused with a ``BadInputError`` naming the field
(``check_document_locations``, called by ``coerce_document``); any other value
under the key is the caller's own metadata, kept as given, and gives no
location. On read nothing is trusted blindly: ``location_at`` answers
``None`` for columns it cannot use, so malformed ones never break a search.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from retriever.errors import BadInputError

LOCATIONS_KEY = "locations"
LABELS = ("page", "slide", "sheet", "row", "section", "message")
NUMBERED_LABELS = ("page", "slide", "row", "message")  # ints from 1
PART_SEPARATOR = "\n\n"


class LocatedText:
    """A document's text built part by part, with the location column of each part.

    Args:
        separator: Put between consecutive parts (default a blank line).

    Example::

        built = LocatedText()
        built.add("first page text", page=1)
        built.add("second page text", page=2)
        built.text        # "first page text\\n\\nsecond page text"
        built.locations() # {"start": [0, 17], "page": [1, 2]}
    """

    def __init__(self, separator: str = PART_SEPARATOR) -> None:
        self.separator = separator
        self._pieces: list[str] = []
        self._length = 0
        self._starts: list[int] = []
        self._labels: list[dict[str, Any]] = []

    def add(self, text: str, **labels: Any) -> None:
        """Append one part with its labels (keys from ``LABELS``); a blank part is left out.

        Raises:
            ValueError: a label is not one of ``LABELS``, or its value is not of its kind (an int from 1
                for page, slide, row and message; a string for sheet; a list of strings for section;
                ``None`` for none).
        """
        unknown = set(labels) - set(LABELS)
        if unknown:
            raise ValueError(f"unknown location labels {sorted(unknown)}; known: {', '.join(LABELS)}")
        wrong = [f"{name}={value!r}" for name, value in labels.items() if not label_value_ok(name, value)]
        if wrong:
            raise ValueError(f"location labels of the wrong kind: {', '.join(wrong)}")
        text = text.strip()
        if not text:
            return
        if self._pieces:
            self._pieces.append(self.separator)
            self._length += len(self.separator)
        self._starts.append(self._length)
        self._labels.append(labels)
        self._pieces.append(text)
        self._length += len(text)

    @property
    def text(self) -> str:
        """The parts joined by the separator."""
        return "".join(self._pieces)

    def __len__(self) -> int:
        """Characters of ``text`` so far."""
        return self._length

    @property
    def parts(self) -> int:
        """How many parts were added (blank ones not counted)."""
        return len(self._starts)

    def locations(self) -> dict[str, list[Any]]:
        """The columns: ``"start"`` and one list per label any part used (``None`` where a part has none).

        Empty (``{}``) when no part was added.
        """
        if not self._starts:
            return {}
        used = [name for name in LABELS if any(name in labels for labels in self._labels)]
        columns: dict[str, list[Any]] = {"start": list(self._starts)}
        for name in used:
            columns[name] = [labels.get(name) for labels in self._labels]
        return columns


def location_at(metadata: dict[str, Any] | None, offset: int) -> dict[str, Any] | None:
    """The labels of the part of the document holding character ``offset``.

    Reads only what it needs: the columns' shape and the labels of the one
    part found (the order of ``"start"`` is checked on write, by
    ``check_locations``), so its cost does not grow with the number of parts.

    Args:
        metadata: The document's metadata; its ``"locations"`` columns are read.
        offset: A character offset into the document's text (a chunk's start).

    Returns:
        ``{label: value}`` without ``None`` values, e.g. ``{"page": 12}``; ``None``
        when the document has no locations, they are malformed, or the offset
        lies before the first part.
    """
    columns = metadata.get(LOCATIONS_KEY) if isinstance(metadata, dict) else None
    if not _shaped(columns):
        return None
    try:
        index = bisect_right(columns["start"], offset) - 1
    except TypeError:  # a start that is not a number
        return None
    if index < 0 or not _is_int(columns["start"][index]):
        return None
    found = {name: columns[name][index] for name in LABELS if name in columns and columns[name][index] is not None}
    if not all(label_value_ok(name, value) for name, value in found.items()):
        return None
    if found.get("section") == []:
        del found["section"]
    return {name: list(value) if name == "section" else value for name, value in found.items()} or None


def without_locations(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` less its ``"locations"`` columns (the same object when it has none).

    Only columns are dropped (a mapping with a ``"start"`` key, as
    ``check_document_locations`` lets through); a caller's own value under
    the key, anything else, stays.
    """
    if not claims_locations(metadata.get(LOCATIONS_KEY)):
        return metadata
    return {key: value for key, value in metadata.items() if key != LOCATIONS_KEY}


def describe(location: dict[str, Any] | None) -> str:
    """A location in words, e.g. ``"page 12"``, ``"sheet Q1, row 5"``, ``"Intro › Scope"``; "" for none."""
    if not location:
        return ""
    words = []
    for name in ("message", "page", "slide"):
        if location.get(name) is not None:
            words.append(f"{name} {location[name]}")
    if location.get("sheet") is not None:
        words.append(f"sheet {location['sheet']}")
    if location.get("row") is not None:
        words.append(f"row {location['row']}")
    section = location.get("section")
    if section:
        words.append(" › ".join(map(str, section)) if isinstance(section, list) else str(section))
    return ", ".join(words)


def check_locations(columns: Any, where: str = "metadata.locations") -> None:
    """Raise ``BadInputError`` naming ``where`` unless ``columns`` follow the module's shape."""
    if not _well_formed(columns):
        raise BadInputError(
            f"{where} must be a mapping of equal-length lists: 'start' (ascending offsets from 0) and labels "
            f"among {', '.join(LABELS)} (page, slide, row, message: ints from 1; sheet: a string; section: a "
            "list of strings; null where a part has none)"
        )


def claims_locations(value: Any) -> bool:
    """Whether a ``"locations"`` metadata value claims to be location columns: a mapping with a ``"start"`` key."""
    return isinstance(value, dict) and "start" in value


def check_document_locations(metadata: Any, where: str = "metadata.locations") -> None:
    """Check a document's ``"locations"`` where it claims to be columns (see ``claims_locations``).

    Any other value under the key is the caller's own metadata and passes.

    Raises:
        BadInputError: columns that break the module's shape, naming ``where``.
    """
    if isinstance(metadata, dict) and claims_locations(metadata.get(LOCATIONS_KEY)):
        check_locations(metadata[LOCATIONS_KEY], where)


def label_value_ok(name: str, value: Any) -> bool:
    """Whether ``value`` may label a part as ``name``: ``None``, or of the label's kind (module docstring)."""
    if value is None:
        return True
    if name in NUMBERED_LABELS:
        return _is_int(value) and value >= 1
    if name == "sheet":
        return isinstance(value, str)
    if name == "section":
        return isinstance(value, list) and all(isinstance(heading, str) for heading in value)
    return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shaped(columns: Any) -> bool:
    """Whether ``columns`` is a mapping of a non-empty ``start`` list and known label lists of its length."""
    if not isinstance(columns, dict) or not isinstance(columns.get("start"), list) or not columns["start"]:
        return False
    length = len(columns["start"])
    return all(
        name in LABELS and isinstance(column, list) and len(column) == length
        for name, column in columns.items()
        if name != "start"
    )


def _well_formed(columns: Any) -> bool:
    """``_shaped``, with ascending int starts from 0 and every label value of its kind."""
    if not _shaped(columns):
        return False
    starts = columns["start"]
    if not all(_is_int(start) and start >= 0 for start in starts):
        return False
    if any(later < earlier for earlier, later in zip(starts, starts[1:])):
        return False
    return all(label_value_ok(name, value) for name, column in columns.items() if name != "start" for value in column)
