"""What a new collection starts with: its chunker, its manifest and the empty directory.

``Collection.create`` checks its arguments, then calls ``chunker_for``,
``new_manifest`` and ``write_empty_collection`` in that order.
"""

from __future__ import annotations

from pathlib import Path

from retriever.encoding.chunking import Chunker
from retriever.encoding.embedder import Embedder
from retriever.errors import BadInputError
from retriever.search import vector_index
from retriever.search.bm25 import DEFAULT_B, DEFAULT_K1
from retriever.search.languages import check_language
from retriever.search.multilingual import DEFAULT_LANGUAGE_SETTINGS
from retriever.storage.catalog import Catalog
from retriever.storage.catalog_url import for_manifest as catalog_url_for_manifest
from retriever.storage.generations import write_head
from retriever.storage.manifest import Manifest
from retriever.storage.merging import MergePolicy
from retriever.storage.segment import SEGMENTS_DIR

DEFAULT_OVERLAP = 32
BM25_SETTINGS = {"k1": DEFAULT_K1, "b": DEFAULT_B, "stemmer": "porter", "stopwords": "en", "fields": "title+text"}


def new_manifest(
    embedder: Embedder,
    chunker: Chunker,
    index_policy: vector_index.IndexPolicy | None,
    merge_policy: MergePolicy | None,
    catalog_url: str | None,
    languages: dict | None = None,
) -> Manifest:
    """The manifest of a new collection: the model's identity, the chunking, the index and merge policies
    (defaults ``IndexPolicy()`` and ``MergePolicy()``), ``BM25_SETTINGS`` with ``languages`` (default
    ``DEFAULT_LANGUAGE_SETTINGS``: detected, English by default) and the catalog (default: SQLite inside)."""
    index = {
        "library": "faiss",
        "metric": "inner_product",
        "policy": (index_policy or vector_index.IndexPolicy()).to_dict(),
        "merge": (merge_policy or MergePolicy()).to_dict(),
    }
    catalog = catalog_url_for_manifest(catalog_url)  # the password is kept in memory only
    bm25 = {**BM25_SETTINGS, "languages": dict(languages or DEFAULT_LANGUAGE_SETTINGS)}
    return Manifest.new(embedder.identity(), chunker.settings(), index, bm25, catalog)


def language_settings(language: object, detect: object) -> dict:
    """``bm25.languages`` of a new collection: ``{"default": language, "detect": detect}``.

    Raises:
        BadInputError: ``language`` is not a code BM25 analyses, or ``detect`` is not a bool.
    """
    if not isinstance(detect, bool):
        raise BadInputError(f"detect_languages must be True or False, got {type(detect).__name__}")
    return {"default": check_language(language, "language"), "detect": detect}


def write_empty_collection(root: Path, manifest: Manifest) -> None:
    """The directory, an empty catalog and ``HEAD`` at generation 0; the manifest last, since it makes a collection."""
    root.mkdir(parents=True, exist_ok=True)
    (root / SEGMENTS_DIR).mkdir(exist_ok=True)
    catalog = Catalog(manifest.catalog_location(root))
    try:
        catalog.create(manifest.uuid)
    finally:
        catalog.close()  # an open connection would hold SQLite's WAL unmerged until collected
    write_head(root, 0)
    manifest.save(root)


def chunker_for(embedder: Embedder, window_tokens: int | None, overlap_tokens: int | None, title: bool) -> Chunker:
    """The chunker a new collection gets: the model's window (less two special tokens) unless told."""
    window = window_tokens or embedder.max_tokens - 2
    if window > embedder.max_tokens - 2:
        raise BadInputError(f"chunk window of {window} tokens exceeds the model's {embedder.max_tokens - 2}")
    if overlap_tokens is None:
        overlap_tokens = min(DEFAULT_OVERLAP, window // 4)
    return Chunker(embedder.text_tokenizer, window, overlap_tokens, title)
