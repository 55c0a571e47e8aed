"""The Python standard library's own documentation as a corpus, and sample queries over it.

Every machine with Python has this text: one document per module, built from
the module's docstring and the signatures and docstrings of its public
functions, classes and methods (its ``__all__``, or what it and its C
accelerator define). ``make demo`` (``app/demo.py``) indexes it and
runs ``QUERIES``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import warnings
from pathlib import Path

MODULES = (
    "argparse asyncio base64 bisect calendar collections concurrent.futures contextlib copy csv "
    "dataclasses datetime decimal difflib email.message enum fnmatch fractions functools glob gzip "
    "hashlib heapq hmac html http.client http.server itertools json logging math mimetypes "
    "operator os pathlib pickle pprint queue random re secrets shelve shutil signal "
    "socket sqlite3 statistics string struct subprocess tarfile tempfile textwrap threading time "
    "timeit tomllib typing unicodedata unittest urllib.parse urllib.request uuid weakref "
    "xml.etree.ElementTree zipfile zlib"
).split()
QUERIES = [
    ("parse command line options and arguments", None),
    ("read and write compressed files", None),
    ("run code in parallel on several CPU cores", None),
    ("show the differences between two texts", None),
    ("generate a secure random token for a password reset link", None),
    ("sort a list while keeping it sorted on insert", {"package": {"$in": ["bisect", "heapq"]}}),
]


def module_document(name: str) -> dict | None:
    """One JSONL record for a module (id, title, text, metadata), or None if it has no docs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module = importlib.import_module(name)
        except ImportError:
            return None
    doc = inspect.getdoc(module) or ""
    summary = doc.strip().splitlines()[0] if doc.strip() else ""
    sections = [doc]
    for attr, obj in _public_api(module):
        if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
            sections.append(_describe(f"{name}.{attr}", obj))
            if inspect.isclass(obj):
                for method_name, method in sorted(vars(obj).items()):
                    if not method_name.startswith("_") and callable(method) and inspect.getdoc(method):
                        sections.append(_describe(f"{name}.{attr}.{method_name}", method))
    text = "\n\n".join(section for section in sections if section.strip())
    if not text.strip():
        return None
    return {
        "id": f"python:{name}",
        "title": f"{name} — {summary}" if summary else name,
        "text": text,
        "package": name.split(".")[0],
        "kind": "module",
    }


def _public_api(module) -> list[tuple[str, object]]:
    """``(name, object)`` of the module's public API, sorted by name.

    Its ``__all__`` where it has one (read with ``getattr``: a package may
    load names lazily); else the public names defined in the module or in its
    C accelerator (``bisect``'s functions live in ``_bisect``).
    """
    if hasattr(module, "__all__"):
        return [(name, getattr(module, name)) for name in sorted(module.__all__) if hasattr(module, name)]
    accelerator = "_" + module.__name__.rsplit(".", 1)[-1]
    return [
        (name, obj)
        for name, obj in sorted(vars(module).items())
        if not name.startswith("_") and getattr(obj, "__module__", None) in (module.__name__, accelerator)
    ]


class _Opaque:
    """Stands in for a default value whose repr changes from run to run."""

    def __repr__(self) -> str:
        return "..."


def _describe(qualname: str, obj) -> str:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        rendered = "(...)"
    else:
        params = [
            p.replace(default=_Opaque()) if p.default is not p.empty and " at 0x" in repr(p.default) else p
            for p in signature.parameters.values()
        ]
        rendered = str(signature.replace(parameters=params))
    return f"{qualname}{rendered}\n{inspect.getdoc(obj) or ''}".strip()


def write_corpus(path: Path) -> int:
    """Write the stdlib corpus as JSONL; returns the number of records."""
    records = [record for record in map(module_document, MODULES) if record]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return len(records)
