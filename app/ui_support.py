"""What the Streamlit UI needs that is not Streamlit: finding collections,
building filters from metadata fields, metadata chips, and indexing uploaded
files or pasted text (passages as HTML: ``app.ui_passages``).

Kept apart from ``app/ui.py`` so it can be tested without a browser and reused
by other front ends. Every piece of user or document text that reaches HTML
goes through ``html.escape`` here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import json
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

MANIFEST = "manifest.json"
MAX_CHOICES = 20  # the catalog samples at most 20 values per field: 20 means "maybe more"
HIDDEN_FIELDS = ("encoding",)  # loader bookkeeping nobody filters on

_SAFE_NAME = re.compile(r"[^\w.\- ()\[\]+,@]+", re.UNICODE)


# -- collections -------------------------------------------------------------
def find_collections(root: str | Path) -> list[Path]:
    """The collections under ``root``: ``[root]`` when it holds one, else its
    sub-folders holding a ``manifest.json``, sorted by name."""
    root = Path(root).expanduser()
    if (root / MANIFEST).is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(
        (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).is_file()),
        key=lambda p: p.name.lower(),
    )


def manifest_uuid(path: str | Path) -> str:
    """The collection's uuid, so a cache keyed on it notices a re-created collection."""
    try:
        return json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8")).get("uuid", "")
    except (OSError, ValueError):
        return ""


# -- formatting --------------------------------------------------------------
def format_bytes(n: int) -> str:
    """``1536`` -> ``"1.5 KB"``."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"  # pragma: no cover


def format_age(iso: str, now: dt.datetime | None = None) -> str:
    """An ISO timestamp as ``"5 minutes ago"`` (the timestamp itself when unparsable)."""
    try:
        then = dt.datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return str(iso)
    if then.tzinfo is None:
        then = then.replace(tzinfo=dt.timezone.utc)
    seconds = ((now or dt.datetime.now(dt.timezone.utc)) - then).total_seconds()
    if seconds < 0:
        return then.strftime("%Y-%m-%d %H:%M UTC")
    for limit, unit, div in ((60, "second", 1), (3600, "minute", 60), (86400, "hour", 3600), (86400 * 30, "day", 86400)):
        if seconds < limit:
            value = int(seconds // div)
            return "just now" if unit == "second" and value < 10 else f"{value} {unit}{'s' if value != 1 else ''} ago"
    return then.strftime("%Y-%m-%d")


def model_label(name: str) -> str:
    """A model's short name: the last path component of a local directory."""
    name = str(name)
    if "/" in name and Path(name).is_absolute():
        parts = [p for p in Path(name).parts if p not in ("model", "/")]
        return parts[-1] if parts else name
    return name


def source_of(hit: Any) -> str:
    """Where a hit comes from: its file path, else its id."""
    meta = getattr(hit, "metadata", None) or {}
    source = meta.get("source")
    return str(source) if source else str(hit.id)


def metadata_chips(metadata: dict[str, Any], skip: Sequence[str] = ("source", *HIDDEN_FIELDS), limit: int = 6) -> str:
    """Small escaped ``key: value`` labels for a result card."""
    chips = []
    for key, value in metadata.items():
        if key in skip or isinstance(value, (dict, list)):
            continue
        shown = str(value)
        if len(shown) > 40:
            shown = shown[:39] + "…"
        chips.append(f'<span class="ss-chip">{html.escape(str(key))}: {html.escape(shown)}</span>')
        if len(chips) == limit:
            break
    return "".join(chips)


# -- filters -----------------------------------------------------------------
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


# -- adding documents ----------------------------------------------------------
@dataclass
class AddReport:
    """What an upload or paste did: the merged ``WriteReport`` numbers and one
    ``(file or id, reason)`` per problem."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    chunks: int = 0
    files: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)

    def merge(self, written: Any) -> None:
        self.added += written.added
        self.updated += written.updated
        self.unchanged += written.unchanged
        self.chunks += written.chunks

    @property
    def written(self) -> int:
        return len(self.added) + len(self.updated)

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.unchanged)} unchanged"
            f" · {self.chunks} chunk{'s' if self.chunks != 1 else ''} embedded"
        )


def safe_file_name(name: str) -> str:
    """An uploaded file's name without folders or odd characters (extension kept)."""
    base = Path(str(name).replace("\\", "/")).name.strip()
    base = _SAFE_NAME.sub("_", base).strip(". ") or "upload"
    return base[:200]


def index_uploads(
    collection: Any,
    files: Sequence[tuple[str, bytes]],
    progress: Callable[[float, str], None] = lambda fraction, text: None,
    max_bytes: int | None = None,
) -> AddReport:
    """Index uploaded files (``(name, content)`` pairs) into ``collection``.

    Each file is written under its own name to a temporary folder and read by
    the same loaders as ``semsearch index``. Single-document files get their
    file name as id and as ``source`` (uploading a new version replaces the old
    one); JSONL/CSV records keep their own ids. Bad files and records are
    listed and skipped; the rest goes in, in batches, each one atomic commit,
    by the batch writer of ``semsearch index`` (``indexer.batches``).
    """
    report = AddReport()
    total = max(1, len(files))
    with tempfile.TemporaryDirectory(prefix="semsearch-upload-") as tmp:
        folder = Path(tmp).resolve()
        seen: set[str] = set()
        for number, (raw_name, content) in enumerate(files):
            name = safe_file_name(raw_name)
            report.files += 1
            progress(number / total, f"Reading {name} ({number + 1}/{len(files)})")
            docs = _read_upload(folder, name, content, seen, report, max_bytes)
            _write_upload(collection, name, docs, report, lambda done, text: progress((number + done) / total, text))
        progress(1.0, f"Done: {report.summary()}")
    return report


def _read_upload(folder: Path, name: str, content: bytes, seen: set[str], report: AddReport,
                 max_bytes: int | None) -> list[Any]:
    """The documents of the uploaded file ``name``, read in ``folder``; each problem goes to ``report.errors``."""
    from indexer.loaders import DEFAULT_MAX_BYTES, SUPPORTED_SUFFIXES, LoadError, load_path

    if name in seen:
        report.errors.append((name, "another uploaded file has the same name"))
        return []
    seen.add(name)
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        report.errors.append((name, f"unsupported file type {suffix or '(none)'}; use {supported}"))
        return []
    path = folder / name
    path.write_bytes(content)
    docs = []
    for item in load_path(path, max_bytes=max_bytes or DEFAULT_MAX_BYTES):
        if isinstance(item, LoadError):
            report.errors.append((_relabel(item.source, folder), item.reason))
        else:
            docs.append(_relabel_document(item, folder, name))
    path.unlink(missing_ok=True)
    return docs


def _write_upload(collection: Any, name: str, docs: list[Any], report: AddReport,
                  progress: Callable[[float, str], None]) -> None:
    """Upsert the documents of the uploaded file ``name`` in batches, telling ``progress`` the fraction sent.

    Refused documents are listed with their reasons; an error of the collection
    itself (locked, corrupt) is listed for the file, and its other documents left out."""
    from indexer.batches import BatchWriter
    from retriever.errors import SemsearchError

    sent = 0

    def starting(batch: list[Any]) -> None:
        nonlocal sent
        progress(sent / max(1, len(docs)), f"Indexing {name}: {sent + len(batch):,} of {len(docs):,} document(s)")
        sent += len(batch)

    def refused(doc: Any, reason: str) -> None:
        report.errors.append((f"{name} ({doc.id})" if doc.id != name else name, reason))

    try:
        BatchWriter(collection.upsert, lambda _, written: report.merge(written), refused, starting=starting).add_all(docs)
    except SemsearchError as exc:
        report.errors.append((name, str(exc)))


def _relabel(source: str, folder: Path) -> str:
    prefix = str(folder) + "/"
    return source[len(prefix):] if source.startswith(prefix) else source


def _relabel_document(doc: Any, folder: Path, name: str) -> Any:
    """``doc`` with the uploaded file's name for its temporary path, as id and as ``source``."""
    temp_path = str(folder / name)
    metadata = dict(doc.metadata)
    if metadata.get("source") == temp_path:
        metadata["source"] = name
    return replace(doc, id=name if doc.id == temp_path else doc.id, metadata=metadata)


def pasted_document(text: str, title: str = "", doc_id: str = "", metadata_json: str = "") -> dict[str, Any]:
    """A document dict from the paste form. The id defaults to a hash of the
    text, so pasting the same text twice does not duplicate it.

    Raises:
        BadInputError: empty text, or metadata that is not a JSON object (``ui_json.parse_object``).
    """
    from app.ui_json import parse_object
    from retriever.errors import BadInputError

    if not text or not text.strip():
        raise BadInputError("the text is empty; paste the document's text")
    metadata: Any = {}
    if metadata_json and metadata_json.strip():
        metadata = parse_object(metadata_json, "metadata")
    doc_id = doc_id.strip() or "pasted-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return {"id": doc_id, "title": title.strip(), "text": text, "metadata": metadata}
