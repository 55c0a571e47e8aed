"""A document's text built part by part within a character limit, and the document made from it.

Every reader of a structured format (office, OpenDocument, e-books, RTF,
e-mail) builds its text with ``BoundedText``: the parts and their location
labels (``retriever.locations``) grow together, and a text that passes
``MAX_TEXT_CHARS`` is refused with the place it got to, never cut short.
``SectionedText`` adds the headings: blocks gather under the heading above
them, and each heading starts a part whose ``section`` is the path of
headings down to it. ``located_document`` makes the ``Document``.
"""

from __future__ import annotations

from typing import Any

from indexer.loaders.common import Rejected
from indexer.loaders.sections import SectionPath
from retriever.documents import Document
from retriever.locations import LOCATIONS_KEY, PART_SEPARATOR, LocatedText, describe

MAX_TEXT_CHARS = 20_000_000  # the most characters of text one document may have (as for a PDF)


class BoundedText(LocatedText):
    """``LocatedText`` that refuses to grow past ``limit`` characters.

    Args:
        what: Names the source in the reason, e.g. ``"docx"`` or ``"xlsx"``.
        limit: The most characters the text may reach (default, None: ``MAX_TEXT_CHARS``).
        separator: Put between consecutive parts (default a blank line).
    """

    def __init__(self, what: str, limit: int | None = None, separator: str = PART_SEPARATOR) -> None:
        super().__init__(separator)
        self.what = what
        self.limit = MAX_TEXT_CHARS if limit is None else limit

    def add(self, text: str, **labels: Any) -> None:
        """Append one part with its labels; a blank part is left out.

        Raises:
            Rejected: the text would pass ``limit`` (the reason names the part's location).
        """
        self.ensure_room(len(text.strip()), labels)
        super().add(text, **labels)

    def ensure_room(self, chars: int, labels: dict[str, Any] | None = None) -> None:
        """Check that ``chars`` more characters fit within the limit.

        Raises:
            Rejected: they do not; the reason names ``labels`` as the place reached.
        """
        if len(self) + len(self.separator) + chars > self.limit:
            where = describe({key: value for key, value in (labels or {}).items() if value is not None})
            raise Rejected(
                f"{self.what} text is over the {self.limit:,} character limit" + (f" (at {where})" if where else "")
            )


class SectionedText:
    """Blocks of text under headings: each heading starts a part labelled with its ``section`` path.

    Blocks before the first heading form a part without a section. Blocks
    are joined by a blank line, consecutive blocks of one ``group`` (the
    items of a list, the rows of a table) by a line break.

    Args:
        what: Names the source in a limit's reason (see ``BoundedText``).
        limit: The most characters of text (default, None: ``MAX_TEXT_CHARS``).
    """

    def __init__(self, what: str, limit: int | None = None) -> None:
        self.built = BoundedText(what, limit)
        self.path = SectionPath()
        self._pending: list[str] = []
        self._pending_chars = 0
        self._last_group: str | None = None

    def heading(self, level: int, text: str) -> None:
        """Start a part under the heading ``text`` at ``level`` (1 outermost); a blank heading is a plain block."""
        heading = " ".join(text.split())
        if not heading:
            return
        self.flush()
        self.path.enter(level, heading)
        self.block(heading)

    def block(self, text: str, group: str | None = None) -> None:
        """Add a paragraph; ``group`` (e.g. ``"list"``, ``"table"``) keeps it on the line after one of its group.

        Raises:
            Rejected: the text passes the character limit.
        """
        text = text.strip()
        if not text:
            return
        separator = "\n" if group is not None and group == self._last_group else PART_SEPARATOR
        self.built.ensure_room(self._pending_chars + len(separator) + len(text), {"section": self.path.current})
        if self._pending:
            self._pending.append(separator)
            self._pending_chars += len(separator)
        self._pending.append(text)
        self._pending_chars += len(text)
        self._last_group = group

    def flush(self) -> None:
        """Close the part being gathered (called by ``heading`` and before the text is read)."""
        if self._pending:
            self.built.add("".join(self._pending), section=self.path.current)
        self._pending, self._pending_chars, self._last_group = [], 0, None

    def finished(self) -> BoundedText:
        """The text and its parts, the last part closed."""
        self.flush()
        return self.built


def located_document(built: LocatedText, doc_id: str, title: str, stem: str, metadata: dict[str, Any]) -> Document:
    """The document of a reader's text: its parts' locations go into ``metadata[LOCATIONS_KEY]``.

    Locations are stored when some part has a label (a document without
    headings has no sections to store); a document with a title but no text
    is kept (its title is what it has to say).

    Args:
        built: The text and its parts.
        doc_id: The document's id.
        title: The document's own title ("" when it has none).
        stem: The title to fall back on.
        metadata: ``source``, ``format`` and the format's own fields.

    Raises:
        Rejected: neither text nor title.
    """
    text = built.text
    title = " ".join(title.split())
    if not text and not title:
        raise Rejected("no text")
    columns = built.locations()
    if any(value is not None for name, column in columns.items() if name != "start" for value in column):
        metadata = metadata | {LOCATIONS_KEY: columns}
    return Document(id=doc_id, text=text, title=title or stem, metadata=metadata)
