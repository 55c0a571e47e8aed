"""``semsearch watch``: keep a collection in step with folders, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import threading
from typing import Callable, Iterator

from app.commands.base import EXIT_BAD_INPUT, EXIT_OK, UsageError, add_collection_arg, add_commands

MB = 1024 * 1024
SHOWN_IDS = 10  # ids listed under a batch's line; the rest are counted


def register(sub) -> None:
    """Add ``watch`` to the command's subparsers."""
    add_commands(
        sub,
        [
            (
                "watch",
                "keep a collection in sync with folders: files added, changed, renamed or "
                "deleted are indexed or removed as it happens",
                add_watch_flags,
            )
        ],
    )


def add_watch_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch watch``: those of ``semsearch index`` that apply, and the settle time."""
    from app.commands.indexing import add_new_collection_flags, add_selection_flags
    from indexer.batches import DEFAULT_BATCH_DOCS
    from indexer.loaders import DEFAULT_MAX_BYTES
    from indexer.watching import DEFAULT_SETTLE_S

    p.add_argument("folders", nargs="+", metavar="DIR", help="folders to watch, recursively")
    add_collection_arg(p)
    add_selection_flags(p)  # --include, --exclude and the record fields, as index takes them
    add_new_collection_flags(p)  # --model and what a new collection is made with, as index takes them
    p.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_DOCS,
        metavar="N",
        help="documents per atomic commit (default %(default)s)",
    )
    p.add_argument(
        "--max-file-mb",
        type=float,
        default=DEFAULT_MAX_BYTES / MB,
        metavar="MB",
        help="skip single-document files (and archive members) larger than this (default %(default)g)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=DEFAULT_SETTLE_S,
        metavar="SECONDS",
        help="read a file once it has had no change for SECONDS (default %(default)g)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="bring the collection level with the folders, then exit (exit 2 when something was skipped)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per event on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="print only batches that changed something, and errors")
    p.set_defaults(handler=run_watch)


def run_watch(args) -> int:
    """Reconcile, then watch until Ctrl-C or SIGTERM (exit 0); with ``--once``, reconcile and exit."""
    from app.commands.indexing import open_or_create
    from indexer.loaders import FieldMap
    from indexer.syncing import SyncOptions
    from indexer.watching import check_folders, watch

    if args.max_file_mb <= 0 or args.batch_size < 1 or not args.settle > 0:
        raise UsageError("--max-file-mb and --settle must be positive, and --batch-size at least 1")
    folders = check_folders(args.folders)  # before a collection is created
    options = SyncOptions(
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        fields=FieldMap(id=args.id_field, title=args.title_field, text=args.text_field),
        max_bytes=int(args.max_file_mb * MB),
        batch_docs=args.batch_size,
    )
    stop = threading.Event()
    with stopping_on_signals(stop), open_or_create(args) as collection:
        report = watch(
            folders,
            collection,
            stop=stop,
            options=options,
            settle_s=args.settle,
            on_event=event_printer(args.json, args.quiet),
            once=args.once,
        )
    return EXIT_BAD_INPUT if report is not None and report.skipped else EXIT_OK


@contextlib.contextmanager
def stopping_on_signals(stop: threading.Event) -> Iterator[None]:
    """Within it, SIGINT and SIGTERM set ``stop``, and a second one interrupts at once; the old handlers come
    back after. Only the main thread takes signals: elsewhere it changes nothing."""

    def handle(_number: int, _frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {number: signal.signal(number, handle) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def event_printer(as_json: bool, quiet: bool = False) -> Callable:
    """A ``WatchEvent`` callback: JSON lines on stdout (``as_json``), else lines on stderr."""

    def tell(event) -> None:
        if as_json:
            print(json.dumps(event_dict(event), ensure_ascii=False), flush=True)
        else:
            lines = event_lines(event)
            if lines and (not quiet or event.kind in ("batch", "retry")):
                print("\n".join(lines), file=sys.stderr, flush=True)

    return tell


def event_dict(event) -> dict:
    """An event as one JSON object: its kind, the report's counts (and, for a batch or a commit, its ids), the
    message."""
    out: dict = {"event": event.kind}
    if event.kind in ("reconciling", "watching"):
        out["folders"] = list(event.folders)
    if event.report is not None:
        out |= event.report.to_dict()
    if event.kind in ("batch", "written"):  # the first pass's whole report gives counts only
        written = event.report.written
        out |= {"added_ids": written.added, "updated_ids": written.updated, "deleted_ids": written.deleted}
    if event.message:
        out["message"] = event.message
    return out


def event_lines(event) -> list[str]:
    """What a person reads of an event: one status line, then the ids it wrote and what it skipped."""
    head = "semsearch watch:"
    if event.kind == "reconciling":
        return [f"{head} reading {', '.join(event.folders)} for what changed since the last run"]
    if event.kind == "watching":
        return [f"{head} watching {', '.join(event.folders)} (Ctrl-C or SIGTERM stops)"]
    if event.kind == "stopped":
        return [f"{head} stopped"]
    if event.kind == "retry":
        return [f"{head} not written yet: {event.message}"]
    written, report = event.report.written, event.report
    counts = (
        f"{len(written.added)} added, {len(written.updated)} updated, {len(written.deleted)} deleted "
        f"({written.chunks} chunk(s) embedded)"
    )
    if event.kind == "written":
        return [f"{head} {counts}"]
    what = "first pass" if event.kind == "reconciled" else "batch"
    lines = [
        f"{head} {what}: {report.files} file(s) read, {counts}, {len(written.unchanged)} unchanged, "
        f"{len(report.skipped)} skipped, {len(report.not_read)} not read in {report.seconds:.1f} s"
    ]
    if event.kind == "batch":
        marked = (
            [f"  + {i}" for i in written.added]
            + [f"  ~ {i}" for i in written.updated]
            + [f"  - {i}" for i in written.deleted]
        )
        lines += marked[:SHOWN_IDS] + ([f"  ... and {len(marked) - SHOWN_IDS} more"] if len(marked) > SHOWN_IDS else [])
    return lines + [f"  {line}" for line in report.summary().splitlines()[1:]]  # skipped and not read, as index says


def add_serve_watch_flags(p: argparse.ArgumentParser) -> None:
    """``serve``'s ``--watch DIR``: the served collection kept in sync with folders, in the same process."""
    p.add_argument(
        "--watch",
        action="append",
        default=[],
        metavar="DIR",
        help="keep the served collection in sync with DIR (repeatable), as `semsearch watch` does, "
        "in a thread of the server; needs one collection and one worker",
    )
    p.add_argument(
        "--watch-include",
        action="append",
        default=[],
        metavar="GLOB",
        help="with --watch: only files matching GLOB (repeatable)",
    )
    p.add_argument(
        "--watch-exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="with --watch: leave out files matching GLOB (repeatable)",
    )


def check_serve_watch(args, mounted: bool) -> None:
    """Refuse ``--watch`` with several collections or worker processes, and missing folders, before serving.

    Raises:
        UsageError: The combination cannot work, or a folder is not a directory.
    """
    from indexer.watching import check_folders
    from retriever.errors import BadInputError

    if not args.watch:
        if args.watch_include or args.watch_exclude:
            raise UsageError("--watch-include and --watch-exclude apply to --watch only")
        return
    if mounted or args.workers > 1:
        raise UsageError("--watch keeps one served collection in sync: serve one collection (-c DIR) with one worker")
    try:
        check_folders(args.watch)
    except BadInputError as exc:
        raise UsageError(f"--watch {exc}") from None


def watch_beside(app, args) -> None:
    """Run the watcher over ``args.watch`` in a thread of the server, from its start-up to its shut-down.

    The watcher writes the served collection (``app.state.collection``): one
    model in memory, and searches see each batch as it commits. At shut-down
    it is stopped, and waited for, before the collection closes.
    """
    from indexer.syncing import SyncOptions
    from indexer.watching import check_folders

    folders = check_folders(args.watch)
    options = SyncOptions(include=tuple(args.watch_include), exclude=tuple(args.watch_exclude))
    serve_span = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def span(application):
        async with serve_span(application) as state:
            stop = threading.Event()
            thread = threading.Thread(
                target=watch_until_stopped,
                args=(folders, application.state.collection, options, stop),
                name="semsearch-watch",
                daemon=True,
            )
            thread.start()
            try:
                yield state
            finally:
                stop.set()
                await asyncio.to_thread(thread.join)

    app.router.lifespan_context = span


def watch_until_stopped(folders, collection, options, stop: threading.Event) -> None:
    """``watch`` in a server's thread: its events on stderr; a failure is said there and ends the watching only."""
    from indexer.watching import watch

    try:
        watch(folders, collection, stop=stop, options=options, on_event=event_printer(False))
    except Exception as exc:  # noqa: BLE001 - the server goes on serving what was committed
        print(f"semsearch: error: the watcher stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
