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

This module runs the job; its parts are the rows (``indexer.ray_rows``), the
actors that classify and stage (``indexer.ray_stage``) and the driver's
accounting and commits (``indexer.ray_commit``).

Ray is an optional extra: ``pip install 'semsearch[ray]'``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Sequence

try:
    import pyarrow  # noqa: F401  (the rows of the job are Arrow tables)
    import ray
    import ray.data
except ImportError:
    raise ImportError("the Ray engine needs Ray: pip install 'semsearch[ray]'") from None

from tqdm.auto import tqdm

from indexer.loaders import DEFAULT_MAX_BYTES, FieldMap
from indexer.ray_commit import Committer
from indexer.ray_rows import load_files
from indexer.ray_stage import WORKER_BATCH_DOCS, StageWorker
from indexer.runs import IndexReport, Sightings, walk_targets
from retriever import Collection
from retriever.errors import BadInputError
from retriever.storage.catalog_url import HOSTS_ENV, hosts
from retriever.storage.staging import this_owner

MAX_READ_BLOCKS = 1000  # blocks of input paths: the parallelism of reading and parsing
# Environment a worker needs from the driver (offline model loading, where the catalog password is).
# Never the password itself: Ray stores a runtime_env and shows it. A worker reads the password from
# the file SEMSEARCH_CATALOG_PASSWORD_FILE names, or from SEMSEARCH_CATALOG_PASSWORD in its own
# environment (which a local Ray's workers inherit from this process).
FORWARDED_ENV = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "SEMSEARCH_BACKEND",
    "SEMSEARCH_CATALOG_PASSWORD_FILE",
)


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
    sightings = Sightings()
    targets = [path for _root, path in walk_targets(roots, include, exclude, report, sightings)]
    report.files = len(targets)
    committer = Committer(collection, report, fields, max_bytes, targets, batch_docs, sightings=sightings)
    bar = tqdm(unit="doc", desc="indexing", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    try:
        if targets:
            with _ray_session(address, workers, worker_env(collection.manifest.catalog_url)) as (n_workers, threads):
                ds = _pipeline(collection, targets, fields, max_bytes, batch_docs, n_workers, threads)
                for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
                    for row in batch.to_pylist():
                        committer.take(row)
                    bar.update(batch.num_rows)
                    bar.set_postfix(chunks=report.written.chunks, skipped=len(report.skipped), refresh=False)
        committer.finish()
        bar.set_postfix(chunks=report.written.chunks, skipped=len(report.skipped), refresh=False)
        if prune:
            report.written.merge(committer.sightings.prune(collection, roots))
    finally:
        bar.close()
        report.seconds = time.perf_counter() - started
    return report


def _pipeline(
    collection: Collection,
    targets: list[Path],
    fields: FieldMap,
    max_bytes: int,
    batch_docs: int,
    workers: int,
    threads: int | None,
) -> "ray.data.Dataset":
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
        fn_constructor_kwargs={"root": str(Path(collection.root).resolve()), "owner": this_owner(), "threads": threads},
        batch_size=worker_batch,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=1,
        udf_modifying_row_count=False,
    )


def worker_env(catalog_url: str | None) -> dict[str, str]:
    """The ``runtime_env`` variables of the workers: ``FORWARDED_ENV`` as set here, and the catalog's hosts.

    The catalog URL's hosts join ``SEMSEARCH_CATALOG_HOSTS`` (this driver opened it, so workers may send it
    the password they read themselves); the password never travels.

    Args:
        catalog_url: The collection's catalog URL as its manifest stores it, or ``None`` (SQLite).
    """
    from sqlalchemy.engine import make_url

    env = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
    listed = [h.strip() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip()]
    if catalog_url and not catalog_url.startswith("sqlite"):
        listed += hosts(make_url(catalog_url))
    if listed:
        env[HOSTS_ENV] = ",".join(dict.fromkeys(listed))
    return env


class _ray_session:
    """Ray for one job: joins ``address``, uses an initialised Ray, or starts (and stops) a local one.

    Entering gives ``(workers, torch threads per worker or None)``.
    """

    def __init__(self, address: str | None, workers: int | None, env: dict[str, str]) -> None:
        self.address, self.workers, self.started, self.env = address, workers, False, env
        self.data_log = logging.getLogger("ray.data")
        self.data_log_level = self.data_log.level

    def __enter__(self) -> tuple[int, int | None]:
        self.data_log.setLevel(max(self.data_log_level, logging.WARNING))  # the job's bar says how it goes
        cores = os.cpu_count() or 1
        env = self.env
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
