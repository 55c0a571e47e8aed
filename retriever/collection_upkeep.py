"""``Collection``'s upkeep verbs: switch the model, choose the search settings, snapshot and restore, check, compact.

``UpkeepVerbs`` is mixed into ``retriever.collection.Collection``; each verb
delegates to ``retriever.storage`` (``model_switch``, ``snapshots``,
``checking``, the ``Writer``'s compaction) under the collection's lock where it writes.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, TypeVar

from retriever import validation
from retriever.encoding.embedder import Embedder
from retriever.search_settings import checked_settings, settings_in
from retriever.storage.checking import check_collection
from retriever.storage.cleanup import size_on_disk
from retriever.storage.faults import file_system_faults
from retriever.storage.integrity import CheckReport
from retriever.storage.model_switch import SwitchReport, switch_model
from retriever.storage.snapshots import SnapshotReport, restore_snapshot, take_snapshot

Opened = TypeVar("Opened", bound="UpkeepVerbs")  # the collection class ``restore`` is called on


class UpkeepVerbs:
    """``switch_model``, ``snapshot``, ``restore``, ``check`` and ``compact`` of a ``Collection``."""

    def switch_model(self, model: str | os.PathLike | Embedder, *, progress: bool = True) -> SwitchReport:
        """Re-embed every document with ``model`` and make it the collection's model, in one generation.

        Searches and writes use the old model until the new generation is
        published; a process killed before that leaves the old one in force.
        Chunks, keys and the BM25 side stay as they are, so ``model`` must
        tokenize as the collection's model does (an adapted copy of it does).

        Returns:
            The report: the model, the generation it is in force from, segments and chunks re-embedded.

        Raises:
            ModelMismatchError: ``model`` tokenizes otherwise, or its window is shorter than the chunks.
            BadInputError: A document holds caller's vectors over more text than ``model``'s window.
            CollectionLockedError: Another writer held the lock too long.
        """
        embedder = model if validation.is_embedder(model) else Embedder(model)
        with file_system_faults(self.root, "the model switch"):
            return switch_model(self, embedder, progress=progress)

    def snapshot(self, dest: str | os.PathLike) -> SnapshotReport:
        """Copy the last committed generation into the new directory ``dest``, while writers go on.

        Segment files are hard-linked where the file system allows (they never
        change), copied otherwise; the catalog is copied in one transaction
        (SQLite's online backup, or PostgreSQL's tables into a SQLite file).
        The snapshot is a collection: it opens and searches as one, and
        ``Collection.restore`` makes it live again elsewhere.

        Returns:
            What was written: generation, documents, segments, files linked
            and copied, bytes, tries, seconds.

        Raises:
            BadInputError: ``dest`` exists, lies inside this collection, or its parent is missing.
        """
        return take_snapshot(self.root, self.manifest, self.catalog, Path(dest), self.writer.locked)

    @classmethod
    def restore(cls: type[Opened], snapshot: str | os.PathLike, dest: str | os.PathLike) -> Opened:
        """A snapshot made live at the new directory ``dest`` (the snapshot stays as it is), opened.

        Raises:
            CollectionNotFoundError: ``snapshot`` holds no collection.
            BadInputError: ``dest`` exists, or ``snapshot`` was not written by ``snapshot``.
        """
        restore_snapshot(Path(snapshot), Path(dest))
        return cls.open(dest)

    def check(self, repair: bool = False) -> CheckReport:
        """Verify every byte of the last committed generation against the checksums recorded when written.

        Args:
            repair: Publish a new generation without the damaged segments and
                their documents (their ids are in the report, for re-indexing).

        Returns:
            Segments and files verified, each damaged file with the reason,
            the ids of the documents of each damaged segment, segments too old
            to carry checksums, and whether a repair was published.
        """
        return check_collection(self.root, self.catalog, self.writer, repair)

    def search_settings(self) -> dict[str, Any]:
        """The hybrid settings a search uses where its caller sets none: ``{"fusion", "alpha", "feedback"}``
        (``retriever.search_settings``; the manifest read again when its file changed)."""
        return settings_in(self.models.reload().search)

    def choose_search_settings(self, **settings: Any) -> dict[str, Any]:
        """Make ``settings`` (any of ``fusion``, ``alpha``, ``feedback``) the collection's own, under its lock;
        the others keep their current value. Every process searching the collection takes them up.

        Returns:
            The settings now in force.

        Raises:
            BadInputError: An unknown setting or a value out of range (``checked_settings``).
            CollectionLockedError: Another writer held the lock too long.
        """
        with self.writer.locked():
            manifest = self.models.reload()  # as another process may have rewritten it
            chosen = checked_settings({**settings_in(manifest.search), **settings})
            manifest.search = chosen
            manifest.save(self.root)
            self.models.reload()
        return dict(chosen)

    def compact(self, *, index_codes: str | None = None, max_segment_chunks: int | None = None) -> dict[str, Any]:
        """Merge the segments into as few as fit, without deleted rows, and shrink the catalog.

        Segments are packed into the fewest of at most ``max_segment_chunks``
        live chunks each (one, up to a million chunks). A merged segment's vector
        index is chosen by its size (see ``IndexPolicy``).

        Args:
            index_codes: Change what the collection's IVF indexes hold (``"float32"``,
                ``"compressed"`` or ``"always"``, see ``IndexPolicy.codes``): the manifest
                records it, and the merged segment is built with it, vectors kept (no re-embedding).
            max_segment_chunks: Largest segment written (default ``MergePolicy.max_merge_chunks``,
                1,000,000; a merge's peak memory grows with it: docs/operations/scale.md).

        Returns:
            ``{"segments_before", "segments_after", "bytes_before", "bytes_after"}``.
        """
        validation.check_optional_count(max_segment_chunks, "max_segment_chunks")
        before = size_on_disk(self.root)
        with file_system_faults(self.root, "compaction"), self.writer.locked():
            if index_codes is not None and index_codes != self.index_policy.codes:
                policy = dataclasses.replace(self.index_policy, codes=index_codes)  # checks the value
                manifest = self.models.reload()  # as another process may have rewritten it
                manifest.index["policy"] = policy.to_dict()
                manifest.save(self.root)  # a compaction killed after this is finished by the next one
                self.index_policy = self.writer.index_policy = self.searcher.index_policy = policy
            n_before, n_after = self.writer.compact(max_segment_chunks)
        return {
            "segments_before": n_before,
            "segments_after": n_after,
            "bytes_before": before,
            "bytes_after": size_on_disk(self.root),
        }
