"""The UI's paste form without Streamlit: pasted text made a document."""

from __future__ import annotations

import hashlib
from typing import Any


def pasted_document(text: str, title: str = "", doc_id: str = "", metadata_json: str = "") -> dict[str, Any]:
    """A document dict from the paste form. The id defaults to a hash of the
    text, so pasting the same text twice does not duplicate it.

    Raises:
        BadInputError: empty text, or metadata that is not a JSON object (``app.ui.json_input.parse_object``).
    """
    from app.ui.json_input import parse_object
    from retriever.errors import BadInputError

    if not text or not text.strip():
        raise BadInputError("the text is empty; paste the document's text")
    metadata: Any = {}
    if metadata_json and metadata_json.strip():
        metadata = parse_object(metadata_json, "metadata")
    doc_id = doc_id.strip() or "pasted-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return {"id": doc_id, "title": title.strip(), "text": text, "metadata": metadata}
