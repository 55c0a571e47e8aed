"""Trained taggers in the collection directory: ``taggers/<hash of the field>.json``, one per field.

Each file is written atomically and carries the SHA-256 of its body, checked
on every read: a damaged tagger is an error naming the file, never a wrong
label. The field's name is inside the file; the file name only keeps any
field name (slashes, dots, any script) a safe path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from retriever.errors import CorruptCollectionError
from retriever.storage.atomic import atomic_write_text, fsync_dir
from retriever.storage.cleanup import TAGGERS_DIR
from retriever.storage.segment_files import regular_file
from retriever.tagging.classifier import Tagger

FORMAT = 1


def tagger_path(root: Path, field: str) -> Path:
    """Where the tagger of ``field`` lives in the collection at ``root``."""
    digest = hashlib.sha256(field.encode("utf-8")).hexdigest()[:24]
    return Path(root) / TAGGERS_DIR / f"{digest}.json"


def save_tagger(root: Path, tagger: Tagger) -> None:
    """Write (or replace) the tagger of ``tagger.field``, atomically."""
    folder = Path(root) / TAGGERS_DIR
    if not folder.is_dir():
        folder.mkdir()
        fsync_dir(Path(root))
    body = json.dumps(tagger.to_dict(), ensure_ascii=False, sort_keys=True)
    document = {"format": FORMAT, "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(), "tagger": body}
    atomic_write_text(tagger_path(root, tagger.field), json.dumps(document, ensure_ascii=False))


def read_tagger_file(path: Path) -> Tagger:
    """The tagger stored at ``path``, its checksum verified.

    Raises:
        CorruptCollectionError: The file is no regular file, is unreadable, or its checksum does not match.
    """
    try:
        text = regular_file(path).read_text(encoding="utf-8")
        document = json.loads(text)
        body = document["tagger"]
        if document.get("format") != FORMAT:
            raise ValueError(f"format {document.get('format')!r}, expected {FORMAT}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptCollectionError(
            f"tagger {path} is unreadable ({exc}); run semsearch tag again or remove the file"
        ) from None
    if not isinstance(body, str) or hashlib.sha256(body.encode("utf-8")).hexdigest() != document.get("sha256"):
        raise CorruptCollectionError(
            f"tagger {path} is damaged (checksum mismatch); run semsearch tag again or remove the file"
        )
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise CorruptCollectionError(f"tagger {path} is unreadable ({exc})") from None
    tagger = Tagger.from_dict(data, str(path))
    if path.name != tagger_path(path.parent.parent, tagger.field).name:
        raise CorruptCollectionError(f"tagger {path} holds field {tagger.field!r}, which belongs in another file")
    return tagger


def load_taggers(root: Path) -> dict[str, Tagger]:
    """Every tagger of the collection at ``root``, by field (empty when it has none).

    Raises:
        CorruptCollectionError: ``taggers`` is not a folder, or a tagger file is damaged.
    """
    folder = Path(root) / TAGGERS_DIR
    if not folder.exists():
        return {}
    if folder.is_symlink() or not folder.is_dir():
        raise CorruptCollectionError(f"{folder} is not a folder of the collection's own")
    taggers = {}
    for path in sorted(folder.glob("*.json")):
        tagger = read_tagger_file(path)
        taggers[tagger.field] = tagger
    return taggers


def load_tagger(root: Path, field: str) -> Tagger | None:
    """The tagger of ``field``, or ``None``."""
    path = tagger_path(root, field)
    return read_tagger_file(path) if path.exists() or path.is_symlink() else None
