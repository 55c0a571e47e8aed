"""What the API shows of where things are: no absolute path, no database host.

``/stats`` and error answers may reach anyone who can call the service, so the
collection appears by its directory's name, a local model by its folder's
name, and the catalog by its kind (``sqlite``, ``postgresql``); an error's
message has the collection's absolute path and the catalog URL cut out.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from retriever.collection import Collection

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"]+", re.IGNORECASE)  # any URL: a catalog's, with its host


def catalog_kind(url: str) -> str:
    """``"postgresql+psycopg://u@h/db"`` -> ``"postgresql"``; ``"sqlite:///..."`` -> ``"sqlite"``."""
    return url.split(":", 1)[0].split("+", 1)[0] or "unknown"


def model_label(name: str) -> str:
    """A model's name as shown: a hub id as it is, a local directory by its folder's name."""
    return Path(name).name if name.startswith(("/", "~", ".")) else name


def public_info(info: dict[str, Any]) -> dict[str, Any]:
    """``Collection.info()`` without absolute paths or the catalog's host (for ``/stats``)."""
    return info | {
        "path": Path(info["path"]).name,
        "catalog": catalog_kind(info["catalog"]),
        "model": model_label(info["model"]),
    }


def public_message(message: str, collection: Collection | None) -> str:
    """``message`` with the collection's absolute path as ``<collection>`` and any URL as ``<catalog>``."""
    if collection is not None:
        for root in {str(collection.root.resolve()), str(collection.root)}:
            if len(root) > 1:
                message = message.replace(root, "<collection>")
    return _URL.sub("<catalog>", message)
