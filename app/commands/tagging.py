"""``semsearch tag``: label a few documents, and every document gets the label as metadata.

semsearch tag -c DIR --field topic --examples labels.jsonl            # train, label everything
semsearch tag -c DIR --field topic --examples labels.jsonl --evaluate # embeddings against TF-IDF
semsearch tag -c DIR --field topic --examples labels.jsonl --dry-run  # label counts only
semsearch tag -c DIR --field topic --stale                            # documents it has not labelled
semsearch tag -c DIR --list                                           # the collection's taggers
"""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.base import EXIT_OK, UsageError, add_collection_arg, add_commands, parameter_defaults


def register(sub) -> None:
    """Add ``tag`` to the command's subparsers."""
    add_commands(
        sub, [("tag", "learn a metadata field from a few labelled examples and tag every document", add_tag_flags)]
    )


def add_tag_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch tag``; defaults are ``Collection.tag``'s."""
    from retriever.collection import Collection
    from retriever.tagging import AUTO, METHODS

    defaults = parameter_defaults(Collection.tag)
    add_collection_arg(p)
    p.add_argument("--field", metavar="NAME", help="metadata field the labels go into")
    p.add_argument(
        "--examples", metavar="FILE", help="labelled examples, JSONL or CSV: label plus id (a document here) or text"
    )
    p.add_argument(
        "--method",
        choices=(AUTO, *METHODS),
        default=defaults["method"],
        help="embedding: logistic regression on the stored vectors; tfidf: on TF-IDF; "
        "auto: the better of the two in cross-validation (default %(default)s)",
    )
    p.add_argument(
        "--min-probability",
        type=float,
        default=defaults["min_probability"],
        metavar="P",
        help="leave the field empty below this probability (default %(default)s)",
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument("--dry-run", action="store_true", help="report the label counts; write nothing")
    action.add_argument(
        "--evaluate",
        action="store_true",
        help="cross-validate embeddings against TF-IDF on the examples; write nothing",
    )
    action.add_argument("--stale", action="store_true", help="list documents the field's tagger has not labelled")
    action.add_argument("--list", action="store_true", help="list the collection's taggers")
    p.add_argument("--folds", type=int, metavar="K", help="cross-validation folds (default 5, fewer for few examples)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_tag)


def run_tag(args) -> int:
    """Train and apply, evaluate, list stale documents, or list taggers, as the flags say."""
    from retriever.collection import Collection

    if not args.list and not args.field:
        raise UsageError("--field is required (or --list)")
    if not (args.list or args.stale) and not args.examples:
        raise UsageError("--examples FILE is required to train, evaluate or dry-run a tagger")
    with Collection.open(args.collection) as collection:
        if args.list:
            return _print(args, collection.taggers(), _taggers_text)
        if args.stale:
            ids = collection.stale_tags(args.field)
            if args.json:
                print(json.dumps(ids))
            else:
                if ids:
                    print("\n".join(ids))
                print(f"{len(ids)} document(s) without a {args.field!r} label from its tagger", file=sys.stderr)
            return EXIT_OK
        if args.evaluate:
            return _print(args, collection.evaluate_tags(args.examples, folds=args.folds).to_dict(), evaluation_text)
        report = collection.tag(
            args.field,
            args.examples,
            method=args.method,
            min_probability=args.min_probability,
            dry_run=args.dry_run,
            progress=not args.quiet,
        )
    return _print(args, report.to_dict(), report_text)


def _print(args, data: dict, as_text) -> int:
    print(json.dumps(data) if args.json else as_text(data))
    return EXIT_OK


def evaluation_text(evaluation: dict) -> str:
    """The cross-validation as a table: accuracy and macro-F1 per method, F1 per label, the choice."""
    lines = [f"{evaluation['examples']} examples"]
    scores = evaluation["scores"]
    if not scores:
        return "\n".join(
            lines + [f"no cross-validation: {evaluation['reason']}", f"tag would use: {evaluation['chosen']}"]
        )
    lines[0] += f", {evaluation['folds']}-fold stratified cross-validation"
    methods = list(scores)
    lines.append(f"{'method':<12}{'accuracy':>10}{'macro-F1':>10}")
    lines += [f"{m:<12}{scores[m]['accuracy']:>10.3f}{scores[m]['macro_f1']:>10.3f}" for m in methods]
    labels = list(scores[methods[0]]["per_label"])
    width = max(12, *(len(label) + 2 for label in labels))
    lines.append("")
    lines.append(f"{'F1 per label':<{width}}" + "".join(f"{m:>11}" for m in methods) + f"{'examples':>10}")
    for label in labels:
        row = "".join(f"{scores[m]['per_label'][label]['f1']:>11.3f}" for m in methods)
        lines.append(f"{label:<{width}}{row}{scores[methods[0]]['per_label'][label]['support']:>10}")
    lines += ["", f"tag would use: {evaluation['chosen']} ({evaluation['reason']})"]
    return "\n".join(lines)


def report_text(report: dict) -> str:
    """What ``tag`` did: the evaluation behind auto, the label counts, what was written."""
    lines = []
    if report["evaluation"] is not None:
        lines += [evaluation_text(report["evaluation"]), ""]
    lines.append(f"method: {report['method']}; {report['documents']:,} documents")
    for label, count in sorted(report["labels"].items(), key=lambda item: -item[1]):
        lines.append(f"  {label}: {count:,}")
    if report["unlabelled"]:
        lines.append(f"  (below the minimum probability, left empty): {report['unlabelled']:,}")
    if report["kept"]:
        lines.append(f"  (field written by the documents' owners, kept): {report['kept']:,}")
    if report["dry_run"]:
        lines.append("dry run: nothing written")
    else:
        lines.append(
            f"wrote {report['field']!r} and {report['field']}_probability to {report['written']:,} "
            f"document(s) in generation {report['generation']} ({report['seconds']:.1f} s); "
            "documents added from now on are tagged when they are committed"
        )
    return "\n".join(lines)


def _taggers_text(taggers: dict) -> str:
    if not taggers:
        return "no taggers"
    return "\n".join(
        f"{name}: {t['method']}, labels {', '.join(map(str, t['labels']))}; "
        f"{sum(t['examples'].values())} examples; model {t['model']['name']}; trained {t['trained_at']}"
        for name, t in taggers.items()
    )
