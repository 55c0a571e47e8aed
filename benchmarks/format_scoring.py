"""What ``benchmarks.formats`` measures on the files it made: ids back to the dataset's, and page/slide locations.

A document read from a made file has the file's absolute path as its id, or
``<path>#<n>`` for message ``n`` (from 1) of a mailbox; ``IdMap`` turns it
back into the dataset's id. ``true_part`` finds which part of a made file
(page or slide ``n``) holds the start of a hit's chunk (a hit's location
is the part its chunk starts in), by where the chunk's first words lie in
the parts' words, so the hit's ``location`` can be checked against
it; it does not need the text to be read exactly (OCR).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.format_files import MadeFile

_WORD = re.compile(r"[a-z0-9]+")
START_WORDS = 30  # how much of a chunk's start is matched against the parts


class IdMap:
    """A document id of the made folder to the key of the text it holds.

    Args:
        folder: The folder the files were made in.
        made: The files made there.
    """

    def __init__(self, folder: Path, made: Iterable[MadeFile]) -> None:
        root = os.path.realpath(folder)
        self.files = {os.path.join(root, item.path): item for item in made}

    def file(self, doc_id: str) -> MadeFile | None:
        """The made file a document id comes from (a mailbox for its messages); None for an unknown id."""
        if doc_id in self.files:
            return self.files[doc_id]
        base, hash_sign, _number = doc_id.rpartition("#")
        return self.files.get(base) if hash_sign else None

    def key(self, doc_id: str) -> str | None:
        """The dataset id of a document: the file's only key, or a mailbox's ``n``-th; None where unknown."""
        item = self.file(doc_id)
        if item is None:
            return None
        if doc_id in self.files:
            return item.keys[0] if len(item.keys) == 1 else None
        number = doc_id.rpartition("#")[2]
        if not number.isdigit() or not 1 <= int(number) <= len(item.keys):
            return None
        return item.keys[int(number) - 1]


def words(text: str) -> list[str]:
    """``text``'s words, lower-cased, letters and digits only."""
    return _WORD.findall(text.lower())


def true_part(chunk_text: str, parts: tuple[str, ...]) -> int | None:
    """The number (from 1) of the part holding the start of ``chunk_text``; None when no part tells.

    The chunk's first ``START_WORDS`` words are placed in the words of all
    parts in a row: by the first of its word trigrams found at exactly one
    place (so words OCR misread are passed over), else by the first single
    word found at exactly one place; the chunk starts as many words before.
    """
    start = words(chunk_text)[:START_WORDS]
    placed = [(word, number) for number, part in enumerate(parts, start=1) for word in words(part)]
    sequence = [word for word, _number in placed]
    for size in (3, 1):
        places: dict[tuple[str, ...], list[int]] = {}
        for at in range(len(sequence) - size + 1):
            places.setdefault(tuple(sequence[at : at + size]), []).append(at)
        for offset in range(len(start) - size + 1):
            found = places.get(tuple(start[offset : offset + size]), [])
            if len(found) == 1:
                return placed[max(found[0] - offset, 0)][1]
    return None


@dataclass
class LocationTally:
    """Hits of paged files whose ``location`` names the page or slide holding their chunk's start, per format."""

    right: dict[str, int] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)
    unlabelled: int = 0  # hits with no location at all

    def add(self, item: MadeFile, location: dict | None, chunk_text: str) -> None:
        """Count one hit of ``item`` (a file with a part label and more than one part)."""
        expected = true_part(chunk_text, item.parts)
        self.seen[item.format] = self.seen.get(item.format, 0) + 1
        if not location:
            self.unlabelled += 1
        if expected is not None and location and location.get(item.label) == expected:
            self.right[item.format] = self.right.get(item.format, 0) + 1

    def share(self, fmt: str | None = None) -> float | None:
        """The share of right hits, for ``fmt`` or over all formats; None where no hit was seen."""
        seen = self.seen.get(fmt, 0) if fmt else sum(self.seen.values())
        right = self.right.get(fmt, 0) if fmt else sum(self.right.values())
        return right / seen if seen else None
