"""Loaders: turn files on disk into ``Document`` records.

``walk`` finds the files under the caller's roots; ``load_path`` reads one file
or one BEIR corpus directory and yields a ``Document`` for each document in it,
or a ``LoadError`` for each file, archive member or record it cannot use. Bad
content never raises: every problem becomes a ``LoadError`` with a one-line
reason, and loading goes on with the next record.

One module per concern: ``walking`` (finding files), ``detect`` (what a file
is, by content and name), ``formats`` (the registry of readers, each called
with library warnings held back), ``load`` (one file to documents: detect,
then dispatch), ``containers`` (compressed files and archives), ``text``
(decoding; text and Markdown), ``markup`` (HTML), ``pdf`` (PDF pages),
``ocr`` and ``scans`` (Tesseract for pages without text and for images),
``office`` and ``docx_body`` (docx, pptx, xlsx), ``opendocument`` and
``odf_text`` (odt, ods, odp), ``ebook`` (EPUB), ``rtf``, ``mail`` (eml, mbox,
msg), ``records`` (JSONL and CSV), ``streams`` (record files read as they
stream), ``report`` (what a run left out, grouped by type and reason), and
what readers share: ``located`` and ``sections`` and ``sheets`` (parts with
their locations), ``props`` (document properties), ``packages`` (ZIP and OLE
packages checked before a library opens them) and ``common``.
"""

from indexer.loaders.common import DEFAULT_MAX_BYTES, SUPPORTED_SUFFIXES, FieldMap, LoadError, is_beir_dir, shown_path
from indexer.loaders.load import load_path
from indexer.loaders.walking import walk

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SUPPORTED_SUFFIXES",
    "FieldMap",
    "LoadError",
    "is_beir_dir",
    "load_path",
    "shown_path",
    "walk",
]
