"""``semsearch check``: every byte of the committed generation against its checksums, and ``--repair``.

Damage is reported with the file and the documents its segment holds, never
served as a result of a merge. ``repair`` publishes a new generation without
the damaged segments and their documents (the ids come back for
re-indexing); it removes nothing it does not report, and nothing at all
while a file cannot be read (an operating system's refusal is no damage:
the documents may be whole behind it). A catalog whose documents' list
values have no filter rows yet (written before lists were indexed) is
reported too, as the catalog's ``semsearch_fields``, naming
``semsearch upgrade``, which indexes them; a repair drops nothing for it.
Judgments naming documents the collection no longer holds are a note
(``CollectionCheckReport.notes``), not damage: they are kept on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retriever.judgments.store import dangling_count
from retriever.storage.catalog import Catalog, CatalogState, Publish, fields
from retriever.storage.fields_upgrade import stale_documents
from retriever.storage.integrity import CheckReport, Damage, check_segments, segment_keys
from retriever.storage.segment import SEGMENTS_DIR
from retriever.storage.segment_format import KEYS, META, deletion_file

CATALOG = "catalog"  # what a damage of the catalog, not of a segment, names as its segment


@dataclass
class CollectionCheckReport(CheckReport):
    """A ``CheckReport`` with ``notes``: what is worth knowing but is no damage (``ok`` does not read them)."""

    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "notes": list(self.notes)}


def check_collection(root: Path, catalog: Catalog, writer: Any, repair: bool = False) -> CollectionCheckReport:
    """Verify the last committed generation of the collection at ``root``; with ``repair``, drop what is damaged.

    ``writer`` is the collection's ``Writer``: a repair holds its lock from the check to the publish.
    A repair publishes nothing while ``report.unreadable`` lists any file (``repaired`` stays False).
    """
    if not repair:
        return _check(root, catalog, catalog.state())
    with writer.locked():
        state = catalog.state()
        report = _check(root, catalog, state)
        if (
            report.documents and not report.unreadable
        ):  # what can be dropped: damaged segments' documents, documents without rows
            damaged = set(report.documents)
            ids = sorted({doc_id for ids in report.documents.values() for doc_id in ids})
            kept = [ref for ref in state.segments if ref.name not in damaged]
            writer.publish(state, Publish(kept, state.next_key, state.next_segment, remove=ids), new_files=[])
            report.repaired = True
    return report


def _check(root: Path, catalog: Catalog, state: CatalogState) -> CollectionCheckReport:
    report = CollectionCheckReport(generation=state.generation)
    _check_catalog_file(catalog, report)
    check_segments(Path(root) / SEGMENTS_DIR, state.segments, report)
    damaged = sorted({d.segment for d in report.damaged} - {CATALOG})
    if not damaged and not report.damaged and not report.unreadable:
        _check_coverage(Path(root) / SEGMENTS_DIR, catalog, state, report)
    if damaged:
        bad_keys = {d.segment for d in report.damaged if d.file in (KEYS, META)}
        report.documents = _documents_of(Path(root) / SEGMENTS_DIR, catalog, state, damaged, bad_keys)
    if not report.unreadable and CATALOG not in {d.segment for d in report.damaged}:
        _check_list_fields(catalog, report)
        _note_dangling_judgments(catalog, report)
    return report


def _note_dangling_judgments(catalog: Catalog, report: CollectionCheckReport) -> None:
    """A note of the judgments whose documents are gone: kept (a re-added document finds them), no damage."""
    dangling = dangling_count(catalog)
    if dangling:
        report.notes.append(
            f"{dangling} judgment(s) name documents the collection no longer holds: kept, and counted by "
            "evaluation as relevant documents not found; `semsearch judge remove --id ID` removes them"
        )


def _check_list_fields(catalog: Catalog, report: CheckReport) -> None:
    """Documents written before list values were indexed: filters miss their lists until ``upgrade``.

    Reported as damage of the catalog's ``semsearch_fields`` without documents: a repair drops nothing for it.
    """
    stale = stale_documents(catalog)
    if stale:
        report.damaged.append(
            Damage(
                CATALOG,
                fields.name,
                (
                    f"{stale} document(s) written before list values were indexed: filters do not match their lists "
                    "yet; run `semsearch upgrade` to index them"
                ),
            )
        )


def _documents_of(
    folder: Path, catalog: Catalog, state: CatalogState, damaged: list[str], bad_keys: set[str]
) -> dict[str, list[str]]:
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


def _check_catalog_file(catalog: Catalog, report: CheckReport) -> None:
    """SQLite's own ``quick_check`` of a SQLite catalog (a server's catalog is the server's to check)."""
    if catalog.engine.dialect.name != "sqlite":
        return
    try:
        with catalog.engine.connect() as conn:
            found = [row[0] for row in conn.exec_driver_sql("PRAGMA quick_check").fetchall()]
    except Exception as exc:  # noqa: BLE001 - a catalog too damaged to check is itself the finding
        found = [f"cannot be checked: {exc}"]
    if found != ["ok"]:
        name = Path(catalog.engine.url.database or "catalog").name
        report.damaged.append(Damage(CATALOG, name, "; ".join(found[:5])))


def _check_coverage(folder: Path, catalog: Catalog, state: CatalogState, report: CheckReport) -> None:
    """Every catalog document in exactly the segments' live rows, and no live row without its document."""
    live = []
    for ref in state.segments:
        keys = segment_keys(folder / ref.name)
        if keys is None:
            return  # a damaged segment was reported already
        if ref.deletions:
            keys = np.delete(keys, np.load(folder / ref.name / deletion_file(ref.deletions), allow_pickle=False))
        live.append(np.asarray(keys, dtype=np.int64))
    in_segments = np.concatenate(live) if live else np.zeros(0, np.int64)
    in_catalog = catalog.all_keys()
    missing = np.setdiff1d(in_catalog, in_segments)
    if len(missing):
        report.damaged.append(Damage(CATALOG, "documents", f"{len(missing)} document(s) have no row in any segment"))
        report.documents[CATALOG] = sorted(row.id for row in catalog.by_keys(missing.tolist()).values())
    orphans = len(np.setdiff1d(in_segments, in_catalog))
    if orphans:
        report.damaged.append(Damage(CATALOG, "documents", f"{orphans} live segment row(s) have no catalog document"))
