"""``Collection``'s write verbs: classify, add, upsert, prepare, commit_prepared and delete.

``WriteVerbs`` is mixed into ``retriever.collection.Collection``; it uses the
collection's ``root``, ``catalog``, ``writer``, ``analyzer``, ``index_policy``,
``chunker``, ``embedder`` and ``model``. Documents are checked once
(``retriever.validation``), given their language (``retriever.document_languages``:
metadata ``lang``, which the analyser reads while they are staged), embedded
before the write lock is taken, staged as a segment
(``retriever.storage.staging``) and committed by the ``Writer``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Sequence, Union

import numpy as np

from retriever import validation
from retriever.document_languages import reusing_stored_chunks, with_languages
from retriever.documents import Document
from retriever.encoding.passages import embed_documents, given_vectors
from retriever.errors import BadInputError, ModelSwitchedError
from retriever.storage.changes import Change, WriteReport, classify
from retriever.storage.cleanup import remove_files
from retriever.storage.faults import file_system_faults
from retriever.storage.staging import EmbedFn, check_staged, stage, staged_rows

Vectors = Union[np.ndarray, Sequence[Sequence[float]]]  # (documents, dim) embeddings computed elsewhere


class WriteVerbs:
    """The write verbs of a ``Collection``: each one atomic commit under the single-writer lock."""

    def classify(self, documents: Iterable[Document | dict[str, Any]]) -> list[tuple[Document, Change]]:
        """What writing ``documents`` would do to each, against the catalog as it is now.

        Returns:
            ``(document, change)`` in order, ``change`` one of ``"unchanged"``
            (content stored already), ``"metadata"`` (a catalog update only) or
            ``"text"`` (new or changed: it must be chunked and embedded).

        Raises:
            BadInputError: A document breaks a field rule (a given ``lang`` included), or an id appears twice.
        """
        docs = validation.check_documents(documents)
        stored = self.catalog.lookup([d.id for d in docs])
        return classify(with_languages(docs, stored, self.analyzer), stored)

    def add(self, documents: Iterable[Document | dict[str, Any]], vectors: Vectors | None = None) -> WriteReport:
        """Insert new documents; an id that already exists is an error (use ``upsert``).

        Args:
            documents: Documents or mappings with ``id``, ``text``, ``title``, ``metadata``.
            vectors: Optional ``(len(documents), dim)`` embeddings computed elsewhere:
                each document is then stored as one chunk spanning its text, with
                its row of ``vectors`` (normalised) as the chunk's vector.

        Returns:
            What was written (``added``; ``chunks``).

        Raises:
            BadInputError: A document is bad, an id exists already or appears
                twice, or ``vectors`` do not fit.
            CollectionLockedError: Another process held the write lock too long.
        """
        docs = validation.check_documents(documents)
        existing = self.catalog.lookup([d.id for d in docs])
        if existing:
            raise BadInputError(
                f"{len(existing)} document id(s) already exist ({', '.join(sorted(existing)[:3])}); use upsert"
            )
        return self.upsert(docs, vectors=vectors)

    def upsert(self, documents: Iterable[Document | dict[str, Any]], vectors: Vectors | None = None) -> WriteReport:
        """Insert or replace documents, in one atomic commit.

        Unchanged documents (same content hash) cost nothing; changed ones
        have their old chunks replaced; a change of metadata alone re-embeds
        nothing. Embedding happens before the write lock is taken.

        Args:
            documents: As for ``add``.
            vectors: As for ``add``.

        Returns:
            What was written (``added``, ``updated``, ``unchanged``; ``chunks``).

        Raises:
            BadInputError: A document is bad, an id appears twice, or ``vectors`` do not fit.
            CollectionLockedError: Another process held the write lock too long.
        """
        docs = validation.check_documents(documents)
        stored = self.catalog.lookup([d.id for d in docs]) if docs else {}
        docs = with_languages(docs, stored, self.analyzer)
        embed = self._embed_fn(docs, vectors)
        if not docs:
            return WriteReport()
        plan = classify(docs, stored)
        changed = [doc for doc, kind in plan if kind == "text"]
        others = [doc for doc, kind in plan if kind != "text"]
        if vectors is None:
            embed = self._keeping_stored_chunks(embed, changed, stored)
        try:
            kinds, chunks = self._write(changed, others, embed)
        except ModelSwitchedError:  # the collection switched models while they were embedded: embed them again
            kinds, chunks = self._write(changed, others, embed)
        return WriteReport.of([doc.id for doc in docs], kinds, chunks)

    def _write(self, changed: list[Document], others: list[Document], embed: EmbedFn) -> tuple[dict[str, str], int]:
        """Embed and stage ``changed``, then commit it with ``others`` under the lock (``Writer.commit``)."""
        staged = []
        try:
            with file_system_faults(self.root, "the write"), self.analyzer.writing(changed + others):
                staged = [self._stage(changed, embed(changed))] if changed else []
                with self.writer.locked():
                    return self.writer.commit(staged, others, embed)  # stages others changed meanwhile
        finally:
            remove_files(staged)

    def prepare(
        self,
        documents: Iterable[Document | dict[str, Any]],
        vectors: Vectors | None = None,
        *,
        owner: str | None = None,
    ) -> Path:
        """Chunk, embed and write documents as a staged segment, without committing.

        The part of a write that costs: a scale-out worker runs it anywhere the
        collection's directory is reachable, without the write lock; the driver
        publishes the result with ``commit_prepared``. Nothing is visible before that.

        Args:
            documents: As for ``add``.
            vectors: As for ``add``.
            owner: ``<host>-<pid>`` of the process that will commit the
                folder (default this one); while it lives, the folder is kept.

        Returns:
            The staged segment's folder (inside the collection).

        Raises:
            BadInputError: No documents, a bad one, or ``vectors`` that do not fit.
        """
        docs = validation.check_documents(documents)
        embed = self._embed_fn(docs, vectors)  # vectors are matched to documents by id
        if not docs:
            raise BadInputError("prepare needs at least one document")
        stored = self.catalog.lookup([d.id for d in docs])
        docs = with_languages(docs, stored, self.analyzer)
        if vectors is None:
            embed = self._keeping_stored_chunks(embed, docs, stored)
        return self._stage(docs, embed(docs), owner)

    def commit_prepared(self, folders: Sequence[str | os.PathLike]) -> WriteReport:
        """Publish staged segments (from ``prepare``) in one atomic commit, as ``upsert`` would.

        Documents whose stored content is identical are skipped, a change of
        metadata alone updates the catalog, and a later segment wins over an
        earlier one for the same id. The staged folders are consumed.

        Returns:
            What was written, in the order the ids first appear.

        Raises:
            BadInputError: A folder is not a staged segment of this collection, or is gone.
            CollectionLockedError: Another process held the write lock too long.
        """
        staged = [Path(folder) for folder in folders]
        check_staged(self.root, staged)
        rows = [row for folder in staged for row in staged_rows(folder)]
        try:
            with self.writer.locked():
                kinds, chunks = self.writer.commit(staged, [], self._embed_fn([], None))
        finally:
            remove_files(staged)
        return WriteReport.of(list(dict.fromkeys(row["id"] for row in rows)), kinds, chunks)

    def delete(self, ids: Iterable[str]) -> WriteReport:
        """Remove documents by id, in one atomic commit; unknown ids are ignored.

        Args:
            ids: A list (or any iterable) of id strings; one bare string is refused.

        Returns:
            The report, with ``deleted`` the ids that were stored.

        Raises:
            BadInputError: ``ids`` is a string or holds a non-string.
            CollectionLockedError: Another process held the write lock too long.
        """
        wanted = list(dict.fromkeys(validation.check_ids(ids)))
        with file_system_faults(self.root, "the delete"), self.writer.locked():
            return WriteReport(deleted=self.writer.delete(wanted))

    def _embed_fn(self, docs: list[Document], vectors: Vectors | None) -> EmbedFn:
        """How this write turns documents into chunks: the model's, or ``vectors`` given for ``docs``."""
        if vectors is None:
            return lambda some: embed_documents(some, self.chunker, self.embedder)
        given = validation.check_vectors(vectors, len(docs), self.model["dim"], "vectors")
        return lambda some: given_vectors(some, docs, given)

    def _keeping_stored_chunks(self, embed: EmbedFn, docs: list[Document], stored: dict) -> EmbedFn:
        """``embed``, but documents of ``docs`` whose language alone changed keep their stored chunks
        (``document_languages.reusing_stored_chunks``)."""
        if not self.analyzer.multilingual or not docs:
            return embed
        view = self.reader.current()
        return reusing_stored_chunks(embed, docs, stored, view, self.models.model_at(view.generation)["sha256"])

    def _stage(self, docs: list[Document], embedded: dict, owner: str | None = None) -> Path:
        with self.analyzer.writing(docs):
            return stage(self.root, docs, embedded, self.analyzer, self.index_policy, owner)
