"""What a run did not read, grouped: a count per file type and reason, with an example path each.

A walk over thousands of files may pass over most of them; listing each one
buries what matters, leaving them out hides it. ``group_errors`` counts them
by type (the file's suffix, ``(no suffix)``, or ``hidden``) and reason; a
reason given once is its own line::

    1,890 .gz: compressed, nothing inside to read (application/x-executable) (e.g. /usr/share/doc/x/y.gz)
    12 (no suffix): binary (application/octet-stream) (e.g. /usr/share/doc/z/BINARY)
    /usr/share/doc/w/index.html: empty document
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from indexer.loaders.common import MEMBER_SEPARATOR, LoadError

NO_SUFFIX = "(no suffix)"
HIDDEN_TYPE = "hidden"


@dataclass(frozen=True)
class ErrorGroup:
    """Files (or members, or records) of one type left out for one reason.

    Attributes:
        type: The suffix, lower case (``".gz"``), ``"(no suffix)"`` or ``"hidden"``.
        reason: Why they were left out.
        count: How many.
        example: The source of the first one.
    """

    type: str
    reason: str
    count: int
    example: str

    def line(self) -> str:
        """``"1,890 .gz: <reason> (e.g. <path>)"``; a group of one is its own line, ``"<path>: <reason>"``."""
        if self.count == 1:
            return f"{self.example}: {self.reason}"
        return f"{self.count:,} {self.type}: {self.reason} (e.g. {self.example})"

    def to_dict(self) -> dict:
        return {"type": self.type, "reason": self.reason, "count": self.count, "example": self.example}


def group_errors(errors: Iterable[LoadError]) -> list[ErrorGroup]:
    """``errors`` grouped by ``(file_type(source), reason)``, the largest groups first, then by type and reason."""
    counts: dict[tuple[str, str], list] = {}
    for error in errors:
        key = (file_type(error.source), error.reason)
        if key in counts:
            counts[key][0] += 1
        else:
            counts[key] = [1, error.source]
    groups = [ErrorGroup(kind, reason, count, example) for (kind, reason), (count, example) in counts.items()]
    return sorted(groups, key=lambda group: (-group.count, group.type, group.reason))


def file_type(source: str) -> str:
    """The type a source is counted under: the suffix of the file (or archive member) it names, lower case.

    A record's ``:<line>`` is left off; a name starting with "." is ``"hidden"``;
    a name without a suffix is ``"(no suffix)"``.
    """
    name = source.rsplit(MEMBER_SEPARATOR, 1)[-1]
    head, _, tail = name.rpartition(":")
    if head and tail.isdigit():
        name = head
    name = PurePosixPath(name.replace("\\", "/")).name
    if name.startswith("."):
        return HIDDEN_TYPE
    suffix = PurePosixPath(name).suffix.lower()
    return suffix if suffix and len(suffix) <= 12 else NO_SUFFIX
