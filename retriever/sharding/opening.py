"""``open_collection``: whichever collection a folder holds, a single one or a sharded one.

A folder holding ``shards.json`` is a sharded collection
(``sharding.layout``); any other is opened as a ``Collection``. Both answer
the same verbs (add, upsert, delete, get, search, info, compact, snapshot,
check), so callers that only use those need not tell them apart.
"""

from __future__ import annotations

import os

from retriever.collection import Collection
from retriever.encoding.embedder import Embedder
from retriever.sharding.collection import ShardedCollection
from retriever.sharding.layout import is_sharded


def open_collection(
    path: str | os.PathLike, model: str | os.PathLike | Embedder | None = None, *, lock_timeout: float = 60.0
) -> Collection | ShardedCollection:
    """The collection at ``path``: a ``ShardedCollection`` where it holds ``shards.json``, else a ``Collection``.

    Raises:
        CollectionNotFoundError: ``path`` holds no collection of either kind.
        (and what ``Collection.open`` or ``ShardedCollection.open`` raise)
    """
    if is_sharded(path):
        return ShardedCollection.open(path, model, lock_timeout=lock_timeout)
    return Collection.open(path, model, lock_timeout=lock_timeout)
