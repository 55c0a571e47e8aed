"""Tagging a collection's documents: every live document labelled in one generation, or the stale ones listed.

A document gets ``<field>`` (the label, left out below the tagger's
``min_probability``) and ``<field>_probability`` in its metadata. A
document given as an example keeps its example's label with probability 1.
A document whose metadata holds ``<field>`` without a probability carries a
value its owner wrote: tagging never replaces it. The documents' content
hashes stay as their owners wrote them, so indexing the same files again
still does no work and keeps the tags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from retriever.errors import BadInputError
from retriever.storage.atomic import atomic_write_text
from retriever.storage.catalog import StoredDocument
from retriever.storage.segment import Segment
from retriever.tagging.classifier import EMBEDDING, Tagger
from retriever.tagging.evaluation import TagEvaluation
from retriever.tagging.examples import Example, Label
from retriever.tagging.features import live_rows, segment_texts, segment_vectors
from retriever.tagging.store import load_tagger, save_tagger, tagger_path

BATCH = 2048  # documents predicted at a time


@dataclass
class TagReport:
    """What ``Collection.tag`` did (or, with ``dry_run``, would do).

    Attributes:
        field: The metadata field.
        method: ``"embedding"`` or ``"tfidf"``.
        documents: Live documents considered.
        labels: ``{label: documents}`` given each label (examples included).
        unlabelled: Documents below ``min_probability`` (probability written, label left out).
        kept: Documents whose owner wrote the field; left as they are.
        written: Documents whose metadata changed.
        dry_run: Nothing was written.
        generation: The generation that holds the tags (the unchanged one for a dry run).
        evaluation: The cross-validation behind ``method="auto"`` (else ``None``).
        seconds: Wall time, training included.
    """

    field: str
    method: str
    documents: int = 0
    labels: dict[str, int] = field(default_factory=dict)
    unlabelled: int = 0
    kept: int = 0
    written: int = 0
    dry_run: bool = False
    generation: int = 0
    evaluation: TagEvaluation | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["evaluation"] = self.evaluation.to_dict() if self.evaluation is not None else None
        return out


def predict_rows(tagger: Tagger, segment: Segment, rows: np.ndarray, titles: Sequence[str]) -> tuple[list, np.ndarray]:
    """``(labels, probabilities)`` of document ``rows`` of ``segment`` (``titles`` for TF-IDF)."""
    if tagger.method == EMBEDDING:
        return tagger.predict(segment_vectors(segment, rows))
    assert tagger.tfidf is not None
    return tagger.predict(tagger.tfidf.transform(segment_texts(segment, rows, titles)))


def _batches(view: Any) -> Iterator[tuple[Segment, np.ndarray, np.ndarray]]:
    for segment, rows, keys in live_rows(view):
        for at in range(0, len(rows), BATCH):
            yield segment, rows[at : at + BATCH], keys[at : at + BATCH]


def apply_tagger(
    collection: Any, tagger: Tagger, examples: Sequence[Example], *, dry_run: bool = False, progress: bool = False
) -> TagReport:
    """Label every live document of ``collection`` with ``tagger`` and commit the labels in one generation.

    The tagger is stored first (so commits from then on tag their new
    documents); if the commit fails, the tagger that was there before is put back.
    """
    report = TagReport(tagger.field, tagger.method, dry_run=dry_run)
    given: dict[str, Label] = {e.doc_id: e.label for e in examples if e.doc_id is not None}
    if dry_run:
        _label_all(collection, collection.reader.current(), tagger, given, report, progress)
        report.generation = collection.catalog.state().generation
        return report
    with collection.writer.locked():
        state, view = collection.writer.state()
        updates = _label_all(collection, view, tagger, given, report, progress)
        path = tagger_path(collection.root, tagger.field)
        before = path.read_text(encoding="utf-8") if path.is_file() else None
        save_tagger(collection.root, tagger)
        try:
            report.generation = collection.writer.update_metadata(updates) if updates else state.generation
        except BaseException:
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write_text(path, before)
            raise
    report.written = len(updates)
    return report


def _label_all(
    collection: Any, view: Any, tagger: Tagger, given: dict[str, Label], report: TagReport, progress: bool
) -> list[tuple[str, int, dict, str]]:
    """Predict every live document of ``view``; fill ``report``; return the metadata updates."""
    from tqdm.auto import tqdm  # loaded by tagging alone, not by every command that opens a collection

    updates = []
    bar = tqdm(total=view.n_live_docs, desc=f"tagging {tagger.field}", unit="doc", disable=not progress)
    for segment, rows, keys in _batches(view):
        stored = collection.catalog.by_keys([int(k) for k in keys])
        docs: list[StoredDocument | None] = [stored.get(int(k)) for k in keys]
        labels, probs = predict_rows(tagger, segment, rows, [d.title if d else "" for d in docs])
        for doc, label, probability in zip(docs, labels, probs):
            if doc is None:
                continue  # deleted between the view and the catalog read (a dry run holds no lock)
            report.documents += 1
            if tagger.owned_by_user(doc.meta):
                report.kept += 1
                continue
            if doc.id in given:
                label, probability = given[doc.id], 1.0
            meta = tagger.fields(doc.meta, label, probability)
            if tagger.field in meta:
                report.labels[str(label)] = report.labels.get(str(label), 0) + 1
            else:
                report.unlabelled += 1
            if meta != doc.meta:
                updates.append((doc.id, doc.key, meta, doc.content_hash))
        bar.update(len(rows))
    bar.close()
    return updates


def stale_documents(collection: Any, field_name: str) -> list[str]:
    """Ids of documents the tagger of ``field_name`` has not labelled, sorted.

    Every document is stale when the tagger reads vectors of another model
    than the collection's now (retrain it); one whose owner wrote the field
    never is.

    Raises:
        BadInputError: The collection has no tagger for ``field_name``.
    """
    tagger = load_tagger(collection.root, field_name)
    if tagger is None:
        raise BadInputError(
            f"{collection.root} has no tagger for field {field_name!r}; "
            f"train one with: semsearch tag -c DIR --field {field_name} --examples FILE"
        )
    other_model = tagger.method == EMBEDDING and tagger.model["sha256"] != collection.model["sha256"]
    return sorted(
        doc_id
        for doc_id, meta in collection.catalog.iter_metadata()
        if not tagger.owned_by_user(meta) and (other_model or tagger.probability_field not in meta)
    )
