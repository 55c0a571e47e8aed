"""JSON typed or pasted into the UI (metadata, the free filter): an object, or a message saying why not.

``json.loads`` raises ``RecursionError`` on deep nesting and ``ValueError`` on
a number of more than 4,300 digits; both, like malformed JSON, an array and
an object nested deeper than ``MAX_DEPTH``, become one ``BadInputError``.
"""

from __future__ import annotations

import json
from typing import Any

from retriever.errors import BadInputError

MAX_DEPTH = 32  # levels of objects and arrays: more than any metadata or filter needs


def depth(value: Any) -> int:
    """How many levels of objects and arrays ``value`` has (``1`` for ``{}``; ``0`` for a scalar)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            break
        stack.extend((child, level + 1) for child in children)
    return deepest


def parse_object(raw: str, what: str) -> dict[str, Any]:
    """``raw`` parsed as a JSON object.

    Args:
        raw: The text as typed.
        what: How messages name it (``"metadata"``, ``"the JSON filter"``).
    Raises:
        BadInputError: Not JSON, not an object, nested deeper than ``MAX_DEPTH``, or a number too long.
    """
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadInputError(f"{what} is not valid JSON ({exc.msg} at character {exc.pos})") from None
    except RecursionError:
        raise BadInputError(f"{what} is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # a number over Python's digit limit
        raise BadInputError(f"{what} cannot be read: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(value, dict):
        raise BadInputError(f'{what} must be a JSON object like {{"lang": "en"}}, not {type(value).__name__}')
    if depth(value) > MAX_DEPTH:
        raise BadInputError(f"{what} is nested more than {MAX_DEPTH} levels deep")
    return value
