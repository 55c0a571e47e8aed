"""``semsearch judge``: say which documents answer which queries; the collection keeps it.

semsearch judge add "how do I renew a passport" docs/passport.md -c DIR --grade 2
semsearch judge import judgments.jsonl -c DIR                   # {"query", "id", "grade"} a line
semsearch judge import qrels/test.tsv --queries queries.jsonl -c DIR   # a BEIR qrels TSV
semsearch judge list -c DIR [--query TEXT] [--id ID] [--json]
semsearch judge remove -c DIR --query TEXT | --id ID | --all
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
import sys

from app.commands.base import EXIT_FAILURE, EXIT_OK, Parser, UsageError, add_collection_arg, add_commands

UNKNOWN_SHOWN = 5  # unknown ids printed by import; the rest are counted


def register(sub) -> None:
    """Add ``judge`` to the command's subparsers."""
    add_commands(
        sub, [("judge", "add, import, list or remove judgments: which documents answer which queries", add_judge_flags)]
    )


def add_judge_flags(p: argparse.ArgumentParser) -> None:
    """``judge add|import|list|remove``, each with ``-c/--collection``."""
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=Parser)
    add = actions.add_parser("add", help="judge one document for one query")
    add.add_argument("query", help="the query text")
    add.add_argument("id", help="a document id of the collection")
    add.add_argument(
        "--grade", type=int, default=1, choices=(0, 1, 2, 3), help="0: does not answer; 1-3: answers (default 1)"
    )
    bulk = actions.add_parser("import", help="store the judgments of a JSONL file or a BEIR qrels TSV")
    bulk.add_argument(
        "file", help='JSONL ({"query", "id", "grade"} a line) or a qrels TSV (query-id, corpus-id, score)'
    )
    bulk.add_argument("--queries", metavar="FILE", help="for a qrels TSV: the BEIR queries.jsonl naming each query id")
    bulk.add_argument("--dry-run", action="store_true", help="check and count only; store nothing")
    for action in (add, bulk):
        action.add_argument("--who", metavar="NAME", help="who judged (default: your user name)")
    listing = actions.add_parser("list", help="the stored judgments, newest first")
    remove = actions.add_parser("remove", help="remove the judgments of a query, of a document, or all")
    for action in (listing, remove):
        action.add_argument("--query", metavar="TEXT", help="only this query's judgments")
        action.add_argument("--id", dest="doc_id", metavar="ID", help="only this document's judgments")
    remove.add_argument("--all", action="store_true", help="remove every judgment")
    for action in (add, bulk, listing, remove):
        add_collection_arg(action)
        action.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=run_judge)


def run_judge(args) -> int:
    """Carry out ``add``, ``import``, ``list`` or ``remove`` on the collection's judgments."""
    from retriever.collection import Collection

    if args.action == "remove" and args.all == (args.query is not None or args.doc_id is not None):
        raise UsageError("judge remove takes --query and/or --id, or --all")
    with Collection.open(args.collection) as collection:
        if args.action == "add":
            judgment = collection.judge(args.query, args.id, args.grade, who=_who(args))
            if args.json:
                print(json.dumps(judgment.to_dict()))
            print(f"judged {judgment.doc_id!r} grade {judgment.grade} for {judgment.query!r}", file=sys.stderr)
            return EXIT_OK
        if args.action == "import":
            report = collection.import_judgments(args.file, queries=args.queries, who=_who(args), dry_run=args.dry_run)
            return _import_done(args, report.to_dict())
        if args.action == "list":
            found = collection.judgments(args.query, doc_id=args.doc_id)
            if args.json:
                print(json.dumps({"judgments": [j.to_dict() for j in found]}))
            else:
                for j in found:
                    print(f"{j.grade}\t{j.doc_id}\t{j.query}\t{j.who}\t{_when(j.at)}")
                print(f"{len(found)} judgment(s)", file=sys.stderr)
            return EXIT_OK
        removed = collection.remove_judgments(args.query, doc_id=args.doc_id, everything=args.all)
    if args.json:
        print(json.dumps({"removed": removed}))
    print(f"removed {removed} judgment(s)", file=sys.stderr)
    return EXIT_OK


def _import_done(args, report: dict) -> int:
    """Print the import report; exit 0 when something was (or would be) stored, 1 when nothing was."""
    if args.json:
        print(json.dumps(report))
    unknown = report["unknown"]
    if unknown:
        shown = ", ".join(f"line {u['line']}: {u['id']!r}" for u in unknown[:UNKNOWN_SHOWN])
        more = f" and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
        print(
            f"{len(unknown)} judgment(s) name no document of this collection, not stored: {shown}{more}",
            file=sys.stderr,
        )
    verb = "would store" if report["dry_run"] else "stored"
    print(
        f"{verb} {report['stored']} new judgment(s), replaced {report['replaced']}, "
        f"over {report['queries']} quer{'y' if report['queries'] == 1 else 'ies'}"
        + ("; dry run: nothing written" if report["dry_run"] else ""),
        file=sys.stderr,
    )
    return EXIT_OK if report["stored"] or report["replaced"] else EXIT_FAILURE


def _who(args) -> str:
    """``--who``, or the OS user name (empty when it cannot be told)."""
    if args.who is not None:
        return args.who
    try:
        return getpass.getuser()
    except (KeyError, OSError, ImportError):
        return ""


def _when(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.timezone.utc).isoformat(timespec="seconds")
