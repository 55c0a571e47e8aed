"""What ``Collection.info`` and ``Collection.metadata_fields`` report, assembled from the catalog,
the committed generation's view, the manifest and the taggers; and the note an indexing run shows when
the dense model reads English only but documents are in other languages (``dense_language_note``)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from retriever.encoding.models import PACKAGED_ALIASES
from retriever.judgments.store import count_judgments
from retriever.search.languages import ENGLISH, LANGUAGES
from retriever.search.multilingual import view_languages
from retriever.storage.catalog import Catalog
from retriever.storage.cleanup import size_on_disk
from retriever.tagging.store import load_taggers


def collection_info(collection: Any) -> dict[str, Any]:
    """``Collection.info`` of ``collection`` (a ``Collection``).

    Returns:
        ``{"path", "documents", "chunks", "model", "model_sha256", "dim", "chunking", "index",
        "index_policy", "segments", "format_version", "catalog", "generation", "size_bytes", "taggers",
        "languages", "judgments", "created_at", "updated_at"}``; the model is the one the committed generation
        was embedded with, ``languages`` is ``language_info``'s, ``judgments`` is ``{"judgments": n, "queries": m}``
        (those stored, and their distinct queries), ``search_settings`` the hybrid settings searches use where
        their caller sets none (``Collection.search_settings``), ``updated_at`` ISO 8601 UTC to the second.
    """
    n_docs, n_chunks = collection.catalog.counts()
    catalog_state = collection.catalog.state()
    view = collection.reader.current()
    model = collection.models.model_at(view.generation)
    manifest = collection.manifest
    n_judgments, n_queries = count_judgments(collection.catalog)
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
        "languages": language_info(collection, n_docs),
        "judgments": {"judgments": n_judgments, "queries": n_queries},
        "search_settings": collection.search_settings(),
        "created_at": manifest.created_at,
        "updated_at": dt.datetime.fromtimestamp(catalog_state.updated_at, dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }


def language_info(collection: Any, n_docs: int) -> dict[str, Any]:
    """``{"default", "detect", "documents"}``: the collection's default language, whether it detects
    documents' languages, and its documents per language (``{code: count}``, by code; a collection analysed
    in English only counts all as ``"en"``, another a document whose metadata have no ``lang`` as in its
    default language).

    Args:
        collection: A ``Collection``.
        n_docs: Its documents.
    """
    analyzer = collection.analyzer
    default = analyzer.default_language
    counts: dict[str, int] = {}
    if analyzer.multilingual:
        sampled = collection.catalog.metadata_fields().get("lang", [])
        found = set(view_languages(collection.reader.current())) | {code for code in sampled if code in LANGUAGES}
        for code in sorted(found - {default}):
            counts[code] = len(collection.catalog.matching_keys({"lang": code}))
    counts[default] = n_docs - sum(counts.values())
    documents = {code: count for code, count in sorted(counts.items()) if count}
    return {"default": analyzer.default_language, "detect": analyzer.detect, "documents": documents}


def dense_language_note(collection: Any) -> str | None:
    """``english_only_note`` of a collection (a ``Collection``) and its documents per language."""
    model = collection.model["name"]
    if model not in PACKAGED_ALIASES or not collection.analyzer.multilingual:
        return None
    return english_only_note(model, language_info(collection, len(collection))["documents"])


def english_only_note(model: str, documents: dict[str, int]) -> str | None:
    """One line for a collection embedded by the packaged English-only ``model`` that holds documents in other
    languages (``documents``: per language code, as ``language_info`` counts them): its dense side serves them
    poorly; BM25, and so hybrid search, finds them by their keywords in their own languages. ``None`` where
    there are none, or the model is another."""
    others = {code: n for code, n in documents.items() if code != ENGLISH}
    if not others or model not in PACKAGED_ALIASES:
        return None
    listed = ", ".join(f"{code} {n}" for code, n in sorted(others.items(), key=lambda item: (-item[1], item[0])))
    return (
        f"note: the dense model {model} reads English only; {sum(others.values())} document(s) in other "
        f"languages ({listed}) are found by their keywords, in their own language, by bm25 and hybrid search"
    )


def metadata_fields(catalog: Catalog, root: Path) -> dict[str, list]:
    """Metadata field names with example values from ``catalog``; a field a tagger of the collection at
    ``root`` writes lists all its labels first."""
    fields = catalog.metadata_fields()
    for name, tagger in load_taggers(root).items():
        seen = fields.get(name, [])
        fields[name] = list(tagger.classes) + [v for v in seen if v not in tagger.classes]
    return fields
