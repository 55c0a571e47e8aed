"""``semsearch shard split``: an existing collection split into a sharded one, without re-embedding."""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.base import EXIT_OK, Parser, add_collection_arg, add_commands


def register(sub) -> None:
    """Add ``shard`` (and its ``split``) to the command's subparsers."""
    add_commands(sub, [("shard", "sharded collections: split a collection into shards", add_shard_actions)])


def add_shard_actions(p: argparse.ArgumentParser) -> None:
    """The actions of ``semsearch shard``: ``split``."""
    actions = p.add_subparsers(dest="shard_action", metavar="ACTION", parser_class=Parser)
    actions.required = True
    actions.add_parser(
        "split",
        help="copy a collection into a new sharded collection (stored vectors carried, nothing re-embedded)",
        populate=add_split_flags,
    )


def add_split_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch shard split``: the source, the new directory, the number of shards."""
    from retriever.sharding import MAX_SHARDS

    add_collection_arg(p)
    p.add_argument("--into", required=True, metavar="DEST", help="new directory for the sharded collection")
    p.add_argument("--shards", required=True, type=int, metavar="N", help=f"number of shards (1 to {MAX_SHARDS})")
    p.add_argument("--json", action="store_true", help="print what the new collection holds as JSON")
    p.set_defaults(handler=run_split)


def run_split(args) -> int:
    """Split ``args.collection`` into ``args.shards`` shards at ``args.into`` and say what each shard holds."""
    from retriever.sharding import split_collection

    with split_collection(args.collection, args.into, args.shards) as split:
        counts = [len(shard) for shard in split.shards]
    if args.json:
        print(json.dumps({"path": str(args.into), "documents": sum(counts), "shards": counts}))
    print(
        f"split {args.collection} into {len(counts)} shard(s) at {args.into}: {sum(counts):,} document(s) "
        f"({', '.join(f'{n:,}' for n in counts)})",
        file=sys.stderr,
    )
    return EXIT_OK
