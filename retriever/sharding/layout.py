"""A sharded collection's top folder: ``shards.json``, naming its shards, and nothing else of its own.

::

    DIR/
    ├── shards.json        {"format": "semsearch-shards", "format_version": 1, "uuid": ..., "placement":
    │                       "sha256-first8-mod-n", "shards": ["shard-000", "shard-001", ...], "created_at": ...}
    ├── shard-000/         a collection, as ``Collection`` writes one (manifest, catalog, segments)
    └── shard-001/ ...

Every shard has the same model, chunking, index and BM25 settings; a
document lives in the shard ``placement.shard_of`` names. The file is written
once, atomically, when the collection is created, after its shards.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from retriever.errors import CollectionNotFoundError, CorruptCollectionError
from retriever.sharding.placement import PLACEMENT, shard_name
from retriever.storage.atomic import atomic_write_text
from retriever.storage.manifest import SHARDS_FILE

FORMAT = "semsearch-shards"
FORMAT_VERSION = 1


@dataclass
class ShardsManifest:
    """What ``shards.json`` holds.

    Attributes:
        shards: The shard folders, relative to the top folder, in shard order.
        uuid: The sharded collection's identity.
        placement: The placement rule (``placement.PLACEMENT``).
        created_at: ISO 8601 UTC.
    """

    shards: list[str]
    uuid: str = field(default_factory=lambda: uuid.uuid4().hex)
    placement: str = PLACEMENT
    created_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    @classmethod
    def new(cls, n: int) -> "ShardsManifest":
        """The manifest of a new collection of ``n`` shards, ``shard-000`` onwards."""
        return cls([shard_name(i) for i in range(n)])

    def save(self, root: Path) -> None:
        """Write ``root/shards.json`` atomically."""
        atomic_write_text(Path(root) / SHARDS_FILE, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, root: Path) -> "ShardsManifest":
        """Read ``root/shards.json``.

        Raises:
            CollectionNotFoundError: ``root`` holds no sharded collection.
            CorruptCollectionError: The file is unreadable, malformed, of another version, or names a shard
                folder outside ``root``.
        """
        path = Path(root) / SHARDS_FILE
        if not path.is_file():
            raise CollectionNotFoundError(f"no sharded collection at {root}: {SHARDS_FILE} is missing")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            manifest = cls(**data)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
            raise CorruptCollectionError(f"cannot read {path}: {exc}") from None
        if manifest.format != FORMAT or manifest.format_version != FORMAT_VERSION:
            raise CorruptCollectionError(f"{path} is not a version {FORMAT_VERSION} {FORMAT} manifest")
        if manifest.placement != PLACEMENT:
            raise CorruptCollectionError(f"{path} places documents by {manifest.placement!r}, not {PLACEMENT!r}")
        expected = [shard_name(i) for i in range(len(manifest.shards))]
        if not manifest.shards or manifest.shards != expected:
            raise CorruptCollectionError(f"{path} must name shard folders {', '.join(expected[:3]) or 'shard-000'}...")
        return manifest


def is_sharded(path: str | os.PathLike) -> bool:
    """Whether ``path`` is the top folder of a sharded collection (it holds ``shards.json``)."""
    return (Path(path) / SHARDS_FILE).is_file()
