"""``semsearch upgrade``: the storage room's format conversions, handed the search room's builders.

``retriever.storage.upgrade`` converts a collection of an older format,
``retriever.storage.int8_upgrade`` writes the int8 rows older segments lack,
and ``retriever.storage.fields_upgrade`` gives the list values of documents
written before lists were filterable their filter rows (once: the catalog
records it). None imports ``retriever.search``, so this module hands them the
analyser, index policy and quantiser they build segments with
(``storage.builders``).
"""

from __future__ import annotations

from pathlib import Path

from retriever.search import int8_rows
from retriever.search.bm25 import Analyzer
from retriever.search.vector_index import IndexPolicy
from retriever.storage import int8_upgrade
from retriever.storage import upgrade as format_upgrade
from retriever.storage.builders import SegmentBuilders

BUILDERS = SegmentBuilders(analyzer=Analyzer, index_builder=IndexPolicy.from_dict, quantize=int8_rows.quantize)


def upgrade(path: str | Path, progress: bool = True) -> str:
    """Bring the collection at ``path`` to the current format (``storage.upgrade.upgrade``); one line of what
    was done. Raises as that does."""
    return format_upgrade.upgrade(path, BUILDERS, progress)


def add_int8_rows(root: Path, progress: bool = True, lock_timeout: float = 10.0) -> int:
    """Write int8 rows into every compressed segment lacking them (``storage.int8_upgrade.add_int8_rows``);
    returns how many segments got them."""
    return int8_upgrade.add_int8_rows(root, int8_rows.quantize, progress, lock_timeout)
