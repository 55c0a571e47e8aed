"""``semsearch delete``, ``info``, ``compact``, ``upgrade``, ``check``, ``snapshot`` and ``restore``: upkeep."""

from __future__ import annotations

import argparse
import json
import sys

from app.commands.base import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, add_collection_arg, add_commands, fail


def register(sub) -> None:
    """Add ``delete``, ``info``, ``compact``, ``upgrade``, ``check``, ``snapshot`` and ``restore`` to the subparsers."""
    add_commands(
        sub,
        [
            ("delete", "delete documents by id", add_delete_flags),
            ("info", "show a collection's size, model, settings and segments", add_info_flags),
            ("compact", "merge a collection's segments into one, dropping deleted rows", add_compact_flags),
            ("upgrade", "bring an older collection up to date: its format, int8 rescoring rows", add_upgrade_flags),
            (
                "check",
                "verify every file of a collection against its checksums; --repair drops damage",
                add_check_flags,
            ),
            ("snapshot", "copy a collection's last commit to a new directory while writers go on", add_snapshot_flags),
            ("restore", "make a snapshot a live collection in a new directory", add_restore_flags),
        ],
    )


def add_delete_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch delete``: ids and ``-c``."""
    p.add_argument("ids", nargs="+", metavar="ID")
    add_collection_arg(p)
    p.set_defaults(handler=run_delete)


def add_info_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch info``: ``-c`` and ``--json``."""
    add_collection_arg(p)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=run_info)


def add_compact_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch compact``: ``-c``, ``--index-codes``."""
    from retriever.search.vector_index import CODES

    add_collection_arg(p)
    p.add_argument(
        "--index-codes",
        choices=CODES,
        help="switch what the vector indexes hold: float32 vectors, compressed 1-bit codes rescored "
        "from float32 rows on disk (large segments), or always compressed; no re-embedding",
    )
    p.add_argument(
        "--max-segment-chunks",
        type=int,
        metavar="N",
        help="largest segment written (default 1,000,000 chunks; a merge's memory grows with it)",
    )
    p.set_defaults(handler=run_compact)


def add_upgrade_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch upgrade``: ``-c`` and ``-q``."""
    add_collection_arg(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_upgrade)


def add_check_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch check``: ``-c``, ``--repair`` and ``--json``."""
    add_collection_arg(p)
    p.add_argument(
        "--repair",
        action="store_true",
        help="publish a new generation without the damaged segments' "
        "documents and print their ids (one a line) for re-indexing",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run_check)


def add_snapshot_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch snapshot``: ``-c``, the destination and ``--json``."""
    add_collection_arg(p)
    p.add_argument(
        "dest", metavar="DEST", help="new directory for the snapshot (hard links where the file system allows)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run_snapshot)


def add_restore_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch restore``: the snapshot, the new collection directory and ``--json``."""
    p.add_argument("snapshot", metavar="SNAPSHOT", help="a directory semsearch snapshot wrote")
    p.add_argument("dest", metavar="DIR", help="new directory for the live collection")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=run_restore)


def run_delete(args) -> int:
    """Delete ``args.ids``; exit 2 naming the ids that were not there."""
    from retriever.sharding import open_collection

    with open_collection(args.collection) as collection:
        report = collection.delete(args.ids)
    missing = sorted(set(args.ids) - set(report.deleted))
    print(f"deleted {len(report.deleted)} document(s)", file=sys.stderr)
    if missing:
        fail(f"not found: {', '.join(missing)}")
        return EXIT_BAD_INPUT
    return EXIT_OK


def run_info(args) -> int:
    """Print the collection's figures and this machine's encoder, as rows or JSON."""
    from retriever.sharding import open_collection

    with open_collection(args.collection) as collection:
        info = collection.info()
        encoder = collection.embedder.info()  # a run-time choice of this machine, not of the collection
    info["backend"], info["query_backend"] = encoder["backend"], encoder["query_backend"]
    if args.json:
        print(json.dumps(info))
        return EXIT_OK
    for key, value in info_rows(info, encoder):
        print(f"{key:>10}  {value}")
    return EXIT_OK


def search_settings_line(settings: dict | None) -> str:
    """``convex alpha 0.7, feedback on`` (or ``rrf, ...``): the hybrid settings a collection searches with."""
    if not settings:
        return "built in"
    fusion = "rrf" if settings["fusion"] == "rrf" else f"convex alpha {settings['alpha']:g}"
    return f"{fusion}, feedback {'on' if settings['feedback'] else 'off'}"


def info_rows(info: dict, encoder: dict) -> list[tuple[str, object]]:
    """``(label, value)`` rows of ``semsearch info`` from ``Collection.info()`` and ``Embedder.info()``."""
    chunking = info["chunking"]
    return [
        ("path", info["path"]),
        ("documents", info["documents"]),
        ("chunks", info["chunks"]),
        ("model", f"{info['model']} (dim {info['dim']}, sha256 {info['model_sha256'][:12]})"),
        (
            "backend",
            f"{encoder['backend']}"
            + (
                f" for passages, {encoder['query_backend']} for queries"
                if encoder["query_backend"] != encoder["backend"]
                else ""
            )
            + f" ({encoder['threads']} threads{', measured on this machine' if encoder.get('measured') else ''})",
        ),
        ("chunking", f"{chunking['window_tokens']} tokens, overlap {chunking['overlap_tokens']}"),
        ("index", info["index"]),
        ("catalog", info["catalog"]),
        ("languages", ", ".join(f"{code} {n}" for code, n in info["languages"]["documents"].items()) or "none"),
        (
            "taggers",
            "; ".join(
                f"{name} ({t['method']}: {', '.join(map(str, t['labels']))})" for name, t in info["taggers"].items()
            )
            or "none",
        ),
        ("judgments", f"{info['judgments']['judgments']} over {info['judgments']['queries']} queries"),
        ("search settings", search_settings_line(info.get("search_settings"))),
        ("size", f"{info['size_bytes'] / 1e6:.1f} MB"),
        ("created", info["created_at"]),
        ("updated", info["updated_at"]),
    ]


def run_compact(args) -> int:
    """Merge the segments and print the counts and sizes before and after."""
    from retriever.sharding import open_collection

    with open_collection(args.collection) as collection:
        result = collection.compact(index_codes=args.index_codes, max_segment_chunks=args.max_segment_chunks)
        codes = collection.index_policy.codes
    print(
        f"compacted {args.collection}: {result['segments_before']} segment(s) -> {result['segments_after']}, "
        f"index codes {codes}, "
        f"{result['bytes_before'] / 1e6:.1f} MB -> {result['bytes_after'] / 1e6:.1f} MB",
        file=sys.stderr,
    )
    return EXIT_OK


def run_upgrade(args) -> int:
    """Bring the collection up to date in place and print what was done."""
    from retriever.upgrading import upgrade

    print(upgrade(args.collection, progress=not args.quiet), file=sys.stderr)
    return EXIT_OK


def run_snapshot(args) -> int:
    """Take the snapshot and say what it holds."""
    from retriever.sharding import open_collection

    with open_collection(args.collection) as collection:
        report = collection.snapshot(args.dest)
    if args.json:
        print(json.dumps(report.to_dict()))
    print(
        f"snapshot of {args.collection} at generation {report.generation} in {report.path}: "
        f"{report.documents:,} document(s), {report.segments} segment(s), {report.linked} file(s) linked, "
        f"{report.copied} copied, {report.bytes / 1e6:.1f} MB, {report.seconds:.2f} s",
        file=sys.stderr,
    )
    return EXIT_OK


def run_restore(args) -> int:
    """Restore the snapshot into a new directory and say what the live collection holds."""
    from retriever.collection import Collection
    from retriever.sharding import ShardedCollection, is_sharded

    kind = ShardedCollection if is_sharded(args.snapshot) else Collection
    with kind.restore(args.snapshot, args.dest) as collection:
        info = collection.info()
    if args.json:
        print(json.dumps({"path": str(args.dest), "documents": info["documents"], "generation": info["generation"]}))
    print(
        f"restored {args.snapshot} to {args.dest}: {info['documents']:,} document(s) at generation "
        f"{info['generation']}",
        file=sys.stderr,
    )
    return EXIT_OK


def run_check(args) -> int:
    """Verify the collection; exit 0 when it is whole (or was repaired), 1 when damage or an unreadable file remains."""
    from retriever.sharding import open_collection

    with open_collection(args.collection) as collection:
        report = collection.check(repair=args.repair)
    if args.json:
        print(json.dumps(report.to_dict()))
    for damage in report.damaged:
        print(f"damaged: {damage.segment}/{damage.file}: {damage.reason}", file=sys.stderr)
    for refused in report.unreadable:
        print(f"cannot be read: {refused.segment}/{refused.file}: {refused.reason}", file=sys.stderr)
    if report.unreadable and args.repair:
        print(
            f"repair refused: {len(report.unreadable)} file(s) could not be read, so nothing was dropped; "
            "give semsearch access to them and run check again",
            file=sys.stderr,
        )
    ids = sorted({doc_id for found in report.documents.values() for doc_id in found})
    for note in getattr(report, "notes", []):
        print(f"note: {note}", file=sys.stderr)
    if report.unverified:
        print(f"no checksums recorded (written by an older semsearch): {', '.join(report.unverified)}", file=sys.stderr)
    print(
        f"checked generation {report.generation}: {report.segments} segment(s), {report.files} file(s), "
        f"{report.bytes / 1e6:.1f} MB; {len(report.damaged)} damaged file(s) holding {len(ids)} document(s)"
        + ("; repaired: those documents are gone, re-index them" if report.repaired else ""),
        file=sys.stderr,
    )
    if report.repaired and not args.json:
        print("\n".join(ids))
    return EXIT_OK if report.ok or (report.repaired and not report.unreadable) else EXIT_FAILURE
