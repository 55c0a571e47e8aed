"""``semsearch index``: files, directories or BEIR corpora into a collection."""

from __future__ import annotations

import argparse
import json
import os
import sys

from app.commands.base import EXIT_BAD_INPUT, EXIT_OK, UsageError, add_collection_arg, add_commands

MB = 1024 * 1024


def register(sub) -> None:
    """Add ``index`` to the command's subparsers."""
    add_commands(sub, [("index", "index files, directories or BEIR corpora into a collection", add_index_flags)])


def add_index_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch index``: what to read, into which collection, and how the run goes."""
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files or directories; every file is recognised by its content and name (text, Markdown, "
        "HTML, PDF, JSONL, CSV, office, e-book, mail, images, compressed files and archives), and the "
        "report counts what was not read, by type and reason",
    )
    add_collection_arg(p)
    add_selection_flags(p)
    add_new_collection_flags(p)
    add_run_flags(p)
    p.set_defaults(handler=run_index)


def add_selection_flags(p: argparse.ArgumentParser) -> None:
    """Which files are read, and which record fields hold the id, title and text."""
    p.add_argument(
        "--include", action="append", default=[], metavar="GLOB", help="only files matching GLOB (repeatable)"
    )
    p.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="leave out files matching GLOB (repeatable)"
    )
    p.add_argument("--id-field", help="JSONL/CSV field holding the id (default: id, then _id)")
    p.add_argument("--title-field", help="JSONL/CSV field holding the title (default: title)")
    p.add_argument("--text-field", help="JSONL/CSV field holding the text (default: text, body, content)")


def add_new_collection_flags(p: argparse.ArgumentParser) -> None:
    """The model, catalog and index codes of a collection the command creates."""
    from retriever.search.vector_index import CODES

    p.add_argument(
        "--model",
        help="model directory or name, used when the collection is created "
        "(default: the packaged all-MiniLM-L6-v2); must match an existing collection's model",
    )
    p.add_argument(
        "--catalog-url",
        help="SQLAlchemy URL for the catalog of a new collection (default: SQLite inside DIR), "
        "e.g. postgresql+psycopg://user@host:5432/db; the password comes from SEMSEARCH_CATALOG_PASSWORD "
        "or the file named by SEMSEARCH_CATALOG_PASSWORD_FILE and is never stored",
    )
    p.add_argument(
        "--index-codes",
        choices=CODES,
        help="for a new collection: what large segments' vector indexes hold: compressed 1-bit codes "
        "rescored from float32 rows on disk (default), float32 vectors, or always compressed, small segments too",
    )
    p.add_argument(
        "--lang",
        metavar="CODE",
        help="for a new collection: the language (ISO 639-1, default en) of a "
        "document too short, or too unsure, to detect its language from",
    )
    p.add_argument(
        "--shards",
        type=int,
        metavar="N",
        help="for a new collection: spread its documents over N shard collections, placed by a hash of their "
        "ids, searched as one (docs/operations/shards.md); an existing sharded collection is found by itself",
    )


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """How the run goes: pruning, batches, the file-size limit, Ray, and the report; defaults are the indexer's."""
    from indexer.job import DEFAULT_BATCH_DOCS
    from indexer.loaders import DEFAULT_MAX_BYTES

    p.add_argument("--prune", action="store_true", help="remove documents whose files or records are gone")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        metavar="N",
        help=f"documents per atomic commit (default {DEFAULT_BATCH_DOCS})",
    )
    p.add_argument(
        "--max-file-mb",
        type=float,
        default=DEFAULT_MAX_BYTES / MB,
        metavar="MB",
        help="skip single-document files (and archive members) larger than this (default %(default)g); "
        "JSONL, CSV, mailboxes and archives are streamed, whatever their size",
    )
    p.add_argument(
        "--ocr-lang",
        metavar="LANGS",
        help="Tesseract languages scans are read in, e.g. eng+deu "
        "(default eng, or $SEMSEARCH_OCR_LANG); each needs its Debian package tesseract-ocr-LANG",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="embed in a Ray actor pool: on this machine, or on the running cluster at ADDRESS "
        "(needs pip install 'semsearch[ray]')",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="with --ray: actors, one model each (default: this machine's cores, or the cluster's CPUs)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON on stdout (what was skipped or not read, grouped by type and reason, included)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run_index(args) -> int:
    """Index ``args.paths``; exit 2 when a file, member or record failed (files passed over for what they are, such
    as hidden ones or formats nothing reads, are reported, not failures)."""
    from indexer.job import DEFAULT_BATCH_DOCS, index_paths
    from indexer.loaders import FieldMap
    from retriever.collection import Collection
    from retriever.collection_info import dense_language_note

    check_index_args(args)
    with open_or_create(args) as collection:
        report = index_paths(
            collection,
            args.paths,
            include=args.include,
            exclude=args.exclude,
            fields=FieldMap(id=args.id_field, title=args.title_field, text=args.text_field),
            prune=args.prune,
            batch_docs=args.batch_size or DEFAULT_BATCH_DOCS,
            max_bytes=int(args.max_file_mb * MB),
            progress=not args.quiet and not args.json,
            engine="local" if args.ray is None else "ray",
            ray_address=None if args.ray in (None, "local") else args.ray,
            workers=args.workers,
        )
        note = dense_language_note(collection) if isinstance(collection, Collection) else sharded_note(collection)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    print(report.summary(), file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
    return EXIT_BAD_INPUT if report.skipped else EXIT_OK


def check_index_args(args) -> None:
    """Refuse flag combinations that cannot work, before the collection is touched.

    Raises:
        UsageError: a non-positive ``--max-file-mb``, ``--workers`` without
            ``--ray``, or ``--ray`` without Ray installed.
    """
    from retriever.sharding import is_sharded

    if args.max_file_mb <= 0:
        raise UsageError("--max-file-mb must be positive")
    if args.workers is not None and (args.ray is None or args.workers < 1):
        raise UsageError("--workers needs --ray and a positive number")
    if args.ocr_lang:
        configure_scans(args.ocr_lang)
    if args.ray is not None and (getattr(args, "shards", None) is not None or is_sharded(args.collection)):
        raise UsageError("--ray does not write sharded collections yet: index them without --ray")
    if args.ray is not None:
        try:
            import indexer.ray_job  # noqa: F401  (fails here, before the collection is touched)
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'semsearch[ray]'") from None


def configure_scans(languages: str) -> None:
    """Read scans in ``languages`` in this process and in Ray workers (``$SEMSEARCH_OCR_LANG``).

    Raises:
        UsageError: a language is malformed or its Tesseract data is not installed, or Tesseract is missing.
    """
    from indexer.loaders.ocr import LANGUAGES_ENV, OcrSettings, check_ocr, configure_ocr
    from retriever.errors import BadInputError

    try:
        settings = OcrSettings(languages=languages)
        check_ocr(settings)
    except BadInputError as exc:
        raise UsageError(f"--ocr-lang: {exc}") from None
    configure_ocr(settings)
    os.environ[LANGUAGES_ENV] = "+".join(settings.languages)


def open_or_create(args):
    """The collection at ``args.collection``: opened with ``--model`` (a sharded one too), or created
    (``--catalog-url`` only then; sharded with ``--shards``)."""
    from retriever.collection import Collection
    from retriever.search.vector_index import IndexPolicy
    from retriever.sharding import ShardedCollection, is_sharded
    from retriever.storage.manifest import MANIFEST

    shards = getattr(args, "shards", None)
    if os.path.exists(os.path.join(args.collection, MANIFEST)) or is_sharded(args.collection):
        if args.catalog_url or args.index_codes or args.lang or shards is not None:
            raise UsageError(
                "--catalog-url, --index-codes, --lang and --shards apply only when a collection is created"
            )
        if is_sharded(args.collection):
            return ShardedCollection.open(args.collection, args.model)
        return Collection.open(args.collection, args.model)
    policy = IndexPolicy(codes=args.index_codes) if args.index_codes else None
    if shards is not None:
        if args.catalog_url:
            raise UsageError("--shards keeps a SQLite catalog in each shard: --catalog-url cannot go with it")
        return ShardedCollection.create(
            args.collection, args.model, shards=shards, index_policy=policy, language=args.lang or "en"
        )
    return Collection.create(
        args.collection, args.model, catalog_url=args.catalog_url, index_policy=policy, language=args.lang or "en"
    )


def sharded_note(collection) -> str | None:
    """``collection_info.english_only_note`` of a ``ShardedCollection``, from its documents per language."""
    from retriever.collection_info import english_only_note

    if not collection.analyzer.multilingual:
        return None
    return english_only_note(collection.model["name"], collection.info()["languages"]["documents"])
