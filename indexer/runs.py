"""What both engines of the batch job share: a run's report, the ids it read, pruning.

The local job (``indexer.job``) and the Ray job (``indexer.ray_job``) read the
same inputs in the same order and account for them the same way: the first
copy of an id wins and later ones are skipped as duplicates; ``prune`` then
removes what a run did not read, sparing the files that failed to load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from indexer.loaders import LoadError, shown_path, walk
from indexer.loaders.common import MEMBER_SEPARATOR, real_path
from indexer.loaders.load import unread_file_reason
from indexer.loaders.report import group_errors
from retriever import Collection, WriteReport
from retriever.sharding import ShardedCollection


@dataclass
class IndexReport:
    """What an indexing run did.

    Attributes:
        files: Files (or BEIR corpora) read.
        written: Added, updated, unchanged and deleted ids, and chunks embedded.
        skipped: Files, members, records or documents that failed, each with its reason.
        not_read: Files (and archive members) passed over for what they are,
            each with its reason: hidden names, formats nothing here reads,
            empty files. No fault of theirs: they do not make a run fail.
        seconds: Wall time of the run.
    """

    files: int = 0
    written: WriteReport = field(default_factory=WriteReport)
    skipped: list[LoadError] = field(default_factory=list)
    not_read: list[LoadError] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def indexed(self) -> int:
        return len(self.written.added) + len(self.written.updated)

    def summary(self) -> str:
        """A human summary: counts, speed, then what was skipped and what was not read, grouped by type and reason
        (``indexer.loaders.report``)."""
        w = self.written
        rate = self.indexed / self.seconds if self.seconds > 0 else 0.0
        lines = [
            f"indexed {self.indexed} document(s) from {self.files} file(s): {len(w.added)} new, "
            f"{len(w.updated)} updated, {len(w.unchanged)} unchanged, {len(w.deleted)} removed; "
            f"{w.chunks} chunk(s) embedded in {self.seconds:.1f} s ({rate:.1f} docs/s)"
        ]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped):,}:")
            lines += [f"  {group.line()}" for group in group_errors(self.skipped)]
        if self.not_read:
            lines.append(f"not read {len(self.not_read):,} (passed over for what they are):")
            lines += [f"  {group.line()}" for group in group_errors(self.not_read)]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The ``--json`` report: counts, every skipped item, and both lists grouped by type and reason."""
        w = self.written
        return {
            "files": self.files,
            "added": len(w.added),
            "updated": len(w.updated),
            "unchanged": len(w.unchanged),
            "deleted": len(w.deleted),
            "chunks": w.chunks,
            "seconds": round(self.seconds, 3),
            "skipped": [{"source": e.source, "reason": e.reason} for e in self.skipped],
            "skipped_by_type": [group.to_dict() for group in group_errors(self.skipped)],
            "not_read": [group.to_dict() for group in group_errors(self.not_read)],
        }

    def add_error(self, error: LoadError) -> None:
        """Put ``error`` in ``not_read`` when it says the file was passed over for what it is, else in ``skipped``."""
        (self.not_read if error.unread else self.skipped).append(error)


@dataclass
class Sightings:
    """The ids one run has read, and the files it could not load (which ``prune`` spares).

    Attributes:
        seen: Id -> the source that first produced it in this run.
        failed: Files (``shown_path`` form) that failed to load, wholly or in part.
    """

    seen: dict[str, str] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    failed_folders: set[str] = field(default_factory=set)

    def load_failed(self, error: LoadError) -> None:
        """Note the file behind ``error``, so that ``prune`` keeps what it held."""
        self.failed.add(error_file(error))

    def walk_failed(self, error: LoadError) -> None:
        """Note a directory the walk could not read (or a link it left out): ``prune`` keeps all below it."""
        self.failed.add(error.source)
        self.failed_folders.add(error.source.rstrip("/") + "/")

    def claim(self, doc_id: str, source: str) -> LoadError | None:
        """Claim ``doc_id`` for ``source``.

        Returns:
            ``None`` for the first copy of an id; for a later one, the error it
            is skipped with (the id stays with its first source).
        """
        if doc_id in self.seen:
            return LoadError(source, f"duplicate id {doc_id!r} (already read from {self.seen[doc_id]})")
        self.seen[doc_id] = source
        return None

    def prune(self, collection: Collection | ShardedCollection, roots: Iterable[Path]) -> WriteReport:
        """``prune`` with this run's ids and failed files."""
        return prune(collection, roots, self.seen, self.failed, self.failed_folders)


def prune(
    collection: Collection | ShardedCollection,
    roots: Iterable[Path],
    seen: dict[str, str],
    failed_sources: set[str],
    failed_folders: Iterable[str] = (),
) -> WriteReport:
    """Delete documents from under ``roots`` that a run did not see.

    Args:
        roots: The paths the run was given (files or directories).
        seen: The ids the run read (id -> source).
        failed_sources: Files that failed to load: their documents are kept.
        failed_folders: Directories (ending in "/") the walk could not read:
            the documents below them are kept (default none).

    Returns:
        The deletion (``deleted``), empty when nothing is gone.
    """
    gone: list[str] = []
    spared = tuple(failed_folders)
    for root in roots:
        root = root.resolve()
        prefix = str(root) + ("/" if root.is_dir() else "")
        for doc_id, source in _ids_by_source(collection, prefix).items():
            containers = _containers(source)  # the source, and the archives it is inside
            if root.is_file() and containers[0] != str(root):
                continue
            if doc_id not in seen and failed_sources.isdisjoint(containers) and not source.startswith(spared):
                gone.append(doc_id)
    return collection.delete(gone) if gone else WriteReport()


def _ids_by_source(collection: Collection | ShardedCollection, prefix: str) -> dict[str, str]:
    """``Catalog.ids_by_source`` of ``collection``: over every shard of a sharded one."""
    shards = collection.shards if isinstance(collection, ShardedCollection) else [collection]
    return {doc_id: source for shard in shards for doc_id, source in shard.catalog.ids_by_source(prefix).items()}


def _containers(source: str) -> list[str]:
    """``source`` and each archive it lies in, outermost first: ``a.zip::b.tar::c`` -> ``a.zip``, ``a.zip::b.tar``,
    ``a.zip::b.tar::c`` (an archive that failed spares what it held)."""
    parts = source.split(MEMBER_SEPARATOR)
    return [MEMBER_SEPARATOR.join(parts[: i + 1]) for i in range(len(parts))]


def walk_targets(
    roots: Sequence[Path], include: Sequence[str], exclude: Sequence[str], report: IndexReport, sightings: Sightings
) -> list[tuple[Path, Path]]:
    """``walk``'s ``(root, path)`` pairs to read; what it left out goes to ``report`` and is spared by ``prune``.

    What the walk could not read goes to ``report.skipped``; hidden names, and
    files found in a folder that ``load_path`` would pass over for what they
    are (``unread_file_reason``), go to ``report.not_read``, unread. A root
    named by the caller is always read, so that what it is is reported by
    ``load_path``.
    """
    skipped: list[LoadError] = []
    unread: list[LoadError] = []
    pairs = list(walk(roots, include, exclude, skipped, unread))
    report.skipped.extend(skipped)
    for error in skipped:
        sightings.walk_failed(error)
    targets = []
    for root, path in pairs:
        reason = None if path == root or path.is_dir() else unread_file_reason(path)
        if reason is None:
            targets.append((root, path))
        else:
            unread.append(LoadError(shown_path(real_path(path)), reason, unread=True))
    report.not_read.extend(unread)
    for error in unread:
        sightings.load_failed(error)
    return targets


def error_file(error: LoadError) -> str:
    """The file behind a load error (its source ``path`` or ``path:line``)."""
    head, _, tail = error.source.rpartition(":")
    return head if head and tail.isdigit() else error.source
