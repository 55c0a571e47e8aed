"""A scratch copy of a collection, to try something on it (another model, other settings) and throw it away.

``scratch_copy`` takes a snapshot of the collection's last committed generation into a temporary folder
(segment files hard-linked where the file system allows, so it costs the catalog and little else), opens it,
re-embeds it with another model when given one (``Collection.switch_model``: chunks, ids and the BM25 side
kept), hands it over, and removes it afterwards. Nothing of the collection itself changes. A copy left
behind by a killed process is swept by a later ``scratch_copy`` into the same folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from retriever.errors import BadInputError
from retriever.storage.leftovers import left_over
from retriever.storage.model_switch import check_switchable

#: A scratch folder's name: ``.<collection>.scratch-<pid>-<random>``, beside the collection by default.
SCRATCH_FOLDER = re.compile(r"\..+\.scratch-(?P<pid>[0-9]+)-[A-Za-z0-9_]+")


@contextlib.contextmanager
def scratch_copy(
    collection: Any, embedder: Any = None, folder: str | os.PathLike | None = None, *, progress: bool = False
) -> Iterator[Any]:
    """An opened copy of ``collection`` (re-embedded with ``embedder`` when given), removed when the block ends.

    The copy is a snapshot of the collection's last committed generation: same documents, ids, chunks,
    BM25 side, judgments and settings. Writes to it (a model switch, ``upsert``, ``compact``) never reach the
    collection, and writers of the collection go on while it is taken. The copy is closed and its folder
    removed when the block ends, however it ends.

    Args:
        collection: An open ``Collection``.
        embedder: An ``Embedder`` the copy switches to (every chunk re-embedded with it, as
            ``Collection.switch_model`` does); ``None`` (default): the copy keeps the collection's model.
            Re-embedding is skipped when ``embedder`` has the weights of the collection's model already.
        folder: An existing folder outside the collection where the scratch folder
            ``.<name>.scratch-<pid>-<random>`` is made. Default: beside the collection, so that segment files
            are hard-linked (the system's temporary folder when that one cannot be written); on another file
            system than the collection's they are copied, which costs their size in disk and time.
        progress: Progress bars on stderr while re-embedding.

    Yields:
        The copy, an open collection of the same class as ``collection``.

    Raises:
        ModelMismatchError: ``embedder`` splits text into other tokens than the collection's model, or reads
            fewer tokens than its chunks hold (a model switch needs the same chunks).
        BadInputError: ``folder`` does not exist, or lies inside the collection.
        StorageFaultError: The disk filled up while the copy was made.
    """
    switching = embedder is not None and embedder.weights_sha256 != collection.model["sha256"]
    if switching:  # refused before anything is copied
        check_switchable(collection.embedder, embedder, collection.manifest.chunking["window_tokens"])
    work = _scratch_folder(Path(collection.root), None if folder is None else Path(folder))
    try:
        collection.snapshot(work / "collection")
        with type(collection).open(work / "collection", collection.embedder) as copy:
            if switching and embedder.weights_sha256 != copy.model["sha256"]:
                copy.switch_model(embedder, progress=progress)
            yield copy
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _scratch_folder(root: Path, folder: Path | None) -> Path:
    """A new, empty scratch folder in ``folder`` (or beside ``root``), after sweeping the ones killed processes
    left there."""
    if folder is not None and not folder.is_dir():
        raise BadInputError(f"folder {folder} does not exist")
    if folder is not None and folder.resolve().is_relative_to(root.resolve()):
        raise BadInputError(f"folder {folder} is inside the collection {root}; a scratch copy goes outside it")
    places = [folder] if folder is not None else [root.resolve().parent, Path(tempfile.gettempdir())]
    for place in places[:-1]:
        sweep_scratch_folders(place)
        with contextlib.suppress(OSError):  # not writable here: the next place
            return Path(tempfile.mkdtemp(prefix=f".{root.name[:100]}.scratch-{os.getpid()}-", dir=place))
    sweep_scratch_folders(places[-1])
    return Path(tempfile.mkdtemp(prefix=f".{root.name[:100]}.scratch-{os.getpid()}-", dir=places[-1]))


def sweep_scratch_folders(folder: Path) -> list[Path]:
    """Remove the scratch folders in ``folder`` that killed processes left (``leftovers.left_over``).

    Returns:
        The folders removed.
    """
    removed = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for path in entries:
        match = SCRATCH_FOLDER.fullmatch(path.name)
        if match and path.is_dir() and not path.is_symlink() and left_over(path, int(match["pid"])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
