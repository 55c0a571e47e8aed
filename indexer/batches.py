"""The batch writer every write path uses: bounded batches, one document at a time on refusal.

Documents wait in a batch until it holds ``max_docs`` of them or the next one
would take it past ``max_chars`` of text; then the batch goes to ``write`` (an
upsert, a staging) in one call. When that call refuses the batch for a bad
document, each document is written alone, so the rest still goes in and the
bad one is reported with its reason (a collection's promise: bad input loses
nothing). Errors that are no document's fault (the collection locked or
corrupt) are not caught: every document would fail the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Iterable, TypeVar

from retriever.documents import Document
from retriever.errors import BadInputError

DEFAULT_BATCH_DOCS = 128
MAX_BATCH_CHARS = 400_000  # about 400 chunks: bounds memory and keeps progress moving
# What one bad document can raise; it is skipped with its reason. BadInputError is a ValueError.
DOCUMENT_ERRORS = (ValueError, TypeError, RecursionError, OverflowError)

Item = TypeVar("Item")
Result = TypeVar("Result")


def refusal_reason(exc: BaseException) -> str:
    """The one-line reason a refused document is reported with.

    Returns:
        The message of a ``BadInputError`` (it names its cause); for any other
        error, its type name and message, ``"TypeError: ..."``.
    """
    return str(exc) if isinstance(exc, BadInputError) else f"{type(exc).__name__}: {exc}"


def text_chars(doc: Document) -> int:
    """Characters of text a document brings to a batch (``len(doc.text)``)."""
    return len(doc.text)


@dataclass
class BatchWriter(Generic[Item, Result]):
    """Items waiting for one write; writes them in bounded batches, alone when refused.

    Attributes:
        write: Writes a batch in one call (``Collection.upsert`` or a staging)
            and returns what it did; raises one of ``DOCUMENT_ERRORS`` when an
            item is bad.
        written: Told each batch (or lone item) that ``write`` took, with its result.
        refused: Told each item ``write`` refused alone, with ``refusal_reason``.
        max_docs: Most items per batch (default 128).
        max_chars: Most characters per batch (default ``MAX_BATCH_CHARS``); an
            item longer than that is a batch of its own.
        chars: The characters an item counts for (default ``len(item.text)``).
        starting: Told each batch before it is written (progress), not the lone retries.
    """

    write: Callable[[list[Item]], Result]
    written: Callable[[list[Item], Result], None]
    refused: Callable[[Item, str], None]
    max_docs: int = DEFAULT_BATCH_DOCS
    max_chars: int = MAX_BATCH_CHARS
    chars: Callable[[Item], int] = text_chars
    starting: Callable[[list[Item]], None] | None = None
    pending: list[Item] = field(default_factory=list, init=False)
    pending_chars: int = field(default=0, init=False)

    def add(self, item: Item) -> None:
        """Queue ``item``; writes the batch first if ``item`` would take it past ``max_chars``,
        and after if it then holds ``max_docs``."""
        size = self.chars(item)
        if self.pending and self.pending_chars + size > self.max_chars:
            self.flush()
        self.pending.append(item)
        self.pending_chars += size
        if len(self.pending) >= self.max_docs:
            self.flush()

    def add_all(self, items: Iterable[Item]) -> None:
        """``add`` each of ``items``, then ``flush``."""
        for item in items:
            self.add(item)
        self.flush()

    def flush(self) -> None:
        """Write the waiting batch in one call; if it is refused, write its items one by one."""
        batch, self.pending, self.pending_chars = self.pending, [], 0
        if not batch:
            return
        if self.starting is not None:
            self.starting(batch)
        try:
            result = self.write(batch)
        except DOCUMENT_ERRORS as exc:
            if len(batch) == 1:  # refused alone already: no need to ask again
                self.refused(batch[0], refusal_reason(exc))
                return
        else:
            self.written(batch, result)
            return
        for item in batch:
            try:
                result = self.write([item])
            except DOCUMENT_ERRORS as exc:
                self.refused(item, refusal_reason(exc))
            else:
                self.written([item], result)
