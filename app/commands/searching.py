"""``semsearch search`` (one query, ranked hits) and ``semsearch eval`` (quality on a BEIR dataset)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap

from app.commands.base import EXIT_OK, UsageError, add_collection_arg, add_commands, parameter_defaults


def register(sub) -> None:
    """Add ``search`` and ``eval`` to the command's subparsers."""
    add_commands(
        sub,
        [
            ("search", "search a collection", add_search_flags),
            ("eval", "measure retrieval quality on a BEIR-format dataset", add_eval_flags),
        ],
    )


def add_search_mode_args(parser: argparse.ArgumentParser) -> None:
    """``--mode``, ``--fusion``, ``--alpha`` and ``--no-feedback``, their choices and defaults the retriever's."""
    from retriever.collection import DEFAULT_MODE, Collection
    from retriever.search.fusion import DEFAULT_ALPHA, DEFAULT_FUSION, FUSIONS

    parser.add_argument(
        "--mode",
        choices=Collection.SEARCH_MODES,
        default=DEFAULT_MODE,
        help="dense embeddings, bm25 keywords, or hybrid: both fused (default %(default)s)",
    )
    parser.add_argument(
        "--fusion",
        choices=sorted(FUSIONS),
        default=DEFAULT_FUSION,
        help="hybrid fusion: convex combination of normalised scores, or rrf: reciprocal-rank (default %(default)s)",
    )
    parser.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA, help="dense weight for --fusion convex (default %(default)g)"
    )
    parser.add_argument(
        "--no-feedback",
        dest="feedback",
        action="store_false",
        help="hybrid: fuse once, without searching the dense side again with the query moved "
        "toward the first fusion's top documents",
    )


def add_search_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch search``; ``-k`` defaults to ``Collection.search``'s."""
    from retriever.collection import Collection
    from retriever.search.evidence import EVIDENCE_MODES

    p.add_argument("query", metavar="QUERY")
    add_collection_arg(p)
    p.add_argument(
        "-k",
        type=int,
        default=parameter_defaults(Collection.search)["k"],
        metavar="N",
        help="number of documents (default %(default)s)",
    )
    p.add_argument("--where", metavar="JSON", help='metadata filter, e.g. \'{"lang": "en", "year": {"$gte": 2020}}\'')
    add_search_mode_args(p)
    p.add_argument(
        "--lang",
        metavar="CODE",
        help="the query's language, an ISO 639-1 code such as de: keywords are "
        "matched in it, against documents in it (default: in each language the collection holds)",
    )
    p.add_argument(
        "--exact", action="store_true", help="exact vector search also in large, approximately indexed segments"
    )
    p.add_argument(
        "--evidence",
        choices=EVIDENCE_MODES,
        default=parameter_defaults(Collection.search)["evidence"],
        help="which sentences show why a document matched: scored by the query's terms (terms, default), "
        "by the model (semantic, slower), terms then the model where no term matches (auto), or none",
    )
    p.add_argument("--json", action="store_true", help="print hits as a JSON list")
    p.set_defaults(handler=run_search)


def add_eval_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch eval``; ``--split`` defaults to ``indexer.beir.evaluate``'s."""
    from indexer.beir import evaluate
    from retriever.search.vector_index import CODES

    p.add_argument(
        "-d",
        "--dataset",
        required=True,
        metavar="DIR",
        help="BEIR dataset directory (corpus.jsonl, queries.jsonl, qrels/)",
    )
    p.add_argument("--split", default=parameter_defaults(evaluate)["split"], help="qrels split (default %(default)s)")
    add_search_mode_args(p)
    p.add_argument("--model", help="model directory or name (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument(
        "-c",
        "--collection",
        metavar="DIR",
        help="collection to build or reuse (default: ~/.cache/semsearch/eval/<dataset>-<model hash>)",
    )
    p.add_argument(
        "--index-codes",
        choices=CODES,
        help="search a copy of the collection whose vector indexes hold these codes "
        "(always: every segment compressed, small ones too); made from a snapshot, no re-embedding",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run_eval)


def run_search(args) -> int:
    """Print the hits of ``args.query``: ranked, with a wrapped snippet each, or as JSON."""
    from retriever.collection import Collection
    from retriever.filters import parse_where

    where = parse_where(args.where)
    if args.k < 1:
        raise UsageError(f"-k must be at least 1, got {args.k}")
    with Collection.open(args.collection) as collection:
        hits = collection.search(
            args.query,
            k=args.k,
            where=where,
            mode=args.mode,
            fusion=args.fusion,
            alpha=args.alpha,
            exact=args.exact,
            evidence=args.evidence,
            feedback=args.feedback,
            lang=args.lang,
        )
    if args.json:
        print(json.dumps([hit.to_dict() for hit in hits], ensure_ascii=False))
        return EXIT_OK
    if not hits:
        print("no results", file=sys.stderr)
    terminal = sys.stdout.isatty()
    width = min(100, max(40, os.get_terminal_size(sys.stdout.fileno()).columns - 6) if terminal else 100)
    bold = terminal and not os.environ.get("NO_COLOR")
    for rank, hit in enumerate(hits, 1):
        print(f"{rank:>2}. {hit.score:.3f}  {hit.title or hit.id}")
        if source := source_line(hit):
            print(f"    {source}")
        for line in snippet_lines(hit, width, bold):
            print(f"    {line}")
    return EXIT_OK


def source_line(hit) -> str:
    """The line under a hit's title: its id where the title is not the id, and where in its source the hit is,
    e.g. ``/docs/report.pdf · page 12``; "" when there is neither."""
    from retriever.locations import describe

    place = "".join(c if c.isprintable() else " " for c in describe(hit.location))
    return " · ".join(([hit.id] if hit.title and hit.title != hit.id else []) + ([place] if place else []))


def snippet_lines(hit, width: int, bold: bool) -> list[str]:
    """At most three wrapped lines showing a hit: its evidence sentences (query terms in bold where ``bold``),
    or the start of its passage when it has none."""
    if not hit.evidence:
        snippet = " ".join(hit.text.split())
        return textwrap.wrap(textwrap.shorten(snippet, width * 3, placeholder=" …"), width)[:3]
    snippet = " … ".join(" ".join(sentence.text.split()) for sentence in hit.evidence)
    lines = textwrap.wrap(textwrap.shorten(snippet, width * 3, placeholder=" …"), width)[:3]
    words = {term.term.lower() for sentence in hit.evidence for term in sentence.terms}
    if not bold or not words:
        return lines
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + r")\b", re.I)
    return [pattern.sub(lambda m: f"\033[1m{m.group()}\033[0m", line) for line in lines]


def run_eval(args) -> int:
    """Score one mode on one split of ``args.dataset`` and print a table row (or JSON)."""
    from indexer.beir import evaluate

    result = evaluate(
        args.dataset,
        split=args.split,
        mode=args.mode,
        model=args.model,
        collection_dir=args.collection,
        fusion=args.fusion,
        alpha=args.alpha,
        feedback=args.feedback,
        index_codes=args.index_codes,
    )
    print(json.dumps(result) if args.json else format_table([result]))
    return EXIT_OK


def format_table(results: list[dict]) -> str:
    """A plain-text table of evaluation results, one row per result."""
    from retriever.evaluation import METRICS

    header = f"{'dataset':<12} {'mode':<7} " + " ".join(f"{m:>10}" for m in METRICS) + f" {'queries':>8} {'seconds':>8}"
    rows = [
        f"{r['dataset']:<12} {r['mode']:<7} "
        + " ".join(f"{r[m]:>10.4f}" for m in METRICS)
        + f" {r['queries']:>8} {r['seconds']:>8.1f}"
        for r in results
    ]
    return "\n".join([header, *rows])
