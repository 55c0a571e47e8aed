"""``ShardedCollection``'s write verbs: each document routed to its shard by id, the shards written in parallel.

``ShardedWriteVerbs`` is mixed into ``sharding.collection.ShardedCollection``;
it uses its ``shards`` and ``share_model``. Arguments are checked once, as
``Collection``'s verbs check them; each shard's part is then that shard's own
atomic write (``Collection.upsert``, ``delete``, ...), run side by side
(``parallel.in_parallel``), and the reports are joined in the order of the
ids given.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Sequence

from retriever import validation
from retriever.collection_writing import Vectors
from retriever.documents import Document
from retriever.errors import BadInputError
from retriever.sharding.parallel import in_parallel
from retriever.sharding.placement import routed
from retriever.storage.changes import Change, WriteReport


class ShardedWriteVerbs:
    """``classify``, ``add``, ``upsert``, ``delete``, ``prepare`` and ``commit_prepared`` over shards."""

    def classify(self, documents: Iterable[Document | dict[str, Any]]) -> list[tuple[Document, Change]]:
        """What writing ``documents`` would do to each, on its shard (``Collection.classify``), in order."""
        docs = validation.check_documents(documents)
        groups = routed([doc.id for doc in docs], len(self.shards))
        planned = in_parallel(
            lambda item: self.shards[item[0]].classify([docs[p] for p in item[1]]), list(groups.items())
        )
        plan: list = [None] * len(docs)
        for positions, shard_plan in zip(groups.values(), planned):
            for position, entry in zip(positions, shard_plan):
                plan[position] = entry
        return plan

    def add(self, documents: Iterable[Document | dict[str, Any]], vectors: Vectors | None = None) -> WriteReport:
        """Insert new documents, each in its shard; an id that already exists is an error (use ``upsert``).

        Nothing is written when an id exists in any shard. See ``Collection.add``.
        """
        docs = validation.check_documents(documents)
        existing = sorted(
            {doc_id for shard_ids in self._per_shard([doc.id for doc in docs], _stored_ids) for doc_id in shard_ids}
        )
        if existing:
            raise BadInputError(f"{len(existing)} document id(s) already exist ({', '.join(existing[:3])}); use upsert")
        return self.upsert(docs, vectors=vectors)

    def upsert(self, documents: Iterable[Document | dict[str, Any]], vectors: Vectors | None = None) -> WriteReport:
        """Insert or replace documents, each in its shard; each shard's part one atomic commit (``Collection.upsert``).

        Args:
            documents: Documents or mappings with ``id``, ``text``, ``title``, ``metadata``.
            vectors: Optional ``(len(documents), dim)`` embeddings computed elsewhere, row per document.

        Returns:
            What was written, in the order of the documents given.

        Raises:
            BadInputError: A document is bad, an id appears twice, or ``vectors`` do not fit.
            CollectionLockedError: Another process held a shard's write lock too long.
        """
        docs = validation.check_documents(documents)
        given = None if vectors is None else validation.check_vectors(vectors, len(docs), self.model["dim"], "vectors")
        if not docs:
            return WriteReport()
        if given is None:
            self.share_model()
        groups = routed([doc.id for doc in docs], len(self.shards))

        def write(item: tuple[int, list[int]]) -> WriteReport:
            shard, positions = item
            return self.shards[shard].upsert([docs[p] for p in positions], None if given is None else given[positions])

        return _joined([doc.id for doc in docs], in_parallel(write, list(groups.items())))

    def delete(self, ids: Iterable[str]) -> WriteReport:
        """Remove documents by id from their shards; unknown ids are ignored (``Collection.delete``).

        Returns:
            The report, with ``deleted`` the ids that were stored, in the order given.
        """
        wanted = list(dict.fromkeys(validation.check_ids(ids)))
        reports = self._per_shard(wanted, lambda shard, some: shard.delete(some))
        deleted = {doc_id for report in reports for doc_id in report.deleted}
        return WriteReport(deleted=[doc_id for doc_id in wanted if doc_id in deleted])

    def prepare(
        self,
        documents: Iterable[Document | dict[str, Any]],
        vectors: Vectors | None = None,
        *,
        owner: str | None = None,
    ) -> list[Path]:
        """Chunk, embed and stage documents in their shards, without committing (``Collection.prepare``).

        Returns:
            One staged folder per shard that received documents (inside that shard); ``commit_prepared`` takes them.
        """
        docs = validation.check_documents(documents)
        given = None if vectors is None else validation.check_vectors(vectors, len(docs), self.model["dim"], "vectors")
        if not docs:
            raise BadInputError("prepare needs at least one document")
        if given is None:
            self.share_model()
        groups = routed([doc.id for doc in docs], len(self.shards))

        def stage(item: tuple[int, list[int]]) -> Path:
            shard, positions = item
            some = [docs[p] for p in positions]
            return self.shards[shard].prepare(some, None if given is None else given[positions], owner=owner)

        return in_parallel(stage, list(groups.items()))

    def commit_prepared(self, folders: Sequence[str | os.PathLike]) -> WriteReport:
        """Publish staged folders (from ``prepare``), each shard's in one atomic commit of that shard.

        Raises:
            BadInputError: A folder lies in none of the shards, or is not a staged segment.
        """
        by_shard: dict[int, list[Path]] = {}
        roots = [shard.root.resolve() for shard in self.shards]
        for folder in map(Path, folders):
            owner = next((i for i, root in enumerate(roots) if folder.resolve().is_relative_to(root)), None)
            if owner is None:
                raise BadInputError(f"{folder} is a staged folder of none of the shards of {self.root}")
            by_shard.setdefault(owner, []).append(folder)
        reports = in_parallel(lambda item: self.shards[item[0]].commit_prepared(item[1]), list(by_shard.items()))
        joined = WriteReport()
        for report in reports:
            joined.merge(report)
        return joined

    def _per_shard(self, ids: list[str], act) -> list:
        """``act(shard, ids of that shard)`` for every shard holding one of ``ids``, in parallel; the results."""
        groups = routed(ids, len(self.shards))
        return in_parallel(lambda item: act(self.shards[item[0]], [ids[p] for p in item[1]]), list(groups.items()))


def _stored_ids(shard, ids: list[str]) -> list[str]:
    """Those of ``ids`` that ``shard`` stores."""
    return list(shard.catalog.lookup(ids))


def _joined(ids: list[str], reports: list[WriteReport]) -> WriteReport:
    """The shards' upsert ``reports`` as one, in the order of ``ids``."""
    kinds: dict[str, str] = {}
    for report in reports:
        for kind in ("added", "updated", "unchanged"):
            kinds.update(dict.fromkeys(getattr(report, kind), kind))
    return WriteReport.of(ids, kinds, sum(report.chunks for report in reports))
