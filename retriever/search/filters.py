"""The metadata filter language, as the search room's callers name it: defined in ``retriever.filters``.

Kept so that ``from retriever.search.filters import validate_where`` goes on
working for the modules that import it from here; new code imports
``retriever.filters``.
"""

from __future__ import annotations

from retriever.filters import (
    COMPARISONS,
    LOGICAL,
    MAX_CLAUSES,
    MAX_DEPTH,
    MAX_KEY_CHARS,
    MAX_LIST,
    MAX_STRING_CHARS,
    parse_where,
    validate_where,
)

__all__ = [
    "COMPARISONS", "LOGICAL", "MAX_CLAUSES", "MAX_DEPTH", "MAX_KEY_CHARS", "MAX_LIST", "MAX_STRING_CHARS",
    "parse_where", "validate_where",
]
