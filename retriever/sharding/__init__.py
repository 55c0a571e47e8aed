"""Sharded collections: N shard collections behind one folder, one manifest and the verbs of ``Collection``.

``ShardedCollection`` (create, open, the verbs), ``open_collection`` (either
kind of folder), ``split_collection`` (an existing collection into shards,
without re-embedding) and ``shard_of`` (where a document lives). The modules,
one concern each: ``placement`` (the stable hash), ``layout`` (``shards.json``),
``parallel`` (a thread per shard), ``writing`` and ``upkeep`` (the verbs),
``search`` (exact search over shards), ``splitting`` and ``opening``.
"""

from retriever.sharding.collection import MAX_SHARDS, ShardedCollection
from retriever.sharding.layout import SHARDS_FILE, ShardsManifest, is_sharded
from retriever.sharding.opening import open_collection
from retriever.sharding.placement import PLACEMENT, shard_of
from retriever.sharding.splitting import split_collection

__all__ = [
    "MAX_SHARDS",
    "PLACEMENT",
    "SHARDS_FILE",
    "ShardedCollection",
    "ShardsManifest",
    "is_sharded",
    "open_collection",
    "shard_of",
    "split_collection",
]
