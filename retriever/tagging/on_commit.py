"""Tagging at commit time: the collection's taggers label the documents a commit writes.

``Writer.commit`` calls ``TagOnCommit`` with the rows it is about to
publish. A new or changed document is predicted from its staged segment
(its pooled vectors, or its text for TF-IDF), unless its owner wrote the
field. A change of metadata alone keeps the labels the stored version had,
since its text, and so its prediction, is the same. A tagger trained on
another model's vectors than the collection's tags nothing; ``semsearch tag
--stale`` lists what it missed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from retriever.storage.catalog import DocumentRow, StoredDocument
from retriever.storage.segment import Segment
from retriever.tagging.applying import predict_rows
from retriever.tagging.classifier import EMBEDDING
from retriever.tagging.store import load_taggers

MetadataUpdate = tuple[str, int, dict, str]  # id, key, metadata, content hash


class TagOnCommit:
    """The ``on_commit`` hook of a collection's writer.

    Args:
        root: The collection directory (its ``taggers/`` is read at every commit).
        model_in_force: ``() -> identity`` of the model of the generation a commit builds on.
    """

    def __init__(self, root: Path, model_in_force: Callable[[], dict]) -> None:
        self.root = Path(root)
        self.model_in_force = model_in_force

    def __call__(
        self,
        inserts: Sequence[DocumentRow],
        metadata: Sequence[MetadataUpdate],
        stored: dict[str, StoredDocument],
        placements: Sequence[tuple[Path, np.ndarray, list[int]]],
    ) -> list[MetadataUpdate]:
        """Label ``inserts`` in place; return ``metadata`` with stored labels carried over.

        Args:
            inserts: Rows of new or changed documents.
            metadata: Metadata-only updates.
            stored: The stored rows of the commit's ids, by id.
            placements: ``(staged folder, keys, dropped rows)`` per staged segment.
        """
        taggers = load_taggers(self.root)
        if not taggers:
            return list(metadata)
        carried = [
            (doc_id, key, _carry(meta, stored.get(doc_id), taggers.values()), content_hash)
            for doc_id, key, meta, content_hash in metadata
        ]
        where = _locate(inserts, placements)
        segments: dict[Path, Segment] = {}
        model_sha256 = self.model_in_force()["sha256"]
        for tagger in taggers.values():
            if tagger.method == EMBEDDING and tagger.model["sha256"] != model_sha256:
                continue  # trained on another model's vectors: listed by `tag --stale`
            todo = [row for row in inserts if not tagger.owned_by_user(row.metadata)]
            for folder, group in _by_folder(todo, where).items():
                segment = segments.get(folder) or segments.setdefault(folder, Segment(folder))
                rows = np.asarray([where[row.key][1] for row in group], dtype=np.int64)
                labels, probs = predict_rows(tagger, segment, rows, [row.title for row in group])
                for row, label, probability in zip(group, labels, probs):
                    row.metadata = tagger.fields(row.metadata, label, probability)
        return carried


def _carry(meta: dict, old: StoredDocument | None, taggers: Any) -> dict:
    """``meta`` with each tagger's label and probability from ``old`` where ``meta`` sets neither."""
    if old is None:
        return meta
    out = dict(meta)
    for tagger in taggers:
        if tagger.field in meta or tagger.probability_field in meta or tagger.probability_field not in old.meta:
            continue
        for name in (tagger.field, tagger.probability_field):
            if name in old.meta:
                out[name] = old.meta[name]
    return out


def _locate(inserts: Sequence[DocumentRow], placements: Sequence[tuple[Path, np.ndarray, list[int]]]):
    """``{key: (staged folder, row in it)}`` of each inserted row."""
    wanted = {row.key for row in inserts}
    where = {}
    for folder, keys, _ in placements:
        for r, key in enumerate(np.asarray(keys).tolist()):
            if key in wanted:
                where[key] = (Path(folder), r)
    return where


def _by_folder(rows: Sequence[DocumentRow], where: dict) -> dict[Path, list[DocumentRow]]:
    groups: dict[Path, list[DocumentRow]] = {}
    for row in rows:
        groups.setdefault(where[row.key][0], []).append(row)
    return groups


__all__ = ["TagOnCommit"]
