"""The single writer of a collection (Lucene's IndexWriter): commit, delete, merge.

A commit gives staged segments their names and keys, writes new deletion
files for the segments it touches, fsyncs them, and publishes the generation
in one SQL transaction that also changes the document rows. A crash before
that transaction leaves the previous generation in force, and the next writer
removes the unreferenced files (``cleanup``). After a commit, a bounded merge
may fold small segments together (``merging.MergePolicy``).

Every method but ``locked`` expects the lock to be held (``with writer.locked():``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from filelock import FileLock, Timeout

from retriever.deadline import active as under_deadline
from retriever.documents import Document
from retriever.errors import CollectionLockedError, DeadlineExceededError, ModelSwitchedError, SemsearchError
from retriever.storage.atomic import fsync_dir, write_durably
from retriever.storage.builders import IndexBuilder, TermAnalyzer
from retriever.storage.catalog import Catalog, CatalogState, DocumentRow, Publish, SegmentRef, StoredDocument
from retriever.storage.changes import classify
from retriever.storage.cleanup import LOCK_FILE, remove_files, remove_unreferenced
from retriever.storage.generations import read_head, write_head
from retriever.storage.integrity import record_again, refuse_damage
from retriever.storage.manifest import Manifest, drop_pending_switch
from retriever.storage.merging import MergePolicy
from retriever.storage.reader import GenerationReader
from retriever.storage.segment import SEGMENTS_DIR, segment_name, write_deletions
from retriever.storage.segment_format import KEYS, deletion_file
from retriever.storage.segment_merge import merge
from retriever.storage.staging import STAGED_ROWS, EmbedFn, stage, staged_rows
from retriever.storage.view import SegmentView, View, refs
from retriever.telemetry import Timings, timed_method


@dataclass
class _Changes:
    """The catalog changes of one commit, gathered row by row."""

    kinds: dict[str, str] = field(default_factory=dict)  # id -> "added" | "updated" | "unchanged"
    inserts: list[DocumentRow] = field(default_factory=list)
    metadata: list[tuple[str, int, dict, str]] = field(default_factory=list)  # id, key, metadata, content hash
    replaced: list[int] = field(default_factory=list)  # keys of stored rows the inserts replace
    placements: list[tuple[Path, np.ndarray, list[int]]] = field(default_factory=list)  # folder, keys, dropped rows


#: ``on_commit(inserts, metadata updates, stored rows, placements) -> metadata updates``: a commit's last
#: say over the rows it publishes (the collection's taggers label them there); it may change the inserts'
#: metadata in place.
CommitHook = Callable[[list[DocumentRow], list, dict[str, StoredDocument], list], list]


class Writer:
    """Writes the collection at ``root`` under its single-writer lock.

    Attributes:
        on_commit: Optional ``CommitHook``, called by ``commit`` before it publishes.
        timings: Where each ``commit`` and ``merge`` is timed.
    """

    def __init__(
        self,
        root: Path,
        catalog: Catalog,
        reader: GenerationReader,
        analyzer: TermAnalyzer,
        index_policy: IndexBuilder,
        merge_policy: MergePolicy,
        lock_timeout: float,
    ) -> None:
        self.root = Path(root)
        self.catalog = catalog
        self.reader = reader
        self.analyzer = analyzer
        self.index_policy = index_policy
        self.merge_policy = merge_policy
        self._lock = FileLock(str(self.root / LOCK_FILE), timeout=lock_timeout)
        self._lock_timeout = lock_timeout
        self.on_commit: CommitHook | None = None
        self.timings = Timings()

    @property
    def is_locked(self) -> bool:
        """Whether this process holds the write lock now."""
        return self._lock.is_locked

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the collection's single-writer lock (released if the process dies).

        On taking it, the files an interrupted writer left behind are removed.

        Raises:
            CollectionLockedError: Another process held it for ``lock_timeout`` seconds.
        """
        try:
            self._lock.acquire()
        except Timeout:
            raise CollectionLockedError(
                f"{self.root} is being written by another process (waited {self._lock_timeout:.0f}s)"
            ) from None
        try:
            state = self.catalog.state()
            remove_unreferenced(self.root, state)
            drop_pending_switch(self.root, state.generation)  # a model switch killed before its publish
            if read_head(self.root) != state.generation:  # a writer died between publish and HEAD
                write_head(self.root, state.generation)
            yield
        finally:
            self._lock.release()

    def state(self) -> tuple[CatalogState, View]:
        """The committed state and its view."""
        state = self.catalog.state()
        return state, self.reader.at(state)

    @timed_method("commit")
    def commit(self, staged: list[Path], others: list[Document], embed: EmbedFn) -> tuple[dict[str, str], int]:
        """Publish staged segments and the catalog changes of ``others`` in one generation.

        Every document is classified again against the catalog as it is now:
        a staged row whose content is stored already is dropped (marked
        deleted in its new segment), one whose text is stored gets only a
        metadata update, and a document of ``others`` whose text changed
        since it was classified is embedded (``embed``) and staged now,
        appended to ``staged``.

        Returns:
            ``({id: "added" | "updated" | "unchanged"}, chunks written)``.
        """
        rows_of = [staged_rows(folder) for folder in staged]
        state, view = self.state()  # the lock is held: it stays the committed state until this publishes
        self._check_model(staged, rows_of, state.generation)
        stored = self.catalog.lookup([row["id"] for rows in rows_of for row in rows] + [doc.id for doc in others])
        late = [doc for doc, kind in classify(others, stored) if kind == "text"]
        if late:  # changed by another writer between the first look and the lock
            staged.append(stage(self.root, late, embed(late), self.analyzer, self.index_policy))
            rows_of.append(staged_rows(staged[-1]))
        changes = self._changes(staged, rows_of, others, stored, state.next_key)
        if not changes.inserts and not changes.metadata:
            return changes.kinds, 0
        if self.on_commit is not None:
            changes.metadata = self.on_commit(changes.inserts, changes.metadata, stored, changes.placements)
        touched: list[Path] = []
        try:
            parts, touched = self._with_deletions(view, changes.replaced, state.generation + 1)
            segments, next_segment = refs(parts), state.next_segment
            for folder, keys, dropped in changes.placements:
                if len(dropped) < len(keys):
                    segments.append(
                        self._place(folder, keys, dropped, segment_name(next_segment), state.generation + 1)
                    )
                    touched.append(self.root / SEGMENTS_DIR / segments[-1].name)
                    next_segment += 1
            fsync_dir(self.root / SEGMENTS_DIR)
        except BaseException:
            remove_files(touched)
            raise
        next_key = state.next_key + sum(len(keys) for _, keys, _ in changes.placements)
        removed = [row.id for row in changes.inserts if row.id in stored]
        change = Publish(
            segments, next_key, next_segment, remove=removed, insert=changes.inserts, metadata=changes.metadata
        )
        self.publish(state, change, new_files=touched)
        self.merge_after_commit()
        return changes.kinds, sum(row.n_chunks for row in changes.inserts)

    def _check_model(self, staged: Sequence[Path], rows_of: Sequence[list[dict[str, Any]]], generation: int) -> None:
        """Raise ``ModelSwitchedError`` when a staged folder holds vectors of another model than the one
        in force at ``generation``, the committed one."""
        models_of = [{row.get("model") for row in rows} - {None} for rows in rows_of]  # None: caller's vectors
        if not any(models_of):
            return
        in_force = Manifest.load(self.root).model_at(generation)
        for folder, models in zip(staged, models_of):
            for model in models - {in_force["sha256"]}:
                raise ModelSwitchedError(
                    f"staged segment {folder.name} was embedded by model {model[:12]}, but the collection switched "
                    f"to {in_force['name']!r} ({in_force['sha256'][:12]}) meanwhile: nothing was written; write "
                    "these documents again"
                )

    @staticmethod
    def _changes(
        staged: Sequence[Path],
        rows_of: Sequence[list[dict[str, Any]]],
        others: Sequence[Document],
        stored: dict[str, StoredDocument],
        next_key: int,
    ) -> _Changes:
        """What the commit changes: staged rows kept or dropped, keys given, metadata updated."""
        last = {row["id"]: (i, r) for i, rows in enumerate(rows_of) for r, row in enumerate(rows)}
        changes = _Changes()
        for i, (folder, rows) in enumerate(zip(staged, rows_of)):
            keys = np.arange(next_key, next_key + len(rows), dtype=np.int64)
            next_key += len(rows)
            dropped = []
            for r, row in enumerate(rows):
                old = stored.get(row["id"])
                if last[row["id"]] != (i, r) or (old is not None and old.content_hash == row["content_hash"]):
                    dropped.append(r)  # a later copy wins, or the content is stored already
                    changes.kinds.setdefault(row["id"], "unchanged")
                elif old is not None and old.text_hash == row["text_hash"]:
                    dropped.append(r)
                    changes.metadata.append((row["id"], old.key, row["metadata"], row["content_hash"]))
                    changes.kinds[row["id"]] = "updated"
                else:
                    changes.inserts.append(
                        DocumentRow(
                            row["id"],
                            int(keys[r]),
                            row["title"],
                            row["metadata"],
                            row["content_hash"],
                            row["text_hash"],
                            row["chunks"],
                        )
                    )
                    if old is not None:
                        changes.replaced.append(old.key)
                    changes.kinds[row["id"]] = "updated" if old is not None else "added"
            changes.placements.append((folder, keys, dropped))
        for doc, kind in classify(others, stored):
            if kind == "metadata":
                changes.metadata.append((doc.id, stored[doc.id].key, doc.metadata, doc.content_hash()))
                changes.kinds[doc.id] = "updated"
            elif kind == "unchanged":
                changes.kinds[doc.id] = "unchanged"
        return changes

    def _place(self, folder: Path, keys: np.ndarray, dropped: list[int], name: str, generation: int) -> SegmentRef:
        """Turn a staged folder into segment ``name`` with real ``keys``; ``dropped`` rows start deleted."""
        target = self.root / SEGMENTS_DIR / name
        write_durably(folder / KEYS, lambda path: np.save(path, keys, allow_pickle=False))
        record_again(folder, KEYS)
        (folder / STAGED_ROWS).unlink()
        os.rename(folder, target)
        if not dropped:
            return SegmentRef(name, 0)
        write_deletions(target, generation, np.asarray(dropped))
        return SegmentRef(name, generation)

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Remove the stored documents among ``ids``; returns their ids, sorted."""
        stored = self.catalog.lookup(list(ids))
        if not stored:
            return []
        state, view = self.state()
        parts, touched = self._with_deletions(view, [row.key for row in stored.values()], state.generation + 1)
        change = Publish(refs(parts), state.next_key, state.next_segment, remove=sorted(stored))
        self.publish(state, change, new_files=touched)
        return sorted(stored)

    def update_metadata(self, updates: Sequence[tuple[str, int, dict, str]]) -> int:
        """Publish new metadata for stored rows, ``(id, key, metadata, content hash)`` each, as one generation.

        No segment changes; the rows keep their keys. Returns the new generation.
        """
        state, view = self.state()
        change = Publish(refs(view.parts), state.next_key, state.next_segment, metadata=list(updates))
        self.publish(state, change, new_files=[])
        return state.generation + 1

    def _with_deletions(self, view: View, keys: Sequence[int], generation: int) -> tuple[list[SegmentView], list[Path]]:
        """The view's parts with ``keys`` deleted: new deletion files written for ``generation``.

        Returns:
            ``(parts, files written)``; parts whose every row is gone are left out.
        """
        parts, written = [], []
        rows_per_part = view.locate(np.sort(np.asarray(keys, dtype=np.int64)))
        try:
            for part, rows in zip(view.parts, rows_per_part):
                if len(rows) == 0:
                    parts.append(part)
                    continue
                deleted = np.union1d(part.deleted, rows)
                if len(deleted) == part.segment.n_docs:
                    continue  # nothing live is left: the segment leaves the generation
                written.append(part.segment.folder / deletion_file(generation))
                write_deletions(part.segment.folder, generation, deleted)
                parts.append(SegmentView.open(SegmentRef(part.ref.name, generation), part.segment))
        except BaseException:
            remove_files(written)
            raise
        return parts, written

    def publish(self, state: CatalogState, change: Publish, new_files: Sequence[Path]) -> None:
        """Commit ``change`` as generation + 1, then point ``HEAD`` at it and drop unreferenced files.

        When the catalog's publish raises (a connection lost during COMMIT,
        Ctrl-C after the driver returned), the committed generation is read
        again: a commit that landed keeps ``new_files`` and finishes (an
        interrupt is raised again after), one that did not removes them.

        Raises:
            SemsearchError: The publish failed and the catalog cannot be read
                to tell whether it landed; ``new_files`` are kept for the next
                writer, which judges them against the committed generation.
        """
        try:
            self.catalog.publish(state.generation, change)
        except BaseException as exc:
            if not self._landed(state, change, exc):
                remove_files(new_files)
                raise
            self._advance(state.generation + 1)
            if not isinstance(exc, Exception):
                raise  # the commit stands; the interrupt goes on
            return
        self._advance(state.generation + 1)

    def _landed(self, state: CatalogState, change: Publish, error: BaseException) -> bool:
        """Whether the failed publish of ``change`` over ``state`` is the committed generation now."""
        try:
            now = self.catalog.state()
        except Exception:
            raise SemsearchError(
                f"the outcome of committing generation {state.generation + 1} to {self.catalog.safe_url()} "
                f"is unknown ({type(error).__name__}: {error}); its files are kept, and the next write "
                "keeps or removes them by the committed generation"
            ) from error
        return now.generation == state.generation + 1 and now.segments == tuple(change.segments)

    def _advance(self, generation: int) -> None:
        """After ``generation`` is committed: ``HEAD``, this process's view, unreferenced files."""
        write_head(self.root, generation)
        new_state = self.catalog.state()
        self.reader.advance(new_state)
        remove_unreferenced(self.root, new_state)

    def merge_after_commit(self) -> None:
        """Run at most one merge that the merge policy asks for; none under a deadline.

        A write under a deadline (an HTTP request) has committed by now: a
        merge inside the deadline could only hold the lock longer and turn the
        committed write's answer into a 503, so it is left to the next write
        without one, ``compact``, or the service's own background merge.
        """
        if under_deadline():
            return
        state, view = self.state()
        names = self.merge_policy.plan(view.parts, exact_below=self.index_policy.ann_min_rows)
        if names:
            try:
                self.merge(state, view, names)
            except DeadlineExceededError:
                pass  # the commit stands; the next writer (or compact) merges

    @timed_method("merge")
    def merge(self, state: CatalogState, view: View, names: Sequence[str]) -> None:
        """Replace the segments ``names`` by one holding their live rows; no catalog row changes."""
        chosen = [p for p in view.parts if p.ref.name in names]
        refuse_damage(self.root / SEGMENTS_DIR, [p.ref for p in chosen], "merge")  # never carry damage forward
        rest = [p.ref for p in view.parts if p.ref.name not in names]
        live = [p for p in chosen if p.n_live_docs]
        written: list[Path] = []
        if live:
            data = merge([p.segment for p in live], [p.deleted for p in live])
            name = segment_name(state.next_segment)
            folder = self.root / SEGMENTS_DIR / name
            try:
                data.write(folder, self.index_policy)
            except BaseException:
                remove_files([folder])
                raise
            rest.append(SegmentRef(name, 0))
            rest.sort(key=lambda ref: ref.name)
            written = [folder]
        change = Publish(rest, state.next_key, state.next_segment + (1 if live else 0))
        self.publish(state, change, new_files=written)

    def compact(self, max_segment_chunks: int | None = None) -> tuple[int, int]:
        """Merge the segments into the fewest of at most ``max_segment_chunks`` live chunks each
        (default ``MergePolicy.max_merge_chunks``), without deleted rows, and shrink the catalog;
        ``(segments before, segments after)``. Each merge is its own generation: a killed
        compaction keeps the merges done, and the next one goes on."""
        policy = self.merge_policy
        if max_segment_chunks is not None:
            policy = replace(policy, max_merge_chunks=max_segment_chunks)
        _, view = self.state()
        before = len(view.parts)
        for names in policy.compaction(view.parts, self._to_rewrite):
            state, view = self.state()
            self.merge(state, view, names)
        self.catalog.vacuum()
        return before, len(self.reader.current().parts)

    def _to_rewrite(self, part: SegmentView) -> bool:
        """Whether ``compact`` rewrites a segment it keeps alone: deleted rows, or an index built under another policy."""
        stale_index = part.segment.index_type != self.index_policy.index_type_for(part.segment.n_chunks)
        return stale_index or part.n_live_docs < part.segment.n_docs
