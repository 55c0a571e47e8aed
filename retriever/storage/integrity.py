"""Checksums of a collection's files: recorded when written, verified by merges and ``semsearch check``.

CRC-32 over each file's bytes, as Lucene's file footers hold. A segment's
checksums are recorded in its ``segment.json`` (written last, so a segment
that has one has them all); a deletion file's in ``deleted.<g>.crc32``
beside it, written before the generation that refers to it is published.
Opening a segment checks its structure only (cheap); reading every byte is
for merges, which refuse to carry damage forward, and for ``check``.

A segment written before checksums existed is "unverified": its structure is
checked, its bytes cannot be.

Damage is what the bytes say: a checksum that does not match, a file that is
missing, truncated or malformed. A file the operating system refuses to
open (permissions, an I/O error) is "unreadable": reported, never damage, so
a repair never drops documents it could not read.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from retriever.errors import CorruptCollectionError, SemsearchError
from retriever.storage.atomic import write_durably
from retriever.storage.segment_format import CHECKSUM_SUFFIX, KEYS, META, deletion_file

_BLOCK = 1 << 20


def crc32_of(path: Path) -> str:
    """The CRC-32 of ``path``'s bytes, as 8 hex digits."""
    crc = 0
    with open(path, "rb") as stream:
        while block := stream.read(_BLOCK):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def record_checksums(folder: Path) -> dict[str, str]:
    """``{file name: crc32}`` of every file in a segment folder being written (``segment.json`` aside)."""
    return {p.name: crc32_of(p) for p in sorted(Path(folder).iterdir()) if p.is_file() and p.name != META}


def record_again(folder: Path, name: str) -> None:
    """Record the CRC-32 of ``name``, rewritten in a segment not yet published, in its ``segment.json``."""
    meta_path = Path(folder) / META
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if "checksums" in meta:
        meta["checksums"][name] = crc32_of(Path(folder) / name)
        write_durably(meta_path, lambda p: p.write_text(json.dumps(meta), encoding="utf-8"))


def write_checksum_beside(path: Path) -> None:
    """Record ``path``'s CRC-32 in ``<path>.crc32``, fsynced (for deletion files)."""
    crc = crc32_of(path)
    write_durably(Path(str(path) + CHECKSUM_SUFFIX), lambda p: p.write_text(crc + "\n", encoding="ascii"))


@dataclass(frozen=True)
class Damage:
    """One damaged file: its segment, its name and what is wrong with it."""

    segment: str
    file: str
    reason: str


@dataclass
class CheckReport:
    """What ``check`` found.

    Attributes:
        generation: The generation checked.
        segments: Segments checked.
        files: Files whose bytes were verified.
        bytes: Their size.
        damaged: Each damaged file.
        unreadable: Each file the operating system refused to read (its ``reason`` names the error): not
            damage, and a repair drops nothing while any is left.
        unverified: Segments without recorded checksums (written by an older semsearch).
        documents: Per damaged segment, the ids of the documents it holds.
        repaired: Whether a new generation without the damaged segments was published.
    """

    generation: int = 0
    segments: int = 0
    files: int = 0
    bytes: int = 0
    damaged: list[Damage] = field(default_factory=list)
    unreadable: list[Damage] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    documents: dict[str, list[str]] = field(default_factory=dict)
    repaired: bool = False

    @property
    def ok(self) -> bool:
        """Whether every file was read and none is damaged."""
        return not self.damaged and not self.unreadable

    def to_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "ok": self.ok,
            "segments": self.segments,
            "files": self.files,
            "bytes": self.bytes,
            "damaged": [d.__dict__ for d in self.damaged],
            "unreadable": [d.__dict__ for d in self.unreadable],
            "unverified": self.unverified,
            "documents": self.documents,
            "repaired": self.repaired,
        }


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def verify_segment(folder: Path, deletions: int, report: CheckReport) -> list[Damage]:
    """Every byte of one segment as of a generation (its files and deletion file ``deletions``, 0: none).

    Returns:
        The damaged files; files the operating system refused to read go to ``report.unreadable``.
    """
    folder = Path(folder)
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
        recorded = meta.get("checksums")
    except FileNotFoundError:
        return [Damage(folder.name, META, "missing")]
    except OSError as exc:
        report.unreadable.append(Damage(folder.name, META, f"cannot be opened: {_os_reason(exc)}"))
        return []
    except (ValueError, AttributeError) as exc:
        return [Damage(folder.name, META, f"malformed: {exc}")]
    found = []
    if recorded is None:
        report.unverified.append(folder.name)
        recorded = {}
    if deletions:
        name = deletion_file(deletions)
        try:
            recorded = {**recorded, name: (folder / (name + CHECKSUM_SUFFIX)).read_text(encoding="ascii").strip()}
        except FileNotFoundError:
            if folder.name not in report.unverified:
                report.unverified.append(folder.name)
        except OSError as exc:
            report.unreadable.append(
                Damage(folder.name, name + CHECKSUM_SUFFIX, f"cannot be opened: {_os_reason(exc)}")
            )
        except ValueError:  # not ASCII: the check below names the mismatch
            recorded = {**recorded, name: "unreadable"}
    for name, expected in sorted(recorded.items()):
        path = folder / name
        try:
            actual = crc32_of(path)
            report.files += 1
            report.bytes += path.stat().st_size
        except FileNotFoundError:
            found.append(Damage(folder.name, name, "missing"))
            continue
        except IsADirectoryError:
            found.append(Damage(folder.name, name, "a folder, not a file"))
            continue
        except OSError as exc:
            report.unreadable.append(Damage(folder.name, name, f"cannot be opened: {_os_reason(exc)}"))
            continue
        if actual != expected:
            found.append(Damage(folder.name, name, f"checksum {actual}, recorded {expected}"))
    return found


def check_segments(segments_dir: Path, refs: Sequence[Any], report: CheckReport) -> None:
    """Verify the segments ``refs`` (``SegmentRef``s) under ``segments_dir`` into ``report``."""
    for ref in refs:
        report.segments += 1
        report.damaged += verify_segment(Path(segments_dir) / ref.name, ref.deletions, report)


def refuse_damage(segments_dir: Path, refs: Sequence[Any], what: str) -> None:
    """Raise naming the files when any of ``refs`` is damaged or cannot be read.

    Raises:
        CorruptCollectionError: A file is damaged.
        SemsearchError: A file could not be read (permissions, I/O): nothing to repair, access to restore.
    """
    report = CheckReport()
    check_segments(segments_dir, refs, report)
    if report.damaged:
        listed = "; ".join(f"{d.segment}/{d.file}: {d.reason}" for d in report.damaged)
        raise CorruptCollectionError(f"{what} stopped: damaged file(s): {listed}; run semsearch check --repair")
    if report.unreadable:
        listed = "; ".join(f"{d.segment}/{d.file}: {d.reason}" for d in report.unreadable)
        raise SemsearchError(f"{what} stopped: file(s) that cannot be read: {listed}")


def segment_keys(folder: Path) -> np.ndarray | None:
    """The document keys a segment holds, or ``None`` when its ``keys.npy`` cannot be read."""
    try:
        keys = np.load(Path(folder) / KEYS, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    return keys if keys.ndim == 1 and keys.dtype.kind in "iu" else None
