"""``semsearch learn``: fine-tune a collection's encoder and choose its hybrid settings from its judgments.

semsearch learn -c DIR                  # cross-validate, adopt what wins (model and/or settings)
semsearch learn -c DIR --dry-run        # measure and report only
semsearch learn -c DIR --settings-only  # choose the fusion settings, leave the model
semsearch learn -c DIR --minutes 30     # stop after about 30 minutes; run again to resume

Exit status 0 when the run finished (whether or not anything changed), 1 when
``--minutes`` stopped it first.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields

from app.commands.base import EXIT_FAILURE, EXIT_OK, add_collection_arg, add_commands
from app.commands.maintenance import search_settings_line


def register(sub) -> None:
    """Add ``learn`` to the command's subparsers."""
    add_commands(
        sub,
        [
            (
                "learn",
                "fine-tune the encoder and choose the fusion settings from the collection's judgments",
                add_learn_flags,
            )
        ],
    )


def add_learn_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch learn``; defaults are ``LearnConfig``'s."""
    from training.learning import LearnConfig

    defaults = {f.name: f.default for f in fields(LearnConfig)}
    add_collection_arg(p)
    p.add_argument("--folds", type=int, default=defaults["folds"], help="cross-validation folds (default %(default)s)")
    p.add_argument(
        "--min-gain",
        type=float,
        default=defaults["min_gain"],
        help="nDCG@10 the winner must gain over the current collection (default %(default)g)",
    )
    p.add_argument("--settings-only", action="store_true", help="choose the hybrid settings only; keep the model")
    p.add_argument("--dry-run", action="store_true", help="measure and report; change nothing")
    p.add_argument("--epochs", type=int, default=None, help="passes over the pairs (default: about 60 steps)")
    p.add_argument("--lr", type=float, default=defaults["lr"], help="peak learning rate (default %(default)g)")
    p.add_argument(
        "--batch-size", type=int, default=defaults["batch_size"], help="pairs per step (default %(default)s)"
    )
    p.add_argument(
        "--no-hard-negatives",
        dest="hard_negatives",
        action="store_false",
        help="train with in-batch negatives only (default: a judged or mined hard negative per pair)",
    )
    p.add_argument("--minutes", type=float, default=None, help="stop after about this long (a rerun resumes)")
    p.add_argument("--work", metavar="DIR", help="work folder (default ~/.cache/semsearch/learn/<collection uuid>)")
    p.add_argument("--fresh", action="store_true", help="start over instead of resuming the work folder")
    p.add_argument("--seed", type=int, default=defaults["seed"])
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run_learn)


def run_learn(args) -> int:
    """Learn, print the cross-validated figures and what changed."""
    from retriever import Collection
    from training.learning import LearnConfig, learn

    config = LearnConfig(
        work_dir=args.work,
        folds=args.folds,
        train_model=not args.settings_only,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        hard_negatives=args.hard_negatives,
        min_gain=args.min_gain,
        minutes=args.minutes,
        seed=args.seed,
        resume=not args.fresh,
    )
    config.validate()
    with Collection.open(args.collection) as collection:
        report = learn(collection, config, switch=not args.dry_run, progress=not args.json)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print_report(report)
    return EXIT_OK if report.finished else EXIT_FAILURE


def print_report(report) -> None:
    """The candidates' cross-validated nDCG@10, the verdict and the time, on stderr."""
    figures = ", ".join(f"{name} {value:.4f}" for name, value in report.cv.items())
    print(
        f"semsearch: {report.queries} judged queries ({report.judgments} judgments), {report.folds} folds; "
        f"cross-validated hybrid nDCG@10: {figures}",
        file=sys.stderr,
    )
    before, after = report.settings_before, report.settings_after
    if report.switched:
        print(f"semsearch: the collection now searches with the fine-tuned model {report.model_after}", file=sys.stderr)
    if after != before:
        print(
            f"semsearch: search settings {search_settings_line(before)} -> {search_settings_line(after)}",
            file=sys.stderr,
        )
    seconds = sum(report.seconds.values())
    print(f"semsearch: {report.reason} ({seconds:.0f} s)", file=sys.stderr)
