"""``semsearch search`` (one query, ranked hits) and ``semsearch eval`` (quality on a BEIR dataset, or a
collection's quality on its judgments)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
import warnings

from app.commands.base import EXIT_FAILURE, EXIT_OK, UsageError, add_collection_arg, add_commands, parameter_defaults

#: The search settings a collection keeps (``Collection.search_settings``): a flag left unset leaves them be.
OWN_SETTINGS = ("fusion", "alpha", "feedback")
#: Flags of the collection form of ``eval`` only, and of the dataset form only (``-d``).
COLLECTION_EVAL_FLAGS = ("judgments", "queries", "per_query", "record", "expect", "tolerance")
DATASET_EVAL_FLAGS = ("index_codes", "split")


def register(sub) -> None:
    """Add ``search`` and ``eval`` to the command's subparsers."""
    add_commands(
        sub,
        [
            ("search", "search a collection", add_search_flags),
            ("eval", "measure retrieval quality: a collection on its judgments, or a BEIR dataset", add_eval_flags),
        ],
    )


def add_search_mode_args(parser: argparse.ArgumentParser) -> None:
    """``--mode``, ``--fusion``, ``--alpha`` and ``--feedback/--no-feedback``, their choices the retriever's.

    ``--mode`` defaults to the retriever's; the other three default to ``None``: unset, a collection searches
    with its own settings (``Collection.search_settings``: the built-in defaults unless ``learn`` chose others).
    """
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
        help="hybrid fusion: convex combination of normalised scores, or rrf: reciprocal-rank "
        f"(default: the collection's own setting, {DEFAULT_FUSION} unless semsearch learn chose another)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        help=f"dense weight for --fusion convex (default: the collection's own setting, {DEFAULT_ALPHA:g} "
        "unless semsearch learn chose another)",
    )
    feedback = parser.add_mutually_exclusive_group()
    feedback.add_argument(
        "--feedback",
        dest="feedback",
        action="store_true",
        default=None,
        help="hybrid: search the dense side again with the query moved toward the first fusion's top documents "
        "(default: the collection's own setting, on unless semsearch learn chose otherwise)",
    )
    feedback.add_argument(
        "--no-feedback", dest="feedback", action="store_false", default=None, help="hybrid: fuse once, no feedback"
    )


def given_settings(args) -> dict:
    """``fusion``, ``alpha`` and ``feedback`` of ``args`` that the command line set (the others left out)."""
    return {name: getattr(args, name) for name in OWN_SETTINGS if getattr(args, name) is not None}


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
    """Flags of ``semsearch eval``: the collection form (``-c DIR``) and the BEIR form (``-d DATASET``);
    ``--split`` defaults to ``indexer.beir.evaluate``'s, ``--tolerance`` to the regression file's."""
    from indexer.beir import evaluate
    from retriever.judgments.regression import DEFAULT_TOLERANCE
    from retriever.search.vector_index import CODES

    p.add_argument(
        "-c",
        "--collection",
        metavar="DIR",
        help="the collection to measure on its judgments; with -d: the collection to build or reuse for the "
        "dataset (default: ~/.cache/semsearch/eval/<dataset>-<model hash>)",
    )
    p.add_argument(
        "-d", "--dataset", metavar="DIR", help="BEIR dataset directory (corpus.jsonl, queries.jsonl, qrels/)"
    )
    p.add_argument(
        "--judgments",
        metavar="FILE",
        help="measure on the judgments of this file (JSON Lines, or a BEIR qrels TSV with --queries), "
        "not on the collection's own; nothing is stored",
    )
    p.add_argument("--queries", metavar="FILE", help="the BEIR queries.jsonl naming the query ids of a qrels TSV")
    add_search_mode_args(p)
    p.add_argument(
        "--model",
        help="with -c: measure a scratch copy of the collection re-embedded with this model (directory or name; "
        "the collection stays as it is); with -d: the model of a new collection (default: the packaged "
        "all-MiniLM-L6-v2)",
    )
    p.add_argument("--per-query", action="store_true", help="also show each query's figures, worst first")
    regression = p.add_mutually_exclusive_group()
    regression.add_argument("--record", metavar="FILE", help="write the figures and settings to a regression file")
    regression.add_argument(
        "--expect",
        metavar="FILE",
        help="compare with a regression file; exit 1 when a metric fell more than its tolerance below it",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help="with --record: how far a metric may fall below the recorded one (default %(default)g)",
    )
    p.add_argument("--split", default=parameter_defaults(evaluate)["split"], help="qrels split (default %(default)s)")
    p.add_argument(
        "--index-codes",
        choices=CODES,
        help="with -d: search a copy of the collection whose vector indexes hold these codes "
        "(always: every segment compressed, small ones too); made from a snapshot, no re-embedding",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run_eval)


def run_search(args) -> int:
    """Print the hits of ``args.query``: ranked, with a wrapped snippet each, or as JSON."""
    from retriever.filters import parse_where
    from retriever.sharding import open_collection

    where = parse_where(args.where)
    if args.k < 1:
        raise UsageError(f"-k must be at least 1, got {args.k}")
    with open_collection(args.collection) as collection:
        hits = collection.search(
            args.query,
            k=args.k,
            where=where,
            mode=args.mode,
            exact=args.exact,
            evidence=args.evidence,
            lang=args.lang,
            **given_settings(args),
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
    """``semsearch eval``: the BEIR form with ``-d``, else the collection form (``-c`` measured on judgments)."""
    from indexer.beir import evaluate

    if args.dataset is None and args.collection is None:
        raise UsageError("give -c DIR (a collection, measured on its judgments) or -d DIR (a BEIR dataset)")
    misplaced = misplaced_eval_flags(args)
    if misplaced:
        form = "-d" if args.dataset else "-c without -d"
        raise UsageError(f"{', '.join('--' + name.replace('_', '-') for name in misplaced)} cannot be used with {form}")
    if not args.dataset:
        return run_collection_eval(args)
    result = evaluate(
        args.dataset,
        split=args.split,
        mode=args.mode,
        model=args.model,
        collection_dir=args.collection,
        index_codes=args.index_codes,
        **given_settings(args),
    )
    print(json.dumps(result) if args.json else format_table([result]))
    return EXIT_OK


def misplaced_eval_flags(args) -> list[str]:
    """The flags of ``args`` that were set but belong to the other form of ``eval`` (``-d`` or ``-c`` alone)."""
    from indexer.beir import evaluate
    from retriever.judgments.regression import DEFAULT_TOLERANCE

    unset = dict.fromkeys(COLLECTION_EVAL_FLAGS + DATASET_EVAL_FLAGS) | {
        "per_query": False,
        "tolerance": DEFAULT_TOLERANCE,
        "split": parameter_defaults(evaluate)["split"],
    }
    return [
        name
        for name in (COLLECTION_EVAL_FLAGS if args.dataset else DATASET_EVAL_FLAGS)
        if getattr(args, name) != unset[name]
    ]


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


def run_collection_eval(args) -> int:
    """Measure ``args.collection`` on its judgments (or ``--judgments``); print the figures (or JSON); record
    them or compare them with a regression file (exit 1 naming each metric that fell)."""
    from retriever.collection import Collection
    from retriever.judgments.regression import DEFAULT_TOLERANCE, compare, load_expected, record, settings_changed

    if args.queries is not None and args.judgments is None:
        raise UsageError("--queries names the query texts of a --judgments qrels file: give --judgments FILE too")
    if args.record is None and args.tolerance != DEFAULT_TOLERANCE:
        raise UsageError("--tolerance is recorded with --record FILE (--expect uses the file's own)")
    expected = load_expected(args.expect) if args.expect else None  # a bad file fails before the measuring
    with Collection.open(args.collection) as collection:
        if args.judgments is None and collection.judgment_count()[0] == 0:
            raise UsageError(
                f"{args.collection} holds no judgments: add some with 'semsearch judge import FILE -c "
                f"{args.collection}', or measure on a file with --judgments FILE"
            )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            evaluation = collection.evaluate(
                args.judgments,
                queries=args.queries,
                model=args.model,
                per_query=args.per_query,
                progress=sys.stderr.isatty(),
                mode=args.mode,
                **given_settings(args),
            )
    note_long_queries(caught, evaluation.queries)
    regressions = compare(expected, evaluation) if expected is not None else []
    if args.record:
        record(args.record, evaluation, args.tolerance)
    if args.json:
        shown = evaluation.to_dict()
        if expected is not None:
            shown["regressions"] = [regression.to_dict() for regression in regressions]
        print(json.dumps(shown, ensure_ascii=False))
    else:
        print(format_evaluation(evaluation))
    if args.record:
        print(f"recorded the figures in {args.record} (tolerance {args.tolerance:g})", file=sys.stderr)
    if expected is not None:
        report_regressions(args.expect, expected, evaluation, regressions, settings_changed(expected, evaluation))
    return EXIT_FAILURE if regressions else EXIT_OK


def note_long_queries(caught: list, queries: int) -> None:
    """A note on stderr when queries were longer than the model's window (``caught``: the warnings recorded)."""
    from retriever.encoding.embedder import InputTooLongWarning

    long_queries = sum(issubclass(w.category, InputTooLongWarning) for w in caught)
    if long_queries:
        print(
            f"semsearch: note: {long_queries} of {queries} queries are longer than the model's window; "
            "the dense side embedded only their first window",
            file=sys.stderr,
        )


def format_evaluation(evaluation) -> str:
    """The figures as a small table: a line saying what was measured and how, the overall metrics, and with
    per-query figures one row per query, worst (lowest nDCG@10, then MRR@10) first."""
    from retriever.evaluation import METRICS

    settings = evaluation.settings
    how = f"{settings['mode']}"
    if settings["mode"] == "hybrid":
        how += f" (fusion {settings['fusion']}, alpha {settings['alpha']:g}, feedback {'on' if settings['feedback'] else 'off'})"
    lines = [
        f"{evaluation.queries} queries, {evaluation.judgments} judgments; {how}; model {settings['model']}",
        "  ".join(f"{metric:>10}" for metric in METRICS),
        "  ".join(f"{evaluation.metrics[metric]:>10.4f}" for metric in METRICS),
    ]
    if evaluation.unanswered:
        many = evaluation.unanswered > 1
        lines.append(
            f"({evaluation.unanswered} judged {'queries' if many else 'query'} left out: no judgment of "
            f"{'theirs' if many else 'its'} is above grade 0)"
        )
    if evaluation.per_query:
        rows = sorted(evaluation.per_query.values(), key=lambda row: (row["ndcg@10"], row["mrr@10"], row["query"]))
        lines += ["", "  ".join(f"{metric:>10}" for metric in METRICS) + "  query"]
        lines += [
            "  ".join(f"{row[metric]:>10.4f}" for metric in METRICS) + f"  {shown_query(row['query'])}" for row in rows
        ]
    return "\n".join(lines)


def shown_query(text: str, width: int = 60) -> str:
    """``text`` on one line of at most ``width`` characters (unprintable characters shown as spaces)."""
    line = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return textwrap.shorten(line, width, placeholder=" …") if len(line) > width else line


def report_regressions(path: str, expected: dict, evaluation, regressions: list, changed: list[str]) -> None:
    """Say on stderr how the figures compare with the regression file at ``path``: each regression, and the
    settings or counts that differ from those recorded."""
    if changed:
        print(f"semsearch: note: measured otherwise than {path} recorded: {'; '.join(changed)}", file=sys.stderr)
    for regression in regressions:
        print(f"semsearch: regression: {regression}", file=sys.stderr)
    if not regressions:
        print(f"no regression against {path} (tolerance {expected['tolerance']:g})", file=sys.stderr)
