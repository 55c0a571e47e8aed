"""The FAISS side of a collection: one index file per committed generation.

Generation ``g`` lives in ``index/vectors.<g>.faiss``. A writer builds
generation ``g + 1`` in memory, publishes its file atomically, and only then
commits ``g + 1`` in the catalog; the catalog's generation says which file is
current, so a crash between the two leaves the old generation in force.
"""

from __future__ import annotations

import re
from pathlib import Path

import faiss
import numpy as np

from retriever.atomic import atomic_write, fsync_dir
from retriever.errors import CorruptCollectionError

INDEX_DIR = "index"
FACTORY = "IDMap2,Flat"
_FILE_PATTERN = re.compile(r"^(?:vectors|bm25)\.(\d+)\.(?:faiss|npz)$")  # every per-generation file


def new_index(dim: int) -> faiss.Index:
    """An empty exact inner-product index keyed by 64-bit chunk ids."""
    return faiss.index_factory(dim, FACTORY, faiss.METRIC_INNER_PRODUCT)


def index_path(root: Path, generation: int) -> Path:
    return Path(root) / INDEX_DIR / f"vectors.{generation}.faiss"


def write_generation(root: Path, generation: int, index: faiss.Index) -> Path:
    """Publish ``index`` as ``generation``'s file (atomic, fsynced)."""
    path = index_path(root, generation)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: faiss.write_index(index, str(tmp)))
    return path


def read_generation(root: Path, generation: int) -> faiss.Index:
    """Load ``generation``'s index.

    Raises:
        FileNotFoundError: The file is gone, also when a writer removed it
            between the check and the read (the caller looks for a newer generation).
        CorruptCollectionError: The file exists but is not a readable index.
    """
    path = index_path(root, generation)
    if not path.exists():
        raise FileNotFoundError(path)
    try:
        return faiss.read_index(str(path))
    except RuntimeError as exc:
        if not path.exists():
            raise FileNotFoundError(path) from None
        raise CorruptCollectionError(f"cannot read vector index {path}: {exc}") from None


def remove_other_generations(root: Path, keep: int) -> None:
    """Delete the files (vectors and BM25) of every generation but ``keep``, and stale temporaries."""
    folder = Path(root) / INDEX_DIR
    if not folder.is_dir():
        return
    removed = False
    for path in folder.iterdir():
        match = _FILE_PATTERN.match(path.name)
        stale_tmp = path.name.startswith(".") and path.name.endswith(".tmp")
        if stale_tmp or (match and int(match.group(1)) != keep):
            path.unlink(missing_ok=True)
            removed = True
    if removed:
        fsync_dir(folder)


def search(
    index: faiss.Index, queries: np.ndarray, k: int, allowed_ids: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` inner products, optionally only among ``allowed_ids``.

    Returns:
        ``(scores, ids)``, each of shape ``(len(queries), k)``; missing slots
        have id -1.
    """
    if allowed_ids is None:
        return index.search(queries, k)
    selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed_ids, dtype=np.int64))
    return index.search(queries, k, params=faiss.SearchParameters(sel=selector))


def ids_of(index: faiss.Index) -> np.ndarray:
    """The chunk ids held by an ``IDMap2`` index."""
    return faiss.vector_to_array(index.id_map).astype(np.int64)
