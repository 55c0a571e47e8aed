"""The batch indexing job on Ray Data: workers write segments, the driver commits.

The same job as ``indexer.job.index_paths`` (same documents, chunks, skips,
reports and ``prune``), with its costly part spread over a Ray cluster::

    files ─► read + parse (Ray tasks) ─► classify, chunk, embed, stage (actor pool,
             one model per actor) ─► driver: progress, commit groups, prune

A worker's output is a staged segment inside the collection directory
(``Collection.prepare``); only the driver publishes, a commit group of staged
segments at a time (``Collection.commit_prepared``), so a killed job keeps
every committed group and nothing half-written is ever visible. Workers skip
documents whose content the catalog already holds, so a rerun resumes without
embedding what was committed. Every worker must reach the collection directory
(and its catalog) at the same path: a shared file system on a cluster.

Ray is an optional extra: ``pip install 'semsearch[ray]'``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

try:
    import pyarrow as pa
    import ray
    import ray.data
except ImportError:
    raise ImportError("the Ray engine needs Ray: pip install 'semsearch[ray]'") from None

from tqdm.auto import tqdm

from indexer.job import MAX_BATCH_CHARS, IndexReport, _prune, _source_of
from indexer.loaders import DEFAULT_MAX_BYTES, FieldMap, LoadError, load_path, walk
from retriever.encoding import threads as thread_settings
from retriever import Collection, WriteReport
from retriever.storage.staging import STAGED_PREFIX
from retriever.documents import Document
from retriever.errors import BadInputError

WORKER_BATCH_DOCS = 128  # most documents per actor call, and so per staged segment
MAX_READ_BLOCKS = 1000  # blocks of input paths: the parallelism of reading and parsing
# Environment a worker needs from the driver (offline model loading, catalog password).
FORWARDED_ENV = (
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM", "SEMSEARCH_BACKEND",
    "SEMSEARCH_CATALOG_PASSWORD", "SEMSEARCH_CATALOG_PASSWORD_FILE",
)  # fmt: skip

# One row per document or load error, all the way from the readers to the driver.
# kind: "doc" (read), "error" (skipped), "unchanged", "metadata" (catalog-only
# change, text kept) or "staged" (in ``folder``, which holds ``folder_docs`` rows).
ROW_SCHEMA = pa.schema(
    [
        ("kind", pa.string()), ("id", pa.string()), ("title", pa.string()), ("text", pa.string()),
        ("metadata", pa.string()), ("source", pa.string()), ("reason", pa.string()),
        ("file", pa.int64()), ("folder", pa.string()), ("folder_docs", pa.int64()),
    ]
)  # fmt: skip


def _row(kind: str, file: int, source: str, **values: Any) -> dict[str, Any]:
    row = {name: "" for name in ROW_SCHEMA.names}
    return row | {"kind": kind, "file": file, "source": source, "folder_docs": 0} | values


def _doc_row(doc: Document, file: int, source: str) -> dict[str, Any]:
    metadata = json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True)
    return _row("doc", file, source, id=doc.id, title=doc.title, text=doc.text, metadata=metadata)


def _row_doc(row: dict[str, Any]) -> Document:
    return Document(row["id"], row["text"], row["title"], json.loads(row["metadata"]))


def load_files(batch: "pa.Table", fields: FieldMap, max_bytes: int, block_rows: int) -> Iterator["pa.Table"]:
    """Rows of inputs (a ``map_batches`` generator): a ``"doc"`` or ``"error"`` row per item of ``load_path``.

    Yields tables of at most ``block_rows`` rows, so that a large input (a
    BEIR corpus) streams rather than sits in memory whole.

    Args:
        batch: Columns ``file`` (index in the walk) and ``path`` (file or BEIR directory).
    """
    rows = []
    for item in batch.to_pylist():
        for loaded in load_path(Path(item["path"]), fields, max_bytes):
            if isinstance(loaded, LoadError):
                rows.append(_row("error", item["file"], loaded.source, reason=loaded.reason))
            else:
                rows.append(_doc_row(loaded, item["file"], loaded.metadata.get("source", item["path"])))
            if len(rows) == block_rows:
                yield pa.Table.from_pylist(rows, schema=ROW_SCHEMA)
                rows = []
    if rows:
        yield pa.Table.from_pylist(rows, schema=ROW_SCHEMA)


class StageWorker:
    """An actor of the pool (a ``map_batches`` class): classifies, then stages what changed.

    Holds one ``Collection`` (and so one model, loaded on the first document
    to embed). Documents the catalog holds unchanged pass as ``"unchanged"``,
    catalog-only changes as ``"metadata"``; the rest are written as staged
    segments of at most ``MAX_BATCH_CHARS`` of text each. A document that
    ``prepare`` refuses becomes an ``"error"`` row, as in the local job.

    A staged segment is handed to the driver by its name: it is renamed to
    carry the driver's host and process id, so that it lives as long as the
    driver (which commits it), not as long as this actor (which Ray may stop
    before the commit). A killed driver's segments are removed by the next writer.

    Args:
        root: The collection directory.
        owner: ``"<host>-<pid>"`` of the driver.
        threads: Encoder threads for this actor, whichever backend runs (``None``:
            the backend's default, every core this process may use).
    """

    def __init__(self, root: str, owner: str, threads: int | None = None) -> None:
        if threads:  # actors share the cores: without this, each would run a thread per core
            os.environ[thread_settings.THREADS_ENV] = str(threads)  # read by the Embedder, for every runtime
        self.collection = Collection.open(root)
        self.owner = owner

    def __call__(self, batch: "pa.Table") -> "pa.Table":
        rows = batch.to_pylist()
        docs = [row for row in rows if row["kind"] == "doc"]
        stored = self.collection.catalog.lookup([row["id"] for row in docs])
        changed = []
        for row in docs:
            doc, old = _row_doc(row), stored.get(row["id"])
            if old is not None and old.content_hash == doc.content_hash():
                row.update(kind="unchanged", text="", title="")
            elif old is not None and old.text_hash == doc.text_hash():
                row["kind"] = "metadata"
            else:
                changed.append(row)
        for group in _by_chars(changed):
            self._stage(group)
        return pa.Table.from_pylist(rows, schema=ROW_SCHEMA)

    def _stage(self, rows: list[dict[str, Any]]) -> None:
        """Stage ``rows`` as one segment; if a document is bad, one segment per good document."""
        try:
            staged = self.collection.prepare([_row_doc(row) for row in rows])
        except BadInputError:
            if len(rows) > 1:
                for row in rows:
                    self._stage([row])
            else:
                rows[0].update(kind="error", reason=str(sys.exc_info()[1]), text="", title="")
            return
        folder = staged.with_name(f"{STAGED_PREFIX}{self.owner}-{uuid.uuid4().hex}")
        os.rename(staged, folder)
        for row in rows:
            row.update(kind="staged", folder=str(folder), folder_docs=len(rows), text="", title="")


def _by_chars(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``rows`` in consecutive groups of at most ``MAX_BATCH_CHARS`` of text (at least one row each)."""
    group, chars = [], 0
    for row in rows:
        if group and chars + len(row["text"]) > MAX_BATCH_CHARS:
            yield group
            group, chars = [], 0
        group.append(row)
        chars += len(row["text"])
    if group:
        yield group


def index_paths_ray(
    collection: Collection,
    paths: Sequence[str | Path],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    fields: FieldMap = FieldMap(),
    prune: bool = False,
    batch_docs: int = 128,
    max_bytes: int = DEFAULT_MAX_BYTES,
    progress: bool = True,
    address: str | None = None,
    workers: int | None = None,
) -> IndexReport:
    """``index_paths`` on Ray: parsing in Ray tasks, embedding in an actor pool of ``workers``.

    Args:
        collection: The collection, opened or created by the caller.
        paths, include, exclude, fields, prune, max_bytes, progress: As for
            ``indexer.job.index_paths``.
        batch_docs: Documents per commit group (default 128): the driver commits
            the staged segments of about this many documents at once. An actor
            call stages at most ``WORKER_BATCH_DOCS`` of them.
        address: A running Ray cluster (``"auto"``, ``"ray://host:10001"``...);
            ``None`` starts Ray on this machine and stops it after. A Ray
            already initialised in this process is used as it is.
        workers: Actors, one model each (default: this machine's cores, or the
            cluster's CPUs less one).
    """
    if batch_docs < 1:
        raise BadInputError(f"batch size must be at least 1, got {batch_docs}")
    if workers is not None and workers < 1:
        raise BadInputError(f"workers must be at least 1, got {workers}")
    started = time.perf_counter()
    report = IndexReport()
    roots = [Path(p).expanduser() for p in paths]
    targets = [path for _root, path in walk(roots, include, exclude)]
    report.files = len(targets)
    committer = _Committer(collection, report, fields, max_bytes, targets, batch_docs)
    bar = tqdm(unit="doc", desc="indexing", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    try:
        if targets:
            with _ray_session(address, workers) as (n_workers, threads):
                ds = _pipeline(collection, targets, fields, max_bytes, batch_docs, n_workers, threads)
                for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
                    for row in batch.to_pylist():
                        committer.take(row)
                    bar.update(batch.num_rows)
                    bar.set_postfix(chunks=report.written.chunks, skipped=len(report.skipped), refresh=False)
        committer.commit()
        bar.set_postfix(chunks=report.written.chunks, skipped=len(report.skipped), refresh=False)
        _tidy(report.written)
        assert not committer.folders, f"rows of staged segments never arrived: {sorted(committer.folders)}"
        if prune:
            report.written.merge(_prune(collection, roots, committer.seen, committer.failed_sources))
    finally:
        bar.close()
        report.seconds = time.perf_counter() - started
    return report


def _tidy(written: WriteReport) -> None:
    """Each id once, and not as unchanged when it was written: duplicate ids restaged (see ``_Committer``) count once."""
    written.added, written.updated = list(dict.fromkeys(written.added)), list(dict.fromkeys(written.updated))
    done = set(written.added) | set(written.updated)
    written.unchanged = [i for i in dict.fromkeys(written.unchanged) if i not in done]


def _pipeline(
    collection: Collection, targets: list[Path], fields: FieldMap, max_bytes: int,
    batch_docs: int, workers: int, threads: int | None,
) -> "ray.data.Dataset":  # fmt: skip
    """The Ray Dataset of result rows, in the order of the inputs."""
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # the driver sees rows in walk order, as the local job
    context.enable_progress_bars = False  # the job has its own bar, counting documents
    items = [{"file": i, "path": str(path)} for i, path in enumerate(targets)]
    ds = ray.data.from_items(items, override_num_blocks=min(len(items), MAX_READ_BLOCKS))
    worker_batch = min(batch_docs, WORKER_BATCH_DOCS)
    ds = ds.map_batches(
        load_files,
        fn_kwargs={"fields": fields, "max_bytes": max_bytes, "block_rows": worker_batch},
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=0.5,
    )
    ds = ds.repartition(target_num_rows_per_block=worker_batch)  # streaming: one input still feeds every actor
    return ds.map_batches(
        StageWorker,
        fn_constructor_kwargs={
            "root": str(Path(collection.root).resolve()),
            "owner": f"{socket.gethostname()}-{os.getpid()}",
            "threads": threads,
        },
        batch_size=worker_batch,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
        udf_modifying_row_count=False,
    )


class _ray_session:
    """Ray for one job: joins ``address``, uses an initialised Ray, or starts (and stops) a local one.

    Entering gives ``(workers, torch threads per worker or None)``.
    """

    def __init__(self, address: str | None, workers: int | None) -> None:
        self.address, self.workers, self.started = address, workers, False
        self.data_log = logging.getLogger("ray.data")
        self.data_log_level = self.data_log.level

    def __enter__(self) -> tuple[int, int | None]:
        self.data_log.setLevel(max(self.data_log_level, logging.WARNING))  # the job's bar says how it goes
        cores = os.cpu_count() or 1
        env = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
        if not ray.is_initialized():
            local = self.address is None
            workers = self.workers or cores
            ray.init(
                address=self.address or "local",  # "local": a new Ray here, even where a cluster runs
                num_cpus=workers + 1 if local else None,  # one more than the actors need: readers and driver
                include_dashboard=False,
                log_to_driver=False,
                logging_level="WARNING",
                runtime_env={"env_vars": env} if env else None,
            )
            self.started = True
        if self.address is None:  # this machine: share its cores among the actors
            workers = self.workers or cores
            return workers, max(1, cores // workers)
        return self.workers or max(1, int(ray.cluster_resources().get("CPU", 2)) - 1), None

    def __exit__(self, *exc) -> None:
        self.data_log.setLevel(self.data_log_level)
        if self.started:
            ray.shutdown()


@dataclass
class _Committer:
    """The driver's side: checks rows in walk order and commits staged segments in groups."""

    collection: Collection
    report: IndexReport
    fields: FieldMap
    max_bytes: int
    targets: list[Path]
    group_docs: int
    seen: dict[str, str] = field(default_factory=dict)  # id -> source that produced it in this run
    first_file: dict[str, int] = field(default_factory=dict)  # id -> input it came from
    failed_sources: set[str] = field(default_factory=set)
    unchanged: list[str] = field(default_factory=list)
    metadata: list[Document] = field(default_factory=list)
    folders: dict[str, int] = field(default_factory=dict)  # staged folder -> rows of it not seen yet
    ready: list[str] = field(default_factory=list)  # staged folders whose every row was seen
    ready_docs: int = 0
    overridden: dict[str, dict[str, int]] = field(default_factory=dict)  # folder -> {id: input of the copy that wins}

    def take(self, row: dict[str, Any]) -> None:
        """Account for one result row; commit a group once enough staged documents are ready."""
        kind, doc_id, source = row["kind"], row["id"], row["source"]
        if kind == "error" and not doc_id:  # a file or record that did not load
            self.report.skipped.append(LoadError(source, row["reason"]))
            self.failed_sources.add(_source_of(self.report.skipped[-1]))
            return
        if kind == "staged":
            self._count_staged(row["folder"], row["folder_docs"])
        if doc_id in self.seen:
            self.report.skipped.append(LoadError(source, f"duplicate id {doc_id!r} (already read from {self.seen[doc_id]})"))
            if kind == "staged":  # its segment carries this copy: the first one is staged again after it
                self.overridden.setdefault(row["folder"], {})[doc_id] = self.first_file[doc_id]
            return
        self.seen[doc_id], self.first_file[doc_id] = source, row["file"]
        if kind == "error":  # a document the collection refused, as in the local job
            self.report.skipped.append(LoadError(source, row["reason"]))
        elif kind == "unchanged":
            self.unchanged.append(doc_id)
        elif kind == "metadata":
            self.metadata.append(_row_doc(row))
        if self.ready_docs >= self.group_docs or len(self.metadata) >= self.group_docs:
            self.commit()

    def _count_staged(self, folder: str, docs: int) -> None:
        left = self.folders.get(folder, docs) - 1
        if left:
            self.folders[folder] = left
            return
        self.folders.pop(folder, None)
        self.ready.append(folder)
        self.ready_docs += docs

    def commit(self) -> None:
        """Publish the ready staged segments in one atomic commit (catalog-only updates in another)."""
        written = self.report.written
        written.unchanged += self.unchanged
        self.unchanged = []
        if self.metadata:
            written.merge(self.collection.upsert(self.metadata))
            self.metadata = []
        if self.ready:
            folders = self.ready + self._restage_overridden()
            written.merge(self.collection.commit_prepared(folders))
            self.ready, self.ready_docs = [], 0

    def _restage_overridden(self) -> list[str]:
        """Stage again, on the driver, the first copies of ids whose later duplicates are staged.

        ``commit_prepared`` lets a later segment win, so the first copy, read
        again from its input, goes last. Rare: only duplicate ids need it.
        """
        wanted: dict[int, set[str]] = defaultdict(set)
        for folder in self.ready:
            for doc_id, file in self.overridden.pop(folder, {}).items():
                wanted[file].add(doc_id)
        docs: dict[str, Document] = {}
        for file, ids in wanted.items():
            for item in load_path(self.targets[file], self.fields, self.max_bytes):
                if isinstance(item, Document) and item.id in ids and item.id not in docs:
                    docs[item.id] = item
        return [str(self.collection.prepare(list(docs.values())))] if docs else []

