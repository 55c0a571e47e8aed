"""Staged segments: written before the write lock is taken, published by a commit.

The costly part of a write (chunking, embedding, writing vectors and
postings) needs no lock. It lands in ``segments/.staged-<owner>-<uuid>/``
with the documents' catalog rows in ``documents.json`` beside it; the
writer later gives the folder a segment name and real keys, or drops it.
``owner`` is ``<host>-<pid>`` of the process that will commit it, so a
folder whose owner died is known to be left over.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from retriever.documents import Document
from retriever.encoding.passages import Embedded
from retriever.errors import BadInputError, CorruptCollectionError
from retriever.storage.atomic import atomic_write_text
from retriever.storage.builders import IndexBuilder, TermAnalyzer
from retriever.storage.leftovers import process_gone
from retriever.storage.segment import SEGMENTS_DIR, SegmentData

STAGED_PREFIX = ".staged-"  # segments written by prepare(), not yet committed
STAGED_ROWS = "documents.json"  # their catalog rows, beside them until the commit
STAGED_MAX_AGE = 24 * 3600  # a staged folder this old, or whose process died, was left by a killed job


EmbedFn = Callable[[list[Document]], dict[str, Embedded]]


def this_owner() -> str:
    """``<host>-<pid>`` of this process: the owner of the folders it stages."""
    return f"{socket.gethostname()}-{os.getpid()}"


def stage(
    root: Path,
    docs: list[Document],
    embedded: dict[str, Embedded],
    analyzer: TermAnalyzer,
    policy: IndexBuilder,
    owner: str | None = None,
) -> Path:
    """Write ``docs`` as a staged segment (placeholder keys) with their catalog rows beside it.

    Returns:
        The new folder, ``segments/.staged-<owner>-<uuid>`` inside ``root``.
    """
    data = SegmentData.from_documents(
        np.arange(len(docs)),
        [doc.title for doc in docs],
        [doc.text for doc in docs],
        [embedded[doc.id].spans for doc in docs],
        np.concatenate([embedded[doc.id].vectors for doc in docs]),
        analyzer,
    )
    folder = Path(root) / SEGMENTS_DIR / f"{STAGED_PREFIX}{owner or this_owner()}-{uuid.uuid4().hex}"
    try:
        data.write(folder, policy)
        rows = [
            {
                "id": doc.id,
                "title": doc.title,
                "metadata": doc.metadata,
                "content_hash": doc.content_hash(),
                "text_hash": doc.text_hash(),
                "chunks": len(embedded[doc.id].spans),
                "model": embedded[doc.id].model,
            }
            for doc in docs
        ]
        atomic_write_text(folder / STAGED_ROWS, json.dumps(rows, ensure_ascii=False))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def staged_rows(folder: Path) -> list[dict[str, Any]]:
    """The catalog rows written beside a staged segment, one per document row."""
    try:
        return json.loads((folder / STAGED_ROWS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptCollectionError(f"staged segment {folder} is incomplete: {exc}") from None


def check_staged(root: Path, folders: Sequence[Path]) -> None:
    """Raise ``BadInputError`` unless every folder is a staged segment of ``root`` that still exists."""
    segments = (Path(root) / SEGMENTS_DIR).resolve()
    for folder in folders:
        if folder.parent.resolve() != segments or not folder.name.startswith(STAGED_PREFIX):
            raise BadInputError(f"{folder} is not a staged segment of {root}")
        if not folder.is_dir():
            raise BadInputError(f"staged segment {folder} is gone (committed already, or removed)")


def may_be_alive(folder: Path) -> bool:
    """Whether the process that staged ``folder`` may still use it.

    On this host that is whether the process lives; elsewhere, whether the
    folder is younger than ``STAGED_MAX_AGE``.
    """
    host, pid, _ = (folder.name[len(STAGED_PREFIX) :].rsplit("-", 2) + ["", ""])[:3]
    if host == socket.gethostname() and pid.isdigit():
        return not process_gone(int(pid))
    try:
        return time.time() - folder.stat().st_mtime < STAGED_MAX_AGE
    except OSError:
        return False
