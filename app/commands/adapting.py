"""``semsearch adapt``: adapt a collection's encoder to its own documents, without labels (``training.adapt``).

``-c DIR`` trains on the collection's documents (into
``DIR/models/adapted-g<generation>``, or ``-o MODEL``) and, when the adapted
model wins the check, re-embeds the collection with it and switches to it in
one generation (``--dry-run``: train and check only). ``--corpus PATH -o
MODEL`` first indexes PATH (anything ``index`` reads, BEIR folders included)
into ``MODEL/corpus-collection`` with the base model, then trains on it.
Either way the model directory is one that ``--model`` accepts everywhere,
and the command prints the held-out check: how well the base model and the
adapted one find the source documents of pseudo-queries kept out of training.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from app.commands.base import EXIT_FAILURE, EXIT_OK, UsageError, add_commands

CORPUS_COLLECTION = "corpus-collection"


def register(sub) -> None:
    """Add ``adapt`` to the command's subparsers."""
    add_commands(sub, [("adapt", "adapt a collection's encoder to its own documents, without labels", add_adapt_flags)])


def add_adapt_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch adapt``; defaults are ``AdaptConfig``'s."""
    from training.adapt import AdaptConfig

    defaults = {f.name: f.default for f in fields(AdaptConfig) if f.name != "output_dir"}
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("-c", "--collection", metavar="DIR", help="adapt to this collection's documents")
    source.add_argument("--corpus", nargs="+", metavar="PATH", help="adapt to these files, folders or BEIR corpora")
    p.add_argument(
        "-o",
        "--output",
        metavar="MODEL",
        help="the adapted model's directory (needed with --corpus; default with -c: DIR/models/adapted-g<generation>)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="with -c: train and check, but leave the collection on its model"
    )
    p.add_argument("--model", help="with --corpus: the base model (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument(
        "--documents",
        type=int,
        default=defaults["documents"],
        metavar="N",
        help="documents that give pseudo-queries, a seeded sample of larger collections (default %(default)s)",
    )
    p.add_argument(
        "--held-out",
        type=int,
        default=defaults["held_out"],
        metavar="N",
        help="pseudo-queries kept out of training for the check (default %(default)s)",
    )
    p.add_argument("--minutes", type=float, default=None, help="stop training after this long (a rerun resumes)")
    p.add_argument("--epochs", type=int, default=defaults["epochs"], help="passes over the pairs (default %(default)s)")
    p.add_argument("--lr", type=float, default=defaults["lr"], help="peak learning rate (default %(default)g)")
    p.add_argument(
        "--batch-size", type=int, default=defaults["batch_size"], help="pairs per step (default %(default)s)"
    )
    p.add_argument(
        "--hard-negatives",
        action="store_true",
        help="add a negative from the collection's hybrid search to each pair (off: it lowered SciFact)",
    )
    p.add_argument("--seed", type=int, default=defaults["seed"])
    p.add_argument("--fresh", action="store_true", help="start over instead of resuming what OUTPUT holds")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run_adapt)


def run_adapt(args) -> int:
    """Adapt, print the check; exit 1 when the adapted model lost it (the model is written all the same)."""
    from retriever import Collection
    from retriever.storage.cleanup import MODELS_DIR
    from training.adapt import AdaptConfig, adapt

    if args.output is None and not args.collection:
        raise UsageError("--corpus needs -o MODEL: the directory the adapted model goes to")
    collection = Collection.open(args.collection) if args.collection else None
    output = (
        Path(args.output).expanduser()
        if args.output
        else collection.root.resolve() / MODELS_DIR / f"adapted-g{collection.reader.current().generation}"
    )
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o {output}: a file is in the way")
    config = AdaptConfig(
        str(output),
        documents=args.documents,
        held_out=args.held_out,
        batch_size=args.batch_size,
        lr=args.lr,
        epochs=args.epochs,
        minutes=args.minutes,
        seed=args.seed,
        resume=not args.fresh,
        hard_negatives=args.hard_negatives,
    )
    config.validate()
    quiet = args.json
    if collection is None:
        collection = corpus_collection(args.corpus, output / CORPUS_COLLECTION, args.model, progress=not quiet)
    with collection:
        report = adapt(collection, config, switch=bool(args.collection) and not args.dry_run, progress=not quiet)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print_report(report, args.collection)
    return EXIT_OK if report.better else EXIT_FAILURE


def print_report(report, collection_dir: str | None) -> None:
    """The check's before and after, the run's time, and what became of the model (on stderr)."""
    verdict = "better" if report.better else "NOT better: the current model stays"
    print(
        f"semsearch: held-out check, mean reciprocal rank of {report.held_out} pseudo-queries' sources: "
        f"{report.before_mrr:.4f} with {Path(report.base_model).name}, {report.after_mrr:.4f} adapted "
        f"({verdict})",
        file=sys.stderr,
    )
    print(
        f"semsearch: {report.steps} steps on {report.trained_on} pseudo-queries; seconds "
        + ", ".join(f"{k} {v:g}" for k, v in report.seconds.items())
        + f"; model in {report.model_dir}",
        file=sys.stderr,
    )
    if report.switched:
        print(
            f"semsearch: {collection_dir} now searches with the adapted model: {report.switched['chunks']:,} "
            f"chunks re-embedded in {report.switched['segments']} segment(s), generation "
            f"{report.switched['generation']}",
            file=sys.stderr,
        )
    elif collection_dir and report.better:
        print(
            f"semsearch: --dry-run: {collection_dir} keeps its model (run without --dry-run to switch)", file=sys.stderr
        )


def corpus_collection(paths: list[str], root: Path, model: str | None, progress: bool):
    """A collection of ``paths`` at ``root`` with the base ``model``, created or brought up to date."""
    from indexer.job import index_paths
    from retriever import Collection

    collection = Collection.open(root) if (root / "manifest.json").is_file() else Collection.create(root, model)
    report = index_paths(collection, paths, prune=True, progress=progress)
    if not len(collection):
        collection.close()
        raise UsageError(f"--corpus {' '.join(paths)}: no document could be indexed ({report})")
    return collection
