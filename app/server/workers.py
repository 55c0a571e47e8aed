"""The worker processes of ``semsearch serve --workers N``: readiness marks and each worker's settings."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from app.server.limits import SERVE_ENV


class WorkerGroup:
    """The worker processes of one ``semsearch serve --workers N``, as any of them sees them.

    Each worker marks itself ready, with a file named by its process id in
    ``folder``, once its model is loaded and its searches are batched; a
    worker still loading takes no connections yet.

    Args:
        folder: A folder the serving command made for this group (and removes).
        size: Worker processes started.
    """

    def __init__(self, folder: str | os.PathLike, size: int) -> None:
        self.folder = Path(folder)
        self.size = size

    def mark_ready(self) -> None:
        """Mark this process ready."""
        (self.folder / str(os.getpid())).touch()

    def ready(self) -> int:
        """Workers marked ready and still running (one that died and was replaced counts once its successor is)."""
        count = 0
        for mark in self.folder.glob("[0-9]*"):
            try:
                os.kill(int(mark.name), 0)
            except (ProcessLookupError, ValueError):  # ended, or not a mark
                continue
            except PermissionError:  # running, under another user
                pass
            count += 1
        return count


def worker_settings(
    collections: Mapping[str, str | os.PathLike],
    mounted: bool,
    deadline_s: float,
    ready_dir: str,
    workers: int,
    allowed_hosts: tuple[str, ...] = (),
    snapshot_root: str | None = None,
    max_snapshots: int = 20,
) -> str:
    """The JSON that ``semsearch serve --workers N`` puts in ``$SEMSEARCH_SERVE`` for its workers.

    Args:
        collections: ``{name: directory}``.
        mounted: Each collection under ``/collections/NAME`` (else the one collection at the root).
        snapshot_root, max_snapshots: Where snapshots over HTTP go (None: nowhere), and how many are kept.
    """
    return json.dumps(
        {
            "collections": {name: str(Path(path).resolve()) for name, path in collections.items()},
            "mounted": mounted,
            "deadline_s": deadline_s,
            "ready_dir": ready_dir,
            "workers": workers,
            "allowed_hosts": list(allowed_hosts),
            "snapshot_root": snapshot_root,
            "max_snapshots": max_snapshots,
        }
    )


def read_worker_settings() -> dict[str, Any]:
    """``{"collections", "mounted", "deadline_s", "ready_dir", "workers", "allowed_hosts", "snapshot_root",
    "max_snapshots"}`` from ``$SEMSEARCH_SERVE``."""
    return json.loads(os.environ[SERVE_ENV])
