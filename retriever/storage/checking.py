"""``semsearch check``: every byte of the committed generation against its checksums, and ``--repair``.

Damage is reported with the file and the documents its segment holds, never
served as a result of a merge. ``repair`` publishes a new generation without
the damaged segments and their documents (the ids come back for
re-indexing); it removes nothing it does not report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from retriever.storage.catalog import Catalog, CatalogState, Publish
from retriever.storage.integrity import CheckReport, check_segments, segment_keys
from retriever.storage.segment import SEGMENTS_DIR


def check_collection(root: Path, catalog: Catalog, writer: Any, repair: bool = False) -> CheckReport:
    """Verify the last committed generation of the collection at ``root``; with ``repair``, drop what is damaged.

    ``writer`` is the collection's ``Writer``: a repair holds its lock from the check to the publish.
    """
    if not repair:
        return _check(root, catalog, catalog.state())
    with writer.locked():
        state = catalog.state()
        report = _check(root, catalog, state)
        if report.damaged:
            damaged = set(report.documents)
            ids = sorted({doc_id for ids in report.documents.values() for doc_id in ids})
            kept = [ref for ref in state.segments if ref.name not in damaged]
            writer.publish(state, Publish(kept, state.next_key, state.next_segment, remove=ids), new_files=[])
            report.repaired = True
    return report


def _check(root: Path, catalog: Catalog, state: CatalogState) -> CheckReport:
    report = CheckReport(generation=state.generation)
    check_segments(Path(root) / SEGMENTS_DIR, state.segments, report)
    damaged = sorted({d.segment for d in report.damaged})
    if damaged:
        bad_keys = {d.segment for d in report.damaged if d.file in ("keys.npy", "segment.json")}
        report.documents = _documents_of(Path(root) / SEGMENTS_DIR, catalog, state, damaged, bad_keys)
    return report


def _documents_of(folder: Path, catalog: Catalog, state: CatalogState, damaged: list[str],
                  bad_keys: set[str]) -> dict[str, list[str]]:
    """The ids of the live documents each damaged segment holds and no healthy segment does.

    A segment whose ``keys.npy`` is damaged (``bad_keys``) or unreadable holds,
    as far as can be told, every catalog document that no healthy segment holds.
    """
    healthy = [segment_keys(folder / ref.name) for ref in state.segments if ref.name not in damaged]
    elsewhere = np.concatenate([k for k in healthy if k is not None] or [np.zeros(0, np.int64)])
    found = {}
    for name in damaged:
        keys = None if name in bad_keys else segment_keys(folder / name)
        if keys is None:
            keys = catalog.all_keys()
        keys = np.setdiff1d(np.asarray(keys, dtype=np.int64), elsewhere)
        found[name] = sorted(row.id for row in catalog.by_keys(keys.tolist()).values())
    return found
