"""Housekeeping of the export cache's ``exported/`` folder (``retriever.encoding.export``).

What killed exports left (``.tmp-<pid>-<hex>`` folders being written,
``.stale-<hex>`` folders moved aside to be deleted) is swept before each new
export, and the exports loaded least recently beyond ``MAX_EXPORTS`` go
after it, with the ``locations/`` records that named them. Loading an
export touches its folder, so the folder's mtime says when it was last used,
and leases it (``export_lease``): an export a live process uses is never
removed, and counts as loaded now.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path

from retriever.encoding.export_lease import leased, unleased
from retriever.storage.leftovers import left_over

#: Exports kept: each new one removes the least recently loaded beyond these (an export with its optimised
#: graphs and compiled blobs takes about a gigabyte for MiniLM; docs/benchmarks.md).
MAX_EXPORTS = 4
_TEMPORARY = re.compile(r"\.tmp-(?:(?P<pid>[0-9]+)-)?[0-9a-f]{32}")  # an export being written


def sweep_export_temporaries(folder: Path) -> list[Path]:
    """Remove what killed exports left in ``exported/``: ``.tmp-<pid>-<hex>`` and ``.stale-<hex>`` folders.

    A ``.tmp-`` folder goes when ``leftovers.left_over`` says so (its process
    is gone, or it is a day old; one without a process number only then).

    Returns:
        The folders removed.
    """
    removed = []
    for path in Path(folder).glob(".tmp-*"):
        match = _TEMPORARY.fullmatch(path.name)
        if match and path.is_dir() and left_over(path, int(match["pid"]) if match["pid"] else None):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    for path in Path(folder).glob(".stale-*"):  # moved aside to be deleted: never read again
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def prune_exports(folder: Path, keep: int = MAX_EXPORTS, spare: str = "") -> list[Path]:
    """Remove the exports in ``folder`` (``exported/``) loaded least recently, beyond the ``keep`` most recent.

    ``spare`` (a weight hash: the export just made) and the exports a live
    process holds a lease on (``export_lease``) always stay, count as the
    most recent, and count among ``keep``: the cache holds more than ``keep``
    exports only while more than that are in use. Each goes through
    ``remove_export``, so a reader finds an export whole or not at all.
    Temporary and aside folders are left to ``sweep_export_temporaries``.

    Returns:
        The exports removed.
    """
    exports = []
    for path in Path(folder).iterdir():
        if path.name.startswith(".") or not path.is_dir():
            continue
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another process
            in_use = path.name == spare or leased(path)
            exports.append((in_use, path.stat().st_mtime_ns, path))
    ranked = sorted(exports, reverse=True)  # in use first, then the most recently loaded
    beyond = [path for rank, (in_use, _, path) in enumerate(ranked) if rank >= keep and not in_use]
    return [path for path in beyond if remove_export(path)]


def remove_export(path: Path) -> bool:
    """Move the export at ``path`` aside (``.stale-<hex>``), then delete it.

    Returns:
        ``False`` where a process holds a lease on it (``export_lease``), or
        another process moved it first; ``True`` once it is gone.
    """
    aside = path.with_name(f".stale-{uuid.uuid4().hex}")
    with unleased(path) as free:
        if not free:
            return False
        try:
            os.rename(path, aside)
        except OSError:
            return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def recorded_weights(record: Path) -> str:
    """The weight hash that the ``locations/`` record at ``record`` names; ``""`` where it cannot be parsed.

    Raises:
        OSError: The record cannot be read (``FileNotFoundError``: there is none).
    """
    try:
        data = json.loads(record.read_text("utf-8"))
    except ValueError:  # torn, or not UTF-8
        return ""
    return str(data.get("weights_sha256", "")) if isinstance(data, dict) else ""


def forget_removed_locations(root: Path) -> list[Path]:
    """Remove the ``locations/`` records under cache ``root`` whose export is gone from ``exported/``.

    A record maps a model directory to its weight hash; once that hash's export
    is removed, the record only sends a lookup to a missing folder. An
    unreadable record goes too (the next load fingerprints and records again).

    Returns:
        The records removed.
    """
    exported = Path(root) / "exported"
    removed = []
    for record in (Path(root) / "locations").glob("*.json"):
        try:
            weights = recorded_weights(record)
        except FileNotFoundError:  # removed meanwhile by another process
            continue
        except OSError:
            weights = ""
        if not (weights and (exported / weights).is_dir()):
            with contextlib.suppress(FileNotFoundError):
                record.unlink()
                removed.append(record)
    return removed
