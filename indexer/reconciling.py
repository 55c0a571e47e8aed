"""The watcher's first pass: the collection brought level with its folders, as they are now.

``reconcile`` walks the folders (``indexer.runs.walk_targets``, the files
``semsearch index`` reads) and reads every file again: a document whose
content hash matches the stored one costs a read and a catalog look-up,
never an embedding or a commit; new and changed documents are written in
batches; then the documents of files that are gone (or now left out by the
patterns), and the records gone from changed files, are deleted. It is the
same pass as ``semsearch index --prune``, so whatever happened while no
watcher ran (a watcher killed with SIGKILL included) is found.

What it holds while it runs: the walk's list of paths (one per file), the
id of every document read (with its source), one batch of documents (at
most ``batch_docs`` documents and ``MAX_BATCH_CHARS`` of text), and at the
end the ids and sources of the stored documents under the folders. Texts
are let go once their batch is written.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from indexer.runs import IndexReport, walk_targets
from indexer.syncing import SyncOptions, SyncPass
from retriever import Collection, WriteReport


def reconcile(
    collection: Collection,
    folders: Sequence[Path],
    options: SyncOptions = SyncOptions(),
    *,
    stop: threading.Event | None = None,
    on_write: Callable[[WriteReport], None] | None = None,
    leave_out: Sequence[Path] = (),
    on_path: Callable[[Path], None] | None = None,
) -> IndexReport | None:
    """Write what changed in ``folders`` since the collection last saw them, and delete what is gone.

    Args:
        collection: The collection kept in step with ``folders``.
        folders: Real (symlink-free) absolute folder paths.
        options: Patterns, record fields, size limit and batch size.
        stop: When set, the pass stops before the next file; what was
            committed stays, nothing is deleted, and ``None`` is returned.
        on_write: Told each commit that changed something.
        leave_out: Folders whose files are never read (the collection's own directory).
        on_path: Told each file (or BEIR folder) before it is read.

    Returns:
        What the pass did, or ``None`` when ``stop`` ended it early.

    Raises:
        BadInputError: A folder does not exist.
        CollectionLockedError: Another writer held the lock too long (what was committed stays).
    """
    sync = SyncPass(collection, options, stop, on_write)
    found = walk_targets(list(folders), options.include, options.exclude, sync.report, sync.sightings)
    if not sync.read(_outside(found, leave_out, on_path or (lambda _path: None))):
        return None
    return sync.finish(folders=[str(folder) for folder in folders])


def _outside(
    found: Iterable[tuple[Path, Path]], leave_out: Sequence[Path], on_path: Callable[[Path], None]
) -> Iterator[Path]:
    """The walked paths that lie in none of ``leave_out``, each told to ``on_path`` first."""
    for _root, path in found:
        if not any(path == folder or folder in path.parents for folder in leave_out):
            on_path(path)
            yield path
