"""Loaders: turn files on disk into ``Document`` records.

``walk`` finds the files under the caller's roots; ``load_path`` reads one file
(text, Markdown, HTML, PDF, JSONL or CSV) or one BEIR corpus directory and
yields a ``Document`` for each document in it, or a ``LoadError`` for each file
or record it cannot use. Bad content never raises: every problem becomes a
``LoadError`` with a one-line reason, and loading goes on with the next record.

One module per concern: ``walking`` (finding files), ``load`` (one file to
documents, by suffix), ``text`` (decoding; text and Markdown), ``markup``
(HTML and PDF), ``records`` (JSONL and CSV) and ``common`` (what they share).
"""

from indexer.loaders.common import (
    DEFAULT_MAX_BYTES,
    SUPPORTED_SUFFIXES,
    FieldMap,
    LoadError,
    is_beir_dir,
    shown_path,
)  # fmt: skip
from indexer.loaders.load import load_path
from indexer.loaders.walking import walk

__all__ = [
    "DEFAULT_MAX_BYTES", "SUPPORTED_SUFFIXES", "FieldMap", "LoadError", "is_beir_dir", "load_path",
    "shown_path", "walk",
]  # fmt: skip
