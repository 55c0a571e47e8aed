"""Switching a collection to another model in one generation (``Collection.switch_model``).

Every segment is written again with the new model's vectors: the same
documents, keys, chunks, text and postings (nothing is chunked or analysed
again), new vectors and vector index. Embedding, the costly part, runs
without the write lock into staged folders. Under the lock, segments that
appeared meanwhile are re-embedded too, rows deleted meanwhile are deleted
in the new segments as well, the manifest records the new model from the next
generation on (``Manifest.switched``), and one publish replaces every
segment. Until then the old model and vectors serve every search. A process
killed before the publish leaves them in force: the next writer drops the
manifest's pending switch (``Manifest.without_pending``) and the staged folders.

The new model must chunk as the old one does (the same tokenizer, and a
window the collection's chunks fit), so chunks and their BM25 side stay as
they are; a model that chunks otherwise needs a new collection.
"""

from __future__ import annotations

import hashlib
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retriever.errors import BadInputError, ModelMismatchError
from retriever.storage.atomic import fsync_dir
from retriever.storage.catalog import Publish, SegmentRef
from retriever.storage.cleanup import remove_files
from retriever.storage.segment import SEGMENTS_DIR, SegmentData, segment_name, write_deletions
from retriever.storage.segment_format import DOC_CHUNKS, KEYS
from retriever.storage.segment_merge import merge
from retriever.storage.staging import STAGED_PREFIX, this_owner
from retriever.storage.view import SegmentView


@dataclass
class SwitchReport:
    """What ``switch_model`` did: the model now in force, from which generation, and what it re-embedded."""

    model: str
    sha256: str
    generation: int
    segments: int
    chunks: int
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def check_switchable(current, new, window_tokens: int) -> None:
    """Raise ``ModelMismatchError`` unless ``new`` chunks text as ``current`` does and fits ``window_tokens``.

    Args:
        current, new: ``Embedder``s: the collection's model and the one to switch to.
        window_tokens: The collection's chunk window, special tokens excluded.
    """
    if tokenizer_fingerprint(new) != tokenizer_fingerprint(current):
        raise ModelMismatchError(
            f"{new.name!r} splits text into other tokens than the collection's model {current.name!r}, so every "
            "chunk would change: index the documents into a new collection with that model instead"
        )
    if new.max_tokens - new.text_tokenizer.special < window_tokens:
        raise ModelMismatchError(
            f"{new.name!r} reads at most {new.max_tokens} tokens, fewer than the collection's chunks of "
            f"{window_tokens} (plus {new.text_tokenizer.special} special tokens)"
        )


def tokenizer_fingerprint(embedder) -> str:
    """SHA-256 of the model's tokenizer (vocabulary, normaliser, pre-tokenizer) and its lower-casing."""
    tokens = embedder.text_tokenizer
    return hashlib.sha256(f"{tokens.backend.to_str()}\n{tokens.do_lower_case}".encode()).hexdigest()


def chunk_texts(data: SegmentData, titles: dict[int, str], prefix) -> list[str]:
    """What was embedded for each chunk of ``data``, in chunk order: ``prefix(title)`` and the chunk's span.

    Args:
        data: A segment's documents.
        titles: Document title by key (the catalog's).
        prefix: ``title -> text`` put in front of every chunk (``Chunker.prefix``).
    """
    texts = []
    for row, key in enumerate(data.keys.tolist()):
        text = bytes(data.text_blob[data.text_offsets[row] : data.text_offsets[row + 1]]).decode("utf-8")
        head = prefix(titles.get(key, ""))
        spans = data.spans[data.doc_chunks[row] : data.doc_chunks[row + 1]].tolist()
        texts.extend(head + text[start:end] for start, end in spans)
    return texts


def reembedded(part: SegmentView, rows: dict[int, Any], prefix, embedder, progress: bool) -> SegmentData:
    """``part``'s live documents (keys kept) with their chunks embedded by ``embedder``.

    Args:
        rows: The documents' catalog rows (``id``, ``title``) by key.

    Raises:
        BadInputError: A chunk is longer than the model's window: its document was added with vectors
            of the caller's (one chunk over its whole text), which no model embeds whole.
    """
    data = merge([part.segment], [part.deleted], vectors=False)
    texts = chunk_texts(data, {key: row.title for key, row in rows.items()}, prefix)
    counts = np.asarray(embedder.text_tokenizer.count(texts), dtype=np.int64)
    over = np.flatnonzero(counts > embedder.max_tokens)
    if len(over):
        key = int(data.keys[np.searchsorted(data.doc_chunks, over[0], side="right") - 1])
        raise BadInputError(
            f"document {rows[key].id!r} has a chunk of {counts[over[0]]} tokens, more than {embedder.name!r} reads "
            f"({embedder.max_tokens}; {len(over)} such chunks in all): it was added with vectors of the caller's, "
            "which a model switch cannot embed again; delete it, or add it again as text, first"
        )
    data.vectors = embedder.embed(texts, show_progress=progress)
    return data


def stage_reembedded(root: Path, data: SegmentData, policy) -> Path:
    """Write ``data`` as a staged folder (kept from cleanup while this process lives)."""
    folder = Path(root) / SEGMENTS_DIR / f"{STAGED_PREFIX}{this_owner()}-{uuid.uuid4().hex}"
    try:
        data.write(folder, policy)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def switch_model(collection, embedder, *, progress: bool = True) -> SwitchReport:
    """Re-embed every segment of ``collection`` with ``embedder`` and publish them, with the model, at once.

    Args:
        collection: An open ``retriever.Collection``.
        embedder: The ``Embedder`` to switch to (``check_switchable`` must pass).
        progress: Progress bars on stderr.

    Returns:
        The report; from its ``generation`` on, searches and writes use ``embedder``.

    Raises:
        ModelMismatchError: ``embedder`` chunks text otherwise than the collection's model.
        BadInputError: A document holds vectors of the caller's over more than the model's window.
        CollectionLockedError: Another writer held the lock too long.
    """
    started = time.monotonic()
    check_switchable(collection.embedder, embedder, collection.manifest.chunking["window_tokens"])
    prefix = collection.chunker.prefix
    writer = collection.writer
    _, before = writer.state()
    staged: dict[str, tuple[Path, np.ndarray]] = {}  # segment name -> (staged folder, rows dropped there)
    placed: list[Path] = []
    try:
        for part in before.parts:
            staged[part.ref.name] = _stage(collection, part, prefix, embedder, progress)
        with writer.locked():
            state, view = writer.state()
            for part in view.parts:  # written or merged since the first pass
                if part.ref.name not in staged:
                    staged[part.ref.name] = _stage(collection, part, prefix, embedder, progress)
            refs, chunks = _place(collection.root, view, staged, state, placed)
            manifest = collection.models.reload()
            switched = manifest.switched(embedder.identity(), state.generation + 1)
            switched.save(collection.root)  # in force only once the generation is published
            try:
                writer.publish(state, Publish(refs, state.next_key, state.next_segment + len(refs)), new_files=placed)
            except BaseException:
                _after_failed_publish(collection, state, manifest, switched, embedder, placed)
                raise
            placed.clear()
            collection.models.switched(switched, embedder)
    finally:
        remove_files(placed + [folder for folder, _ in staged.values()])  # staged for segments gone meanwhile
    return SwitchReport(
        embedder.name,
        embedder.weights_sha256,
        state.generation + 1,
        len(refs),
        chunks,
        round(time.monotonic() - started, 1),
    )


def _after_failed_publish(collection, state, manifest, switched, embedder, placed: list[Path]) -> None:
    """Settle a publish that raised: landed (an interrupt after the commit), the switch stands; not landed,
    the manifest goes back; unknown (the catalog cannot be read), everything stays for the next writer."""
    try:
        landed = collection.catalog.state().generation > state.generation
    except Exception:
        placed.clear()  # the next writer keeps or removes them, and the recorded switch, by the catalog
        return
    if landed:
        placed.clear()
        collection.models.switched(switched, embedder)
    else:
        manifest.save(collection.root)


def _stage(collection, part: SegmentView, prefix, embedder, progress: bool) -> tuple[Path, np.ndarray]:
    """``part`` re-embedded into a staged folder, and the rows it left out (deleted when it began)."""
    keys = [int(k) for k in np.asarray(part.segment.keys)]
    data = reembedded(part, collection.catalog.by_keys(keys), prefix, embedder, progress)
    return stage_reembedded(collection.root, data, collection.writer.index_policy), part.deleted


def _place(
    root: Path, view, staged: dict[str, tuple[Path, np.ndarray]], state, placed: list[Path]
) -> tuple[list[SegmentRef], int]:
    """Give the staged folders of ``view``'s segments their names (appended to ``placed``); rows deleted
    since staging start deleted.

    Returns:
        ``(segment refs of the new generation, chunks in them)``.
    """
    refs, chunks, generation = [], 0, state.generation + 1
    for number, part in enumerate(view.parts, start=state.next_segment):
        folder, dropped = staged.pop(part.ref.name)
        deleted_since = np.setdiff1d(part.deleted, dropped)
        target = Path(root) / SEGMENTS_DIR / segment_name(number)
        folder.rename(target)
        placed.append(target)
        keys = np.load(target / KEYS, mmap_mode="r")
        chunks += int(np.load(target / DOC_CHUNKS, mmap_mode="r")[-1])
        if len(deleted_since):
            rows = np.searchsorted(keys, np.asarray(part.segment.keys)[deleted_since])
            write_deletions(target, generation, rows)
        refs.append(SegmentRef(target.name, generation if len(deleted_since) else 0))
    fsync_dir(Path(root) / SEGMENTS_DIR)
    return refs, chunks
