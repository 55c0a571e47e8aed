"""What ``Collection.info`` and ``Collection.metadata_fields`` report, assembled from the catalog,
the committed generation's view, the manifest and the taggers."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from retriever.storage.catalog import Catalog
from retriever.storage.cleanup import size_on_disk
from retriever.tagging.store import load_taggers


def collection_info(collection: Any) -> dict[str, Any]:
    """``Collection.info`` of ``collection`` (a ``Collection``).

    Returns:
        ``{"path", "documents", "chunks", "model", "model_sha256", "dim", "chunking", "index",
        "index_policy", "segments", "format_version", "catalog", "generation", "size_bytes", "taggers",
        "created_at", "updated_at"}``; the model is the one the committed generation was embedded with,
        ``updated_at`` ISO 8601 UTC to the second.
    """
    n_docs, n_chunks = collection.catalog.counts()
    catalog_state = collection.catalog.state()
    view = collection.reader.current()
    model = collection.models.model_at(view.generation)
    manifest = collection.manifest
    return {
        "path": str(collection.root.resolve()),
        "documents": n_docs,
        "chunks": n_chunks,
        "model": model["name"],
        "model_sha256": model["sha256"],
        "dim": model["dim"],
        "chunking": manifest.chunking,
        "index": view.summary(),
        "index_policy": manifest.index,
        "segments": view.segments(),
        "format_version": manifest.format_version,
        "catalog": collection.catalog.safe_url(),
        "generation": catalog_state.generation,
        "size_bytes": size_on_disk(collection.root),
        "taggers": {
            name: {"method": t.method, "labels": t.classes} for name, t in load_taggers(collection.root).items()
        },
        "created_at": manifest.created_at,
        "updated_at": dt.datetime.fromtimestamp(catalog_state.updated_at, dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }


def metadata_fields(catalog: Catalog, root: Path) -> dict[str, list]:
    """Metadata field names with example values from ``catalog``; a field a tagger of the collection at
    ``root`` writes lists all its labels first."""
    fields = catalog.metadata_fields()
    for name, tagger in load_taggers(root).items():
        seen = fields.get(name, [])
        fields[name] = list(tagger.classes) + [v for v in seen if v not in tagger.classes]
    return fields
