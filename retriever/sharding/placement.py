"""Which shard holds a document: a stable hash of its id, part of the sharded format.

A document with id ``doc_id`` lives in shard ``shard_of(doc_id, n)`` of a
collection of ``n`` shards: the first 8 bytes of the SHA-256 of the id's
UTF-8 bytes, read as a big-endian unsigned integer, modulo ``n``. The rule
depends on nothing but the id and ``n`` (not on the process, the platform or
Python's hash seed), so every reader and writer, on any machine, finds a
document in the same shard; changing it would strand every stored document,
so it is recorded in the manifest (``PLACEMENT``) and never changes for a
collection.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

#: The placement rule's name, as ``shards.json`` records it.
PLACEMENT = "sha256-first8-mod-n"


def shard_of(doc_id: str, n: int) -> int:
    """The shard, ``0 .. n - 1``, holding document ``doc_id`` in a collection of ``n`` shards."""
    digest = hashlib.sha256(doc_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n


def shard_name(i: int) -> str:
    """The folder of shard ``i`` inside the sharded collection: ``shard-000``, ``shard-001``, ..."""
    return f"shard-{i:03d}"


def routed(ids: Sequence[str], n: int) -> dict[int, list[int]]:
    """Positions in ``ids`` grouped by the shard each id belongs to, each group in the order given;
    shards in ascending order."""
    groups: dict[int, list[int]] = {}
    for position, doc_id in enumerate(ids):
        groups.setdefault(shard_of(doc_id, n), []).append(position)
    return dict(sorted(groups.items()))
