"""``ShardedCollection``'s upkeep verbs: search settings, info, compact, snapshot, restore and check, on every shard.

``ShardedUpkeepVerbs`` is mixed into ``sharding.collection.ShardedCollection``.
Each verb runs the shards' own (``Collection.compact``, ``snapshot``, ...),
side by side where they work independently, and joins what they report:
counts summed, a file named with its shard (``shard-001/<segment>``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

from retriever.errors import BadInputError
from retriever.sharding.layout import SHARDS_FILE, ShardsManifest
from retriever.sharding.parallel import in_parallel
from retriever.storage.integrity import CheckReport, Damage
from retriever.storage.snapshots import SnapshotReport, restore_snapshot

_SUMMED_INFO = ("documents", "chunks", "size_bytes")


class ShardedUpkeepVerbs:
    """``search_settings``, ``choose_search_settings``, ``info``, ``compact``, ``snapshot``, ``restore``, ``check``."""

    def search_settings(self) -> dict[str, Any]:
        """The hybrid settings searches use where their caller sets none (every shard's: shard 0's)."""
        return self.shards[0].search_settings()

    def choose_search_settings(self, **settings: Any) -> dict[str, Any]:
        """Make ``settings`` every shard's own (``Collection.choose_search_settings``); the settings now in force."""
        chosen = [shard.choose_search_settings(**settings) for shard in self.shards]
        return chosen[0]

    def info(self) -> dict[str, Any]:
        """``Collection.info``'s figures for the whole collection, and ``shards``: each shard's own.

        Documents, chunks, size and documents per language are summed; the model, chunking, index policy
        and settings are shard 0's (every shard's); ``generation`` is the highest, ``segments`` all of them.
        """
        each = in_parallel(lambda shard: shard.info(), self.shards)
        info = dict(each[0])
        for name in _SUMMED_INFO:
            info[name] = sum(shard_info[name] for shard_info in each)
        languages: dict[str, int] = {}
        for shard_info in each:
            for code, count in shard_info["languages"]["documents"].items():
                languages[code] = languages.get(code, 0) + count
        info["languages"] = {**info["languages"], "documents": dict(sorted(languages.items()))}
        info["judgments"] = {
            name: sum(shard_info["judgments"][name] for shard_info in each) for name in info["judgments"]
        }
        info["size_bytes"] += (self.root / SHARDS_FILE).stat().st_size
        info["path"] = str(self.root.resolve())
        info["index"] = f"{len(self.shards)} shards: " + "; ".join(shard_info["index"] for shard_info in each)
        info["catalog"] = f"a SQLite catalog in each of {len(self.shards)} shards"
        info["generation"] = max(shard_info["generation"] for shard_info in each)
        info["segments"] = [
            {**segment, "name": f"{name}/{segment['name']}"}
            for name, shard_info in zip(self.layout.shards, each)
            for segment in shard_info["segments"]
        ]
        info["updated_at"] = max(shard_info["updated_at"] for shard_info in each)
        info["created_at"] = self.layout.created_at
        info["shards"] = each
        return info

    def compact(self, *, index_codes: str | None = None, max_segment_chunks: int | None = None) -> dict[str, Any]:
        """Compact every shard (``Collection.compact``), side by side.

        Returns:
            ``{"segments_before", "segments_after", "bytes_before", "bytes_after"}`` summed over the shards.
        """
        results = in_parallel(
            lambda shard: shard.compact(index_codes=index_codes, max_segment_chunks=max_segment_chunks), self.shards
        )
        return {name: sum(result[name] for result in results) for name in results[0]}

    def snapshot(self, dest: str | os.PathLike) -> SnapshotReport:
        """Copy every shard's last committed generation into the new directory ``dest`` (``Collection.snapshot``).

        Each shard's copy is consistent by itself; writes that span shards while the snapshot runs may be in
        some shards' copies and not others'. The snapshot is a sharded collection: it opens and searches as one.

        Returns:
            The shards' reports summed (``generation``: the highest).

        Raises:
            BadInputError: ``dest`` exists, lies inside this collection, or its parent is missing.
        """
        dest = Path(dest)
        if dest.exists() or dest.is_symlink():
            raise BadInputError(f"snapshot destination {dest} exists already")
        if not dest.parent.is_dir():
            raise BadInputError(f"snapshot destination's parent {dest.parent} is not a directory")
        if dest.resolve().is_relative_to(self.root.resolve()):
            raise BadInputError(f"snapshot destination {dest} lies inside the collection {self.root}")
        dest.mkdir()
        try:
            reports = [shard.snapshot(dest / name) for shard, name in zip(self.shards, self.layout.shards)]
            dataclasses.replace(self.layout).save(dest)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        return _summed_snapshots(dest, reports)

    @classmethod
    def restore(cls, snapshot: str | os.PathLike, dest: str | os.PathLike):
        """A sharded snapshot made live at the new directory ``dest`` (``Collection.restore`` per shard), opened.

        Raises:
            CollectionNotFoundError: ``snapshot`` holds no sharded collection.
            BadInputError: ``dest`` exists, or a shard of ``snapshot`` was not written by ``snapshot``.
        """
        snapshot, dest = Path(snapshot), Path(dest)
        layout = ShardsManifest.load(snapshot)
        if dest.exists():
            raise BadInputError(f"restore destination {dest} exists already")
        dest.mkdir(parents=False)
        for name in layout.shards:
            restore_snapshot(snapshot / name, dest / name)
        layout.save(dest)
        return cls.open(dest)

    def check(self, repair: bool = False) -> CheckReport:
        """Verify every shard (``Collection.check``); with ``repair``, repair each damaged shard.

        Returns:
            The shards' reports as one: counts summed, segments and files named ``shard-NNN/<segment>``,
            ``generation`` the highest.
        """
        reports = in_parallel(lambda shard: shard.check(repair=repair), self.shards)
        joined = CheckReport(generation=max(report.generation for report in reports))
        for name, report in zip(self.layout.shards, reports):
            joined.segments += report.segments
            joined.files += report.files
            joined.bytes += report.bytes
            joined.damaged += [Damage(f"{name}/{d.segment}", d.file, d.reason) for d in report.damaged]
            joined.unreadable += [Damage(f"{name}/{d.segment}", d.file, d.reason) for d in report.unreadable]
            joined.unverified += [f"{name}/{segment}" for segment in report.unverified]
            joined.documents.update({f"{name}/{segment}": ids for segment, ids in report.documents.items()})
            joined.repaired = joined.repaired or report.repaired
        return joined


def _summed_snapshots(dest: Path, reports: list[SnapshotReport]) -> SnapshotReport:
    """The shards' snapshot ``reports`` as one report of ``dest``."""
    joined = SnapshotReport(dest, generation=max(report.generation for report in reports))
    for report in reports:
        for name in ("documents", "segments", "linked", "copied", "bytes"):
            setattr(joined, name, getattr(joined, name) + getattr(report, name))
        joined.tries = max(joined.tries, report.tries)
        joined.seconds += report.seconds
    return joined
