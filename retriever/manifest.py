"""``manifest.json``: what a collection is, written once when it is created."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retriever.atomic import atomic_write_text
from retriever.errors import CollectionNotFoundError, CorruptCollectionError, FormatVersionError

MANIFEST = "manifest.json"
FORMAT = "semsearch-collection"
FORMAT_VERSION = 2  # 1: one FAISS file and one BM25 file per generation; 2: segments
DEFAULT_CATALOG = "catalog.sqlite"


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
        bm25: BM25 parameters and text analysis (k1, b, stemmer, stopwords).
        catalog_url: SQLAlchemy URL, or ``None`` for ``catalog.sqlite`` inside
            the directory.
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

    def catalog_location(self, root: Path) -> str:
        """The SQLAlchemy URL of the catalog for a collection at ``root``."""
        if self.catalog_url:
            return self.catalog_url
        return f"sqlite:///{(Path(root) / DEFAULT_CATALOG).resolve()}"

    def save(self, root: Path) -> None:
        atomic_write_text(Path(root) / MANIFEST, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, root: Path) -> "Manifest":
        path = Path(root) / MANIFEST
        if not Path(root).is_dir():
            raise CollectionNotFoundError(f"no collection at {root}: directory does not exist")
        if not path.is_file():
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
