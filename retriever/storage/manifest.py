"""``manifest.json``: what a collection is, written when it is created.

It changes afterwards only where a generation changes what the collection is:
``compact --index-codes`` (the vector index policy), and a model switch
(``model_switch``), recorded before the generation it takes effect in is
published: ``model`` is in force from generation ``model_since`` on, and
``previous_model`` before it, so readers still on an older generation, and a
switch that was never published, keep the model their vectors came from.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from retriever.errors import CollectionNotFoundError, CorruptCollectionError, FormatVersionError, ModelMismatchError
from retriever.storage.atomic import atomic_write_text
from retriever.storage.catalog_url import sqlite_url

MANIFEST = "manifest.json"
FORMAT = "semsearch-collection"
FORMAT_VERSION = 2  # 1: one FAISS file and one BM25 file per generation; 2: segments
DEFAULT_CATALOG = "catalog.sqlite"
SHARDS_FILE = "shards.json"  # the manifest of a sharded collection's top folder (retriever.sharding.layout)


class ModelIdentity(Protocol):
    """What a manifest checks of a model (``Embedder`` has it)."""

    name: str
    dim: int
    weights_sha256: str


@dataclass
class Manifest:
    """The self-description of a collection directory.

    Attributes:
        uuid: Identifies the collection; its catalog carries the same uuid.
        model: Model identity: name, sha256 of weights, dim, max_tokens,
            pooling, normalize.
        chunking: window_tokens, overlap_tokens, title_prefix.
        index: Vector index policy: which FAISS index a segment gets by its
            size, and the merge policy.
        bm25: BM25 parameters and text analysis: ``k1``, ``b``, ``fields``, the English
            analysis (``stemmer``, ``stopwords``) and ``languages``, ``{"default": code,
            "detect": bool}``: documents are analysed in their own languages (their metadata's
            ``lang``), detected unless given, ``default`` where unsure. A manifest without
            ``languages`` (every one written before languages were told apart) means English
            only, as before; it stays so (``retriever.search.multilingual``).
        catalog_url: SQLAlchemy URL, or ``None`` for ``catalog.sqlite`` inside
            the directory.
        model_since: The generation from which ``model`` is in force (0: always).
        previous_model: The model in force before ``model_since``, or ``None``.
        search: The hybrid settings searches use when the caller sets none (``fusion``, ``alpha``,
            ``feedback``; ``retriever.search_settings``); empty: the built-in ones.
    """

    uuid: str
    created_at: str
    model: dict[str, Any]
    chunking: dict[str, Any]
    index: dict[str, Any]
    catalog_url: str | None = None
    bm25: dict[str, Any] = field(
        default_factory=lambda: {"k1": 0.9, "b": 0.4, "stemmer": "porter", "stopwords": "en", "fields": "title+text"}
    )
    format: str = FORMAT
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    model_since: int = 0
    previous_model: dict[str, Any] | None = None
    search: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(
        cls,
        model: dict[str, Any],
        chunking: dict[str, Any],
        index: dict[str, Any],
        bm25: dict[str, Any],
        catalog_url: str | None,
    ) -> "Manifest":
        """The manifest of a collection created now, with a new uuid."""
        created_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        return cls(str(uuid.uuid4()), created_at, model, chunking, index, catalog_url, bm25)

    def model_at(self, generation: int) -> dict[str, Any]:
        """The model whose vectors generation ``generation`` holds."""
        if generation < self.model_since and self.previous_model is not None:
            return self.previous_model
        return self.model

    def switched(self, model: dict[str, Any], generation: int) -> "Manifest":
        """A copy with ``model`` in force from ``generation`` on, the model before it kept for older ones."""
        return dataclasses.replace(
            self, model=model, model_since=generation, previous_model=self.model_at(generation - 1)
        )

    def pending(self, generation: int) -> bool:
        """Whether a switch is recorded for a generation after ``generation``, the committed one."""
        return self.model_since > generation and self.previous_model is not None

    def without_pending(self) -> "Manifest":
        """A copy without the switch that was recorded but never published."""
        return dataclasses.replace(self, model=self.previous_model, model_since=0, previous_model=None)

    def check_model(self, root: Path, embedder: ModelIdentity) -> None:
        """Raise ``ModelMismatchError`` unless ``embedder`` has the weights and dimension the collection was built with."""
        expected = self.model
        if embedder.weights_sha256 != expected["sha256"] or embedder.dim != expected["dim"]:
            raise ModelMismatchError(
                f"collection {root} was built with model {expected['name']!r} "
                f"(sha256 {expected['sha256'][:12]}, dim {expected['dim']}); "
                f"{embedder.name!r} (sha256 {embedder.weights_sha256[:12]}, dim {embedder.dim}) "
                "is a different model"
            )

    def check_model_at(self, root: Path, embedder: ModelIdentity, generation: int) -> None:
        """``check_model`` against the model in force at ``generation``."""
        dataclasses.replace(self, model=self.model_at(generation)).check_model(root, embedder)

    def catalog_location(self, root: Path) -> str:
        """The SQLAlchemy URL of the catalog for a collection at ``root``."""
        if self.catalog_url:
            return self.catalog_url
        return sqlite_url((Path(root) / DEFAULT_CATALOG).resolve())

    def save(self, root: Path) -> None:
        """Write ``manifest.json`` into ``root`` atomically."""
        atomic_write_text(Path(root) / MANIFEST, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, root: Path) -> "Manifest":
        """Read ``root``'s manifest.

        Raises:
            CollectionNotFoundError: No collection (or no manifest) at ``root``.
            FormatVersionError: An older format that ``semsearch upgrade`` converts.
            CorruptCollectionError: The manifest is unreadable or malformed.
        """
        path = Path(root) / MANIFEST
        if not Path(root).is_dir():
            raise CollectionNotFoundError(f"no collection at {root}: directory does not exist")
        if not path.is_file():
            if (Path(root) / SHARDS_FILE).is_file():
                raise CollectionNotFoundError(
                    f"{root} is a sharded collection ({SHARDS_FILE}): open it with retriever.sharding.open_collection"
                )
            raise CollectionNotFoundError(f"no collection at {root}: {MANIFEST} is missing")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptCollectionError(f"cannot read {path}: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CollectionNotFoundError(f"{path} is not a semsearch collection manifest")
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            if isinstance(version, int) and 1 <= version < FORMAT_VERSION:
                raise FormatVersionError(
                    f"collection {root} has format version {version}; this semsearch reads version "
                    f"{FORMAT_VERSION}: run `semsearch upgrade -c {root}` to convert it in place"
                )
            raise CorruptCollectionError(
                f"{path} has format version {version}; this semsearch reads version {FORMAT_VERSION}"
            )
        try:
            return cls(**data)
        except TypeError as exc:
            raise CorruptCollectionError(f"{path} is malformed: {exc}") from None


def drop_pending_switch(root: Path, generation: int) -> None:
    """Take back a model switch recorded in ``root``'s manifest but never published (``generation``: the
    committed one). Called by the writer that takes the lock, as it removes the switch's unreferenced files."""
    manifest = Manifest.load(root)
    if manifest.pending(generation):
        manifest.without_pending().save(root)
