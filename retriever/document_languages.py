"""Each document's language, written into its metadata as ``lang`` before a collection classifies or writes it.

Every write path of a collection whose manifest has ``bm25.languages``
(``Collection.classify``, ``add``, ``upsert`` and ``prepare``: the Python API,
the batch job, its Ray workers and the HTTP server alike) passes its
documents through ``with_languages``. A document's language is, in order:

1. the ``lang`` its caller gave in its metadata, kept as given (a code BM25 does not
   analyse, such as ``"xx"``, is analysed in the default language: ``MultilingualAnalyzer.language_of``);
2. the ``lang`` stored with it, when its title and text are unchanged, so
   writing an unchanged document again stays no work whatever its language came from;
3. the language detected from its title and text (``language_detection``),
   or the collection's default language where the text is short or the
   detection unsure.

Only a language other than the collection's default is written: a document
without ``lang`` is in the default language (``MultilingualAnalyzer.language_of``,
``collection_info.language_info``), so a caller's metadata come back as given
for the documents of the default language (what LangChain's and LlamaIndex's
stores promise), and a collection that detects no languages adds none.

The language is part of what the document's index terms depend on, so the
documents come back as ``DocumentInLanguage``, whose ``text_hash`` covers it:
a document given another language has its text analysed again, its chunks
and vectors kept as stored (``reusing_stored_chunks``), never embedded again.
A collection without ``bm25.languages`` (English only) takes documents as they are.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from retriever.documents import Document
from retriever.encoding.passages import Embedded
from retriever.search.language_detection import detect_language
from retriever.search.languages import LANGUAGES
from retriever.search.multilingual import MultilingualAnalyzer
from retriever.storage.vector_files import reconstruct
from retriever.storage.view import View

LANG_FIELD = "lang"
EmbedFn = Callable[[list[Document]], dict[str, Embedded]]


@dataclass
class DocumentInLanguage(Document):
    """A ``Document`` of a collection that tells languages apart; its index terms depend on its metadata's
    ``lang``, so its text hash does."""

    def text_hash(self) -> str:
        """SHA-256 over title, text and language: what the vectors and index terms depend on."""
        return _text_hash(self, self.metadata.get(LANG_FIELD))


def with_languages(docs: Sequence[Document], stored: dict[str, Any], analyzer: MultilingualAnalyzer) -> list[Document]:
    """``docs`` each with its language in its metadata's ``lang`` (see the module), in order.

    Args:
        docs: Checked documents.
        stored: The catalog rows of those of them stored already, by id (``Catalog.lookup``).
        analyzer: The collection's analysis (``multilingual``, ``default_language``, ``detect``).

    Returns:
        ``DocumentInLanguage``\\ s; ``docs`` itself for a collection analysed in English only.

    """
    if not analyzer.multilingual:
        return list(docs)
    placed = []
    for doc in docs:
        given = doc.metadata.get(LANG_FIELD)
        if given is not None:
            code = None  # the caller's own value, kept as given; analysed as language_of reads it
        else:
            code = _stored_language(doc, stored.get(doc.id))
            if code is None and analyzer.detect:
                code = detect_language(doc.text, doc.title, analyzer.default_language)
            if code == analyzer.default_language:
                code = None  # the default language goes without saying: the caller's metadata stay as given
        metadata = doc.metadata if code is None else {**doc.metadata, LANG_FIELD: code}
        placed.append(DocumentInLanguage(doc.id, doc.text, doc.title, metadata))
    return placed


def reusing_stored_chunks(
    embed: EmbedFn, docs: Sequence[Document], stored: dict[str, Any], view: View, model: str | None
) -> EmbedFn:
    """``embed``, but a document of ``docs`` whose title and text are stored as they are (its language alone
    changed) gets its stored chunks back, spans and vectors, instead of being embedded again.

    Args:
        embed: How the write embeds documents.
        docs: The documents the write stages (``DocumentInLanguage``).
        stored: Their catalog rows, by id.
        view: The committed generation, whose segments hold the stored chunks.
        model: The weights hash recorded for the chunks given back (the committed generation's model).
    """
    kept = {}
    for doc in docs:
        row = stored.get(doc.id)
        if row is not None and row.text_hash == _text_hash(doc, row.meta.get(LANG_FIELD)):
            found = _stored_chunks(view, row.key, model)
            if found is not None:
                kept[doc.id] = found
    if not kept:
        return embed

    def embed_or_keep(some: list[Document]) -> dict[str, Embedded]:
        rest = [doc for doc in some if doc.id not in kept]
        return {**{doc.id: kept[doc.id] for doc in some if doc.id in kept}, **(embed(rest) if rest else {})}

    return embed_or_keep


def _stored_chunks(view: View, key: int, model: str | None) -> Embedded | None:
    """The chunks (spans, vectors) of the live document ``key`` in ``view``; ``None`` when it is gone."""
    found = view.find(key)
    if found is None:
        return None
    segment = view.parts[found[0]].segment
    lo, hi = int(segment.doc_chunks[found[1]]), int(segment.doc_chunks[found[1] + 1])
    vectors = np.array(reconstruct(segment.index, np.arange(lo, hi, dtype=np.int64)), dtype=np.float32)
    return Embedded([(int(start), int(end)) for start, end in segment.spans[lo:hi]], vectors, model)


def _stored_language(doc: Document, row: Any) -> str | None:
    """The language stored with ``doc``'s catalog ``row`` when its title and text are the ones stored."""
    code = None if row is None else row.meta.get(LANG_FIELD)
    if not isinstance(code, str) or code not in LANGUAGES:
        return None
    return code if _text_hash(doc, code) == row.text_hash else None


def _text_hash(doc: Document, code: Any) -> str:
    """``DocumentInLanguage.text_hash`` of ``doc`` in language ``code`` (``None``: no ``lang``)."""
    payload = json.dumps([doc.title, doc.text, code], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
