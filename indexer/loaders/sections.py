"""Section paths: the headings above a point of a document, outermost first."""

from __future__ import annotations


class SectionPath:
    """The chain of open headings while a document is read top to bottom.

    A heading closes every open heading at its level or deeper, then opens
    itself; a level skipped (an ``h3`` right under an ``h1``) leaves no gap
    in the path.

    Example::

        path = SectionPath()
        path.enter(1, "Rivers")   # ["Rivers"]
        path.enter(2, "Deltas")   # ["Rivers", "Deltas"]
        path.enter(1, "Hills")    # ["Hills"]
    """

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []

    def enter(self, level: int, heading: str) -> list[str]:
        """Open ``heading`` at ``level`` (1 outermost) and return the new path."""
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, heading))
        return [text for _, text in self._open]

    @property
    def current(self) -> list[str] | None:
        """The open headings, outermost first; None before the first heading."""
        return [text for _, text in self._open] or None
