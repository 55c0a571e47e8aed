"""The sidebar's filters without Streamlit: which widget each metadata field gets, and the filter they make.

Field widgets' values become ``where`` clauses (the filter language of
``Collection.search``), ANDed with the free JSON filter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

MAX_CHOICES = 20  # the catalog samples at most 20 values per field: 20 means "maybe more"
HIDDEN_FIELDS = ("encoding",)  # loader bookkeeping nobody filters on


@dataclass(frozen=True)
class FilterField:
    """How to offer one metadata field as a filter.

    Attributes:
        name: The field name.
        kind: ``"choice"`` (few string values: multiselect), ``"number"``
            (a from/to range), ``"bool"`` or ``"text"`` (many values: exact match).
        options: The values seen, sorted (choices and booleans).
        low / high: The smallest and largest numbers seen (number fields).
    """

    name: str
    kind: str
    options: tuple = ()
    low: float | None = None
    high: float | None = None


def filter_fields(fields: dict[str, list], hidden: Sequence[str] = HIDDEN_FIELDS) -> list[FilterField]:
    """Turn ``Collection.metadata_fields()`` into filter widgets' specs, by name."""
    specs = []
    for name in sorted(fields):
        values = [v for v in fields[name] if v is not None]
        if name in hidden or not values:
            continue  # nested objects and lists have no examples: the JSON filter reaches them
        if all(isinstance(v, bool) for v in values):
            specs.append(FilterField(name, "bool", (False, True)))
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            specs.append(FilterField(name, "number", low=min(values), high=max(values)))
        elif all(isinstance(v, str) for v in values) and len(values) < MAX_CHOICES:
            specs.append(FilterField(name, "choice", tuple(sorted(values, key=str.lower))))
        else:
            specs.append(FilterField(name, "text"))
    return specs


def build_where(clauses: Iterable[dict[str, Any]], extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """AND together per-field clauses and an optional raw JSON filter; ``None`` when empty."""
    parts = [c for c in clauses if c]
    if extra:
        parts.append(extra)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def field_clause(spec: FilterField, value: Any) -> dict[str, Any] | None:
    """The filter for one widget's value (``None`` when it does not restrict)."""
    if spec.kind == "choice":
        values = list(value or [])
        if not values:
            return None
        return {spec.name: values[0]} if len(values) == 1 else {spec.name: {"$in": values}}
    if spec.kind == "number":
        low, high = value if value else (None, None)
        condition = {}
        if low is not None:
            condition["$gte"] = low
        if high is not None:
            condition["$lte"] = high
        return {spec.name: condition} if condition else None
    if spec.kind == "bool":
        return None if value in (None, "any") else {spec.name: value in (True, "yes", "true")}
    text = (value or "").strip()
    if not text:
        return None
    values = [_number_or_text(v.strip()) for v in text.split(",") if v.strip()]
    return {spec.name: values[0]} if len(values) == 1 else {spec.name: {"$in": values}}


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text
