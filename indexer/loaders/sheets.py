"""Spreadsheet rows to text (xlsx and ods): a line per non-empty row, named by its sheet and row number.

A row reads ``"Name: Nile | Length: 6650"`` when the sheet has a header row
(a row of two or more text cells and nothing else, among the first
``HEADER_SEARCH_ROWS`` non-empty rows of the sheet), else
``"Nile | 6650"``; the header row itself reads ``"Name | Length"``. Empty
cells are left out. Each row is a part labelled ``sheet`` and ``row`` (the
spreadsheet's own row number).

Bounds, over the whole workbook: ``MAX_SHEET_ROWS`` rows and
``MAX_SHEET_CELLS`` cells read (blank rows and cells inside a row's span
included, since reading them is work too) and the character limit of
``BoundedText``. A workbook that passes one is refused, the reason naming
the limit and where it was reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta

from indexer.loaders.common import Rejected
from indexer.loaders.located import BoundedText
from indexer.loaders.props import one_line

MAX_SHEET_ROWS = 2_000_000
MAX_SHEET_CELLS = 20_000_000
HEADER_SEARCH_ROWS = 3
CELL_SEPARATOR = " | "

Cell = tuple[str, bool]  # (text as shown, whether the cell holds text rather than a number, date or flag)


class SheetText:
    """The text of a workbook, built row by row within the bounds.

    Args:
        what: The format, for the reasons (``"xlsx"``, ``"ods"``).
        max_rows: Rows read at most (default, None: ``MAX_SHEET_ROWS``).
        max_cells: Cells read at most (default, None: ``MAX_SHEET_CELLS``).
        max_chars: Characters of text at most (default, None: ``located.MAX_TEXT_CHARS``).
    """

    def __init__(
        self, what: str, max_rows: int | None = None, max_cells: int | None = None, max_chars: int | None = None
    ) -> None:
        self.what = what
        self.built = BoundedText(what, max_chars, separator="\n")
        self.sheets: list[str] = []
        self.max_rows = MAX_SHEET_ROWS if max_rows is None else max_rows
        self.max_cells = MAX_SHEET_CELLS if max_cells is None else max_cells
        self.rows_read = self.cells_read = 0
        self._row = 0
        self._header: list[str] | None = None
        self._seen = 0

    def start_sheet(self, name: str) -> None:
        """Begin the sheet ``name``: rows are numbered from 1 again."""
        self.sheets.append(name)
        self._row, self._header, self._seen = 0, None, 0

    def skip_rows(self, count: int) -> None:
        """Pass over ``count`` blank rows without reading them (a run of repeated empty rows)."""
        self._row += count

    def add_row(self, cells: Sequence[Cell]) -> None:
        """Add the next row of the current sheet (blank cells as ``("", False)``).

        Raises:
            Rejected: a bound is passed.
        """
        self._row += 1
        self.rows_read += 1
        self.cells_read += len(cells)
        self._check_bounds()
        if not any(text for text, _ in cells):
            return
        self._seen += 1
        if self._header is None and self._seen <= HEADER_SEARCH_ROWS and _is_header(cells):
            self._header = [text for text, _ in cells]
            line = CELL_SEPARATOR.join(text for text in self._header if text)
        else:
            line = CELL_SEPARATOR.join(self._named(cells))
        self.built.add(line, sheet=self.sheets[-1], row=self._row)

    def _named(self, cells: Sequence[Cell]) -> list[str]:
        """The non-blank cells of a row, each with its header name when there is one."""
        names = self._header or []
        out = []
        for column, (text, _) in enumerate(cells):
            if text:
                name = names[column] if column < len(names) else ""
                out.append(f"{name}: {text}" if name else text)
        return out

    def _check_bounds(self) -> None:
        where = f"sheet {self.sheets[-1]!r}, row {self._row}"
        if self.rows_read > self.max_rows:
            raise Rejected(f"{self.what} has over {self.max_rows:,} rows, the row limit (reached at {where})")
        if self.cells_read > self.max_cells:
            raise Rejected(f"{self.what} has over {self.max_cells:,} cells, the cell limit (reached at {where})")


def _is_header(cells: Sequence[Cell]) -> bool:
    """Whether a row looks like column names: two or more text cells, and nothing but text."""
    filled = [is_text for text, is_text in cells if text]
    return len(filled) >= 2 and all(filled)


def cell_text(value: object) -> Cell:
    """A cell value as openpyxl gives it, as ``(text, is_text)``: numbers without a spurious ``.0``,
    dates in ISO 8601 (the time left out at midnight), flags as TRUE/FALSE, text on one line."""
    if value is None:
        return "", False
    if isinstance(value, str):
        return one_line(value), True
    if isinstance(value, bool):
        return ("TRUE" if value else "FALSE"), False
    if isinstance(value, float):
        return (str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.15g}"), False
    if isinstance(value, datetime):
        return (value.date().isoformat() if value.time() == time() else value.isoformat(sep=" ")), False
    if isinstance(value, (date, time)):
        return value.isoformat(), False
    if isinstance(value, timedelta):
        return str(value), False
    return one_line(value), False
