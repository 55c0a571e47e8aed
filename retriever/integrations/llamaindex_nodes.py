"""How LlamaIndex's nodes and filters become semsearch's documents and ``where``, and back.

A node is one semsearch document: its id, its text, its metadata plus
``ref_doc_id`` (the source document) and ``_llamaindex`` (the node's JSON
without text, metadata and embedding, its class and its length), which
rebuild it; a found node's metadata also says where in its source it is
(``location_fields``). ``MetadataFilters`` map onto ``where`` operator for operator.
"""

from __future__ import annotations

import json
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from retriever.errors import BadInputError, FilterError

REF_DOC_ID = "ref_doc_id"  # metadata field: the node's source document id
NODE_FIELD = "_llamaindex"  # metadata field: {"node": JSON, "type": class name, "chars": text length}
_OPERATORS = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
_MATCH_NOTHING = {"$not": {}}  # the complement of every document
_NOT_IN_NODE_JSON = {"embedding", "metadata", "text", "text_resource"}  # kept elsewhere, or not at all


def where_from_filters(filters: MetadataFilters) -> dict[str, Any]:
    """LlamaIndex ``MetadataFilters`` as a semsearch ``where`` (``{}`` matches every document).

    ``EQ NE GT GTE LT LTE IN NIN`` become ``$eq $ne $gt $gte $lt $lte $in $nin``;
    ``AND`` / ``OR`` become ``$and`` / ``$or``, and ``NOT`` (no filter matches)
    ``{"$not": {"$or": ...}}``, nested as deep as given. Values compare by type
    on both sides (the number 2020 is not the string "2020"), and ``NE`` /
    ``NIN`` match a missing field, as in LlamaIndex's own filtering.

    Raises:
        FilterError: An operator or condition with no semsearch equivalent
            (``ANY``, ``ALL``, ``CONTAINS``, ``TEXT_MATCH``, ``IS_EMPTY``...), or
            a value of the wrong shape (a list for ``EQ``, one value for ``IN``, ``None``).
    """
    parts = [
        where_from_filters(item) if isinstance(item, MetadataFilters) else _comparison(item) for item in filters.filters
    ]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        return {} if not parts else parts[0] if len(parts) == 1 else {"$and": parts}
    if condition == FilterCondition.OR:
        return _MATCH_NOTHING if not parts else parts[0] if len(parts) == 1 else {"$or": parts}
    if condition == FilterCondition.NOT:
        return {} if not parts else {"$not": parts[0] if len(parts) == 1 else {"$or": parts}}
    raise FilterError(f"filter condition {condition!r} has no semsearch equivalent; use and, or, not")


def _comparison(item: MetadataFilter) -> dict[str, Any]:
    operator = FilterOperator(item.operator)
    name = f"filter on {item.key!r}: {operator.name}"
    op = _OPERATORS.get(operator)
    if op is None:
        supported = ", ".join(o.name for o in _OPERATORS)
        raise FilterError(f"{name} has no semsearch equivalent; use one of {supported}")
    if op in ("$in", "$nin"):
        if not isinstance(item.value, list):
            raise FilterError(f"{name} takes a list of values, got {item.value!r}")
    elif item.value is None or isinstance(item.value, list):
        raise FilterError(f"{name} compares with one string or number, got {item.value!r}")
    return {item.key: {op: item.value}}


def where_of(query: VectorStoreQuery) -> dict[str, Any] | None:
    """The query's filters and ``doc_ids`` as one ``where``; ``None`` when nothing narrows the search."""
    parts = []
    if query.filters is not None:
        parts.append(where_from_filters(query.filters))
    if query.doc_ids is not None:
        parts.append({REF_DOC_ID: {"$in": list(query.doc_ids)}})
    parts = [part for part in parts if part]
    return None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}


def document_of(node: BaseNode) -> dict[str, Any]:
    """A node as a semsearch document: id, text, metadata plus ``ref_doc_id`` and ``_llamaindex``."""
    reserved = sorted({REF_DOC_ID, NODE_FIELD} & set(node.metadata))
    if reserved:
        raise BadInputError(f"node {node.node_id!r}: metadata field(s) {reserved} are the store's own; rename them")
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    node_json = json.dumps(node.model_dump(mode="json", exclude=_NOT_IN_NODE_JSON), ensure_ascii=False)
    metadata = {**node.metadata, NODE_FIELD: {"node": node_json, "type": node.class_name(), "chars": len(text)}}
    if node.ref_doc_id is not None:
        metadata[REF_DOC_ID] = node.ref_doc_id
    return {"id": node.node_id, "text": text, "metadata": metadata}


def node_of(
    doc_id: str, text: str, title: str, metadata: dict[str, Any], span: tuple[int, int] | None = None
) -> BaseNode:
    """A stored document as a node: the node that was added, or a ``TextNode`` for one semsearch wrote itself.

    Args:
        span: ``(start, end)`` of ``text`` in the document, when it is a passage of it.
    """
    metadata = dict(metadata)
    box = metadata.get(NODE_FIELD)
    if is_node_box(box):
        del metadata[NODE_FIELD]
        metadata.pop(REF_DOC_ID, None)
        node = metadata_dict_to_node({"_node_content": box["node"], "_node_type": box.get("type")}, text)
        node.metadata = metadata
        return node
    if title and "title" not in metadata:
        metadata["title"] = title
    start, end = span if span is not None else (0, len(text))
    return TextNode(id_=doc_id, text=text, metadata=metadata, start_char_idx=start, end_char_idx=end)


def location_fields(location: dict[str, Any] | None) -> dict[str, Any]:
    """A hit's location as node metadata: ``{"location": ...}``, and for a page ``page_label`` (the page
    number, from 1, as text, as LlamaIndex's PDF reader writes it); ``{}`` for none."""
    if not location:
        return {}
    page = location.get("page")
    return {"location": location, **({"page_label": str(page)} if isinstance(page, int) else {})}


def is_node_box(box: Any) -> bool:
    """Whether ``box`` is the ``_llamaindex`` field this store wrote (a node's JSON inside)."""
    return isinstance(box, dict) and isinstance(box.get("node"), str)
