"""The ``semsearch`` command: index, search, delete and inspect collections; train models.

Exit status: 0 on success, 2 for bad usage or bad input (including files
skipped while indexing), 1 for any other failure. Errors are one line on
stderr; set ``SEMSEARCH_DEBUG=1`` for a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Sequence

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
UI_PASSWORD_ENV = "SEMSEARCH_UI_PASSWORD"  # read by app/ui.py, which asks every session for it


class UsageError(Exception):
    """Bad command-line usage (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="semsearch",
        description="Semantic search over your documents: index files, then search them by meaning.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def collection_arg(p):
        p.add_argument("-c", "--collection", required=True, metavar="DIR", help="collection directory")

    p = sub.add_parser("index", help="index files, directories or BEIR corpora into a collection")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories (.txt .md .html .pdf .jsonl .csv)")
    collection_arg(p)
    p.add_argument("--model", help="model directory or name, used when the collection is created "
                   "(default: the packaged all-MiniLM-L6-v2); must match an existing collection's model")
    p.add_argument("--include", action="append", default=[], metavar="GLOB", help="only files matching GLOB (repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="leave out files matching GLOB (repeatable)")
    p.add_argument("--id-field", help="JSONL/CSV field holding the id (default: id, then _id)")
    p.add_argument("--title-field", help="JSONL/CSV field holding the title (default: title)")
    p.add_argument("--text-field", help="JSONL/CSV field holding the text (default: text, body, content)")
    p.add_argument("--prune", action="store_true", help="remove documents whose files or records are gone")
    p.add_argument("--batch-size", type=int, default=None, metavar="N", help="documents per atomic commit (default 128)")
    p.add_argument("--max-file-mb", type=float, default=50.0, metavar="MB", help="skip files larger than this (default 50)")
    p.add_argument("--catalog-url", help="SQLAlchemy URL for the catalog of a new collection (default: SQLite inside DIR), "
                   "e.g. postgresql+psycopg://user@host:5432/db; the password comes from SEMSEARCH_CATALOG_PASSWORD "
                   "or the file named by SEMSEARCH_CATALOG_PASSWORD_FILE and is never stored")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="embed in a Ray actor pool: on this machine, or on the running cluster at ADDRESS "
                   "(needs pip install 'semsearch[ray]')")
    p.add_argument("--workers", type=int, metavar="N", help="with --ray: actors, one model each "
                   "(default: this machine's cores, or the cluster's CPUs)")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("search", help="search a collection")
    p.add_argument("query", metavar="QUERY")
    collection_arg(p)
    p.add_argument("-k", type=int, default=10, metavar="N", help="number of documents (default 10)")
    p.add_argument("--where", metavar="JSON", help='metadata filter, e.g. \'{"lang": "en", "year": {"$gte": 2020}}\'')
    search_mode_args(p)
    p.add_argument("--exact", action="store_true", help="exact vector search also in large, approximately indexed segments")
    p.add_argument("--json", action="store_true", help="print hits as a JSON list")

    p = sub.add_parser("eval", help="measure retrieval quality on a BEIR-format dataset")
    p.add_argument("-d", "--dataset", required=True, metavar="DIR", help="BEIR dataset directory (corpus.jsonl, queries.jsonl, qrels/)")
    p.add_argument("--split", default="test", help="qrels split (default test)")
    search_mode_args(p)
    p.add_argument("--model", help="model directory or name (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("-c", "--collection", metavar="DIR", help="collection to build or reuse "
                   "(default: ~/.cache/semsearch/eval/<dataset>-<model hash>)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("delete", help="delete documents by id")
    p.add_argument("ids", nargs="+", metavar="ID")
    collection_arg(p)

    p = sub.add_parser("info", help="show a collection's size, model, settings and segments")
    collection_arg(p)
    p.add_argument("--json", action="store_true", help="print as JSON")

    p = sub.add_parser("compact", help="merge a collection's segments into one, dropping deleted rows")
    collection_arg(p)

    p = sub.add_parser("upgrade", help="convert a collection written by an older semsearch to the current format")
    collection_arg(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("ui", help="start the search UI in the browser (Streamlit)")
    p.add_argument("-c", "--collection", required=True, metavar="DIR",
                   help="collection directory, or a folder whose sub-folders are collections")
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other address needs a password "
                   "in $SEMSEARCH_UI_PASSWORD)")

    p = sub.add_parser("serve", help="start the HTTP API (FastAPI; OpenAPI docs at /docs)")
    collection_arg(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--api-key", metavar="KEY", help="require this key on every route but /health (default: "
                   "$SEMSEARCH_API_KEY); needed to listen on any address but loopback")
    p.add_argument("--deadline", type=float, default=4.0, metavar="SECONDS",
                   help="stop a request that runs longer and answer 503 (default 4)")
    p.add_argument("--access-log", action="store_true",
                   help="print a line per request (off by default: in a profile of searches it took about 4%% of the server's time)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="serve from N processes sharing the port, each with its own encoder on an N-th of the "
                   "cores and its own memory (default 1; on 2 cores, 2 answered about 18%% more searches at "
                   "concurrency 8)")
    p = sub.add_parser("train", help="train a tokenizer, pretrain a BERT encoder or fine-tune it contrastively")
    train = p.add_subparsers(dest="train_command", metavar="STEP", parser_class=_Parser)
    train.required = True

    t = train.add_parser("tokenizer", help="train a WordPiece tokenizer on text files")
    t.add_argument("paths", nargs="+", metavar="PATH", help="text files, or directories walked for *.txt")
    t.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the tokenizer")
    t.add_argument("--vocab-size", type=int, default=30522, metavar="N", help="vocabulary size (default 30522)")
    case = t.add_mutually_exclusive_group()
    case.add_argument("--lowercase", dest="lowercase", action="store_true", default=True,
                      help="lowercase and strip accents (default)")
    case.add_argument("--cased", dest="lowercase", action="store_false", help="keep case and accents")
    t.add_argument("--min-frequency", type=int, default=2, metavar="N", help="fewest occurrences of a merge (default 2)")

    t = train.add_parser("pretrain", help="masked-LM pretraining of a BERT encoder")
    t.add_argument("--text", nargs="+", required=True, metavar="PATH", help="text files, or directories walked for *.txt")
    source = t.add_mutually_exclusive_group(required=True)
    source.add_argument("--tokenizer", metavar="DIR", help="tokenizer of a new model (see 'semsearch train tokenizer')")
    source.add_argument("--from", dest="from_model", metavar="MODEL", help="model directory to continue pretraining (its tokenizer is used)")
    t.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (final model, log.jsonl, checkpoints/)")
    t.add_argument("--layers", type=int, default=12, metavar="L", help="transformer layers of a new model (default 12)")
    t.add_argument("--hidden", type=int, default=768, metavar="H", help="hidden size of a new model (default 768)")
    t.add_argument("--heads", type=int, default=12, metavar="A", help="attention heads of a new model (default 12)")
    t.add_argument("--intermediate", type=int, metavar="I", help="feed-forward size of a new model (default 4 x hidden)")
    t.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout of a new model (default 0.1)")
    t.add_argument("--positions", choices=("absolute", "rotary"), default="absolute",
                   help="position embeddings of a new model: absolute (BertForMaskedLM, default) or "
                        "rotary (RoFormerForMaskedLM; learns far faster at small sizes)")
    t.add_argument("--max-len", type=int, default=128, metavar="N", help="tokens per sequence (default 128)")
    t.add_argument("--max-steps", type=int, metavar="N", help="optimizer steps (default: one pass over the text)")
    t.add_argument("--max-minutes", type=float, metavar="M", help="stop cleanly, and save, after M minutes")
    t.add_argument("--batch-size", type=int, default=32, metavar="B", help="sequences per micro-batch (default 32)")
    t.add_argument("--grad-accum", type=int, default=1, metavar="G", help="micro-batches per optimizer step (default 1)")
    t.add_argument("--lr", type=float, default=1e-4, help="peak learning rate (default 1e-4)")
    t.add_argument("--warmup-ratio", type=float, default=0.06, help="share of steps warming up (default 0.06)")
    t.add_argument("--eval-fraction", type=float, default=0.02, help="last share of sequences held out (default 0.02)")
    t.add_argument("--eval-every", type=int, default=500, metavar="N", help="held-out evaluation every N steps (default 500)")
    t.add_argument("--save-every", type=int, default=1000, metavar="N", help="checkpoint every N steps (default 1000)")
    t.add_argument("--seed", type=int, default=0, help="seed for initialisation, data order and masks (default 0)")
    t.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in DIR")
    t.add_argument("--nsp", action="store_true", help="add next-sentence prediction (BertForPreTraining)")
    t.add_argument("--json", action="store_true", help="print the summary as JSON")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    t = train.add_parser("contrastive", help="contrastive fine-tuning of a sentence encoder (in-batch negatives)")
    t.add_argument("--from", dest="from_model", required=True, metavar="MODEL",
                   help="model directory (sentence-transformers, or a plain BERT such as 'train pretrain' output)")
    t.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory (model, log.jsonl)")
    pairs = t.add_mutually_exclusive_group()
    pairs.add_argument("--pairs", metavar="FILE", help='JSONL of {"anchor", "positive"[, "negative"]}')
    pairs.add_argument("--beir", metavar="DIR", help="BEIR dataset: (query, relevant document) pairs of --split")
    pairs.add_argument("--corpus", nargs="+", metavar="PATH", help="text files/directories or BEIR corpora, with --unsupervised")
    t.add_argument("--split", default="train", help="qrels split of --beir (default train)")
    t.add_argument("--unsupervised", choices=("simcse", "crop"), help="pairs from --corpus: text with itself (simcse) or two random spans (crop)")
    t.add_argument("--hard-negatives", action="store_true", help="with --beir: one BM25-mined negative per pair")
    t.add_argument("--max-steps", type=int, metavar="N", help="optimizer steps (default: --epochs passes over the pairs)")
    t.add_argument("--epochs", type=int, default=1, metavar="N", help="passes over the pairs without --max-steps (default 1)")
    t.add_argument("--batch-size", type=int, default=32, metavar="B", help="pairs per batch (default 32)")
    t.add_argument("--lr", type=float, default=2e-5, help="peak learning rate (default 2e-5)")
    t.add_argument("--scale", type=float, default=20.0, help="similarity scale, i.e. 1 / temperature (default 20)")
    t.add_argument("--warmup-ratio", type=float, default=0.1, help="share of steps warming up (default 0.1)")
    t.add_argument("--max-len", type=int, metavar="N", help="tokens per text (default: the model's window)")
    t.add_argument("--dev", metavar="DIR", help="BEIR dataset scored (dense nDCG@10) to keep the best model")
    t.add_argument("--dev-split", metavar="SPLIT", help="qrels split of --dev (default dev if present, else test)")
    t.add_argument("--eval-every", type=int, default=500, metavar="N", help="dev evaluation every N steps (default 500)")
    t.add_argument("--save-every", type=int, default=500, metavar="N", help="checkpoint every N steps (default 500)")
    t.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in DIR")
    t.add_argument("--seed", type=int, default=0, help="seed for initialisation, data order and crops (default 0)")
    t.add_argument("--json", action="store_true", help="print the summary as JSON")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    t = train.add_parser("recipe", help="run a training recipe end to end (resumable) and print its table")
    t.add_argument("recipe", choices=("train-small", "finetune-minilm"),
                   help="train-small: tokenizer, small BERT, contrastive on SciFact; "
                        "finetune-minilm: adapt the packaged MiniLM to SciFact")
    t.add_argument("--datasets", metavar="DIR",
                   help="directory with pretrain-text/, scifact/, cisi/, cranfield/, medline/ (default ../shared/datasets)")
    t.add_argument("-o", "--output", metavar="DIR", help="run directory (default runs/RECIPE)")
    t.add_argument("--json", action="store_true", help="print the summary as JSON instead of the table")

    p = sub.add_parser("fill", help="show a masked-LM model's top tokens for each [MASK] in a text")
    p.add_argument("text", metavar="TEXT", help="text with one or more [MASK] tokens")
    p.add_argument("--model", required=True, metavar="DIR", help="model directory (e.g. from 'semsearch train pretrain')")
    p.add_argument("-k", type=int, default=5, metavar="N", help="tokens per mask (default 5)")
    p.add_argument("--json", action="store_true", help="print a JSON list (one list of [token, probability] per mask)")
    return parser


def search_mode_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=("dense", "bm25", "hybrid"), default="hybrid",
                        help="dense embeddings, bm25 keywords, or hybrid: both fused (default)")
    parser.add_argument("--fusion", choices=("convex", "rrf"), default="convex",
                        help="hybrid fusion: convex combination of normalised scores (default) or reciprocal-rank")
    parser.add_argument("--alpha", type=float, default=0.6, help="dense weight for --fusion convex (default 0.6)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``semsearch`` console script."""
    from retriever.errors import BadInputError, SemsearchError

    for stream in (sys.stdout, sys.stderr):  # a name that is not UTF-8 is printed escaped, never a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        _fail(str(exc))
        return EXIT_BAD_INPUT
    except BadInputError as exc:
        _fail(str(exc))
        return EXIT_BAD_INPUT
    except SemsearchError as exc:
        _fail(str(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _fail("interrupted; every committed batch is kept, run the same command again to resume")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one place that turns surprises into one line
        if os.environ.get("SEMSEARCH_DEBUG"):
            raise
        _fail(f"unexpected {type(exc).__name__}: {exc} (SEMSEARCH_DEBUG=1 shows the traceback)")
        return EXIT_FAILURE


def _fail(message: str) -> None:
    print(f"semsearch: error: {' '.join(message.split())}", file=sys.stderr)


def cmd_index(args) -> int:
    from indexer.job import DEFAULT_BATCH_DOCS, index_paths
    from indexer.loaders import FieldMap
    from retriever.collection import Collection
    from retriever.storage.manifest import MANIFEST

    if args.max_file_mb <= 0:
        raise UsageError("--max-file-mb must be positive")
    if args.workers is not None and (args.ray is None or args.workers < 1):
        raise UsageError("--workers needs --ray and a positive number")
    if args.ray is not None:
        try:
            import indexer.ray_job  # noqa: F401  (fails here, before the collection is touched)
        except ImportError:
            raise UsageError("--ray needs Ray: pip install 'semsearch[ray]'") from None
    exists = os.path.exists(os.path.join(args.collection, MANIFEST))
    if exists:
        if args.catalog_url:
            raise UsageError("--catalog-url applies only when a collection is created")
        collection = Collection.open(args.collection, args.model)
    else:
        collection = Collection.create(args.collection, args.model, catalog_url=args.catalog_url)
    with collection:
        report = index_paths(
            collection,
            args.paths,
            include=args.include,
            exclude=args.exclude,
            fields=FieldMap(id=args.id_field, title=args.title_field, text=args.text_field),
            prune=args.prune,
            batch_docs=args.batch_size or DEFAULT_BATCH_DOCS,
            max_bytes=int(args.max_file_mb * 1024 * 1024),
            progress=not args.quiet and not args.json,
            engine="local" if args.ray is None else "ray",
            ray_address=None if args.ray in (None, "local") else args.ray,
            workers=args.workers,
        )
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    print(report.summary(), file=sys.stderr)
    return EXIT_BAD_INPUT if report.skipped else EXIT_OK


def cmd_search(args) -> int:
    from retriever.collection import Collection
    from retriever.search.filters import parse_where

    where = parse_where(args.where)
    if args.k < 1:
        raise UsageError(f"-k must be at least 1, got {args.k}")
    with Collection.open(args.collection) as collection:
        hits = collection.search(
            args.query, k=args.k, where=where, mode=args.mode, fusion=args.fusion, alpha=args.alpha, exact=args.exact
        )
    if args.json:
        print(json.dumps([hit.to_dict() for hit in hits], ensure_ascii=False))
        return EXIT_OK
    if not hits:
        print("no results", file=sys.stderr)
    width = min(100, max(40, os.get_terminal_size(sys.stdout.fileno()).columns - 6) if sys.stdout.isatty() else 100)
    for rank, hit in enumerate(hits, 1):
        print(f"{rank:>2}. {hit.score:.3f}  {hit.title or hit.id}")
        if hit.title and hit.title != hit.id:
            print(f"    {hit.id}")
        snippet = " ".join(hit.text.split())
        for line in textwrap.wrap(textwrap.shorten(snippet, width * 3, placeholder=" …"), width)[:3]:
            print(f"    {line}")
    return EXIT_OK


def cmd_eval(args) -> int:
    from indexer.beir import evaluate

    result = evaluate(
        args.dataset,
        split=args.split,
        mode=args.mode,
        model=args.model,
        collection_dir=args.collection,
        fusion=args.fusion,
        alpha=args.alpha,
    )
    print(json.dumps(result) if args.json else format_table([result]))
    return EXIT_OK


def format_table(results: list[dict]) -> str:
    """A plain-text table of evaluation results, one row per result."""
    from retriever.evaluation import METRICS

    header = f"{'dataset':<12} {'mode':<7} " + " ".join(f"{m:>10}" for m in METRICS) + f" {'queries':>8} {'seconds':>8}"
    rows = [
        f"{r['dataset']:<12} {r['mode']:<7} " + " ".join(f"{r[m]:>10.4f}" for m in METRICS)
        + f" {r['queries']:>8} {r['seconds']:>8.1f}"
        for r in results
    ]
    return "\n".join([header, *rows])


def cmd_delete(args) -> int:
    from retriever.collection import Collection

    with Collection.open(args.collection) as collection:
        report = collection.delete(args.ids)
    missing = sorted(set(args.ids) - set(report.deleted))
    print(f"deleted {len(report.deleted)} document(s)", file=sys.stderr)
    if missing:
        _fail(f"not found: {', '.join(missing)}")
        return EXIT_BAD_INPUT
    return EXIT_OK


def cmd_info(args) -> int:
    from retriever.collection import Collection

    with Collection.open(args.collection) as collection:
        info = collection.info()
        encoder = collection.embedder.info()  # a run-time choice of this machine, not of the collection
    info["backend"], info["query_backend"] = encoder["backend"], encoder["query_backend"]
    if args.json:
        print(json.dumps(info))
        return EXIT_OK
    chunking = info["chunking"]
    rows = [
        ("path", info["path"]),
        ("documents", info["documents"]),
        ("chunks", info["chunks"]),
        ("model", f"{info['model']} (dim {info['dim']}, sha256 {info['model_sha256'][:12]})"),
        ("backend", f"{encoder['backend']}"
                    + (f" for passages, {encoder['query_backend']} for queries"
                       if encoder["query_backend"] != encoder["backend"] else "")
                    + f" ({encoder['threads']} threads{', measured on this machine' if encoder.get('measured') else ''})"),
        ("chunking", f"{chunking['window_tokens']} tokens, overlap {chunking['overlap_tokens']}"),
        ("index", info["index"]),
        ("catalog", info["catalog"]),
        ("size", f"{info['size_bytes'] / 1e6:.1f} MB"),
        ("created", info["created_at"]),
        ("updated", info["updated_at"]),
    ]
    for key, value in rows:
        print(f"{key:>10}  {value}")
    return EXIT_OK


def cmd_compact(args) -> int:
    from retriever.collection import Collection

    with Collection.open(args.collection) as collection:
        result = collection.compact()
    print(
        f"compacted {args.collection}: {result['segments_before']} segment(s) -> {result['segments_after']}, "
        f"{result['bytes_before'] / 1e6:.1f} MB -> {result['bytes_after'] / 1e6:.1f} MB",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_upgrade(args) -> int:
    from retriever.storage.upgrade import upgrade

    print(upgrade(args.collection, progress=not args.quiet), file=sys.stderr)
    return EXIT_OK


def cmd_ui(args) -> int:
    import importlib.util

    root = Path(args.collection).expanduser()
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} is a file; -c takes a collection directory or a folder of collections")
    if not root.exists() and not root.parent.is_dir():
        raise UsageError(f"{root}: no such directory")
    if importlib.util.find_spec("streamlit") is None:
        raise UsageError("the UI needs Streamlit: pip install 'semsearch[ui]'")
    if not _is_loopback(args.host) and not os.environ.get(UI_PASSWORD_ENV):
        raise UsageError(f"refusing to serve the UI on {args.host} without a password: set {UI_PASSWORD_ENV} "
                         "(every browser session must then enter it), or keep --host on loopback")
    _check_listen(args.host, args.port)
    script = Path(__file__).resolve().with_name("ui.py")
    argv = [sys.executable, "-m", "streamlit", "run", str(script),
            "--server.address", args.host, "--server.port", str(args.port), "--server.headless", "true",
            "--server.fileWatcherType", "none", "--server.maxUploadSize", "50",
            "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
            "--client.showErrorDetails", "none", "--theme.primaryColor", "#4f46e5"]
    env = dict(os.environ, SEMSEARCH_UI_COLLECTION=str(root.resolve()))
    print(f"semsearch: UI for {root} at http://{args.host}:{args.port}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)  # the process becomes Streamlit: Ctrl-C and signals reach it
    return EXIT_FAILURE  # pragma: no cover - execve does not return


def cmd_serve(args) -> int:
    import importlib.util

    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise UsageError("the HTTP API needs FastAPI and uvicorn: pip install 'semsearch[api]'")
    import uvicorn

    from app.server import API_KEY_ENV, SERVE_ENV, create_app

    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    if not key and not _is_loopback(args.host):
        raise UsageError(f"refusing to listen on {args.host} without an API key: pass --api-key or set {API_KEY_ENV}")
    _check_listen(args.host, args.port)
    if not 0 < args.deadline <= 3600:
        raise UsageError(f"--deadline must be between 0 and 3600 seconds, got {args.deadline:g}")
    if not 1 <= args.workers <= 64:
        raise UsageError(f"--workers must be between 1 and 64, got {args.workers}")
    options = {"host": args.host, "port": args.port, "log_level": "info", "server_header": False,
               "access_log": args.access_log}
    ready_dir = None
    if args.workers == 1:
        app = create_app(args.collection, api_key=key, deadline_s=args.deadline)
    else:  # worker processes build the app themselves, from these settings
        from retriever import Collection
        from retriever.encoding.threads import THREADS_ENV, available_cores

        Collection.open(args.collection).close()  # a wrong path fails here, once, not in every worker
        ready_dir = tempfile.mkdtemp(prefix="semsearch-workers-")  # each worker marks itself ready here
        os.environ[SERVE_ENV] = json.dumps({"collection": str(Path(args.collection).resolve()),
                                            "deadline_s": args.deadline, "ready_dir": ready_dir,
                                            "workers": args.workers})
        if key:
            os.environ[API_KEY_ENV] = key
        os.environ.setdefault(THREADS_ENV, str(max(1, available_cores() // args.workers)))
        app, options = "app.server:app_from_environment", options | {"factory": True, "workers": args.workers}
    print(f"semsearch: serving {args.collection} at http://{args.host}:{args.port} (API docs at /docs"
          f"{'; API key required' if key else ''}{f'; {args.workers} worker processes' if args.workers > 1 else ''})",
          file=sys.stderr)
    try:
        uvicorn.run(app, **options)
    finally:
        if ready_dir is not None:
            shutil.rmtree(ready_dir, ignore_errors=True)
    return EXIT_OK


def _is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (``localhost``, 127.x, ``::1``)."""
    import ipaddress

    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _check_listen(host: str, port: int) -> None:
    """Fail early, in one line, when ``host:port`` cannot be listened on."""
    import socket

    from retriever.errors import SemsearchError

    if not 1 <= port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"cannot listen on {host}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise SemsearchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def cmd_train(args) -> int:
    return TRAIN_COMMANDS[args.train_command](args)


def cmd_train_tokenizer(args) -> int:
    from training.tokenizer import train_tokenizer

    output = train_tokenizer(args.paths, args.output, vocab_size=args.vocab_size,
                             lowercase=args.lowercase, min_frequency=args.min_frequency)
    print(f"semsearch: tokenizer saved to {output}", file=sys.stderr)
    return EXIT_OK


def cmd_train_pretrain(args) -> int:
    from training.pretrain import PretrainConfig, pretrain

    config = PretrainConfig(
        text=args.text, output_dir=args.output, tokenizer=args.tokenizer, from_model=args.from_model,
        layers=args.layers, hidden=args.hidden, heads=args.heads, intermediate=args.intermediate, dropout=args.dropout,
        positions=args.positions,
        max_len=args.max_len, max_steps=args.max_steps, max_minutes=args.max_minutes,
        batch_size=args.batch_size, grad_accum=args.grad_accum, lr=args.lr, warmup_ratio=args.warmup_ratio,
        eval_fraction=args.eval_fraction, eval_every=args.eval_every, save_every=args.save_every,
        nsp=args.nsp, resume=args.resume, seed=args.seed,
    )
    summary = pretrain(config, progress=not args.quiet and not args.json)
    if args.json:
        print(json.dumps(summary))
    else:
        figures = ", ".join(f"{key} {value:.4g}" for key, value in summary.items()
                            if isinstance(value, float) and key != "seconds")
        print(f"semsearch: step {summary['step']}{', ' + figures if figures else ''}; "
              f"model saved to {summary['output_dir']}", file=sys.stderr)
    return EXIT_OK


def cmd_train_contrastive(args) -> int:
    from training.contrastive import ContrastiveConfig, contrastive_train

    config = ContrastiveConfig(
        from_model=args.from_model, output_dir=args.output, pairs=args.pairs, beir=args.beir, split=args.split,
        corpus=args.corpus, unsupervised=args.unsupervised, hard_negatives=args.hard_negatives,
        max_steps=args.max_steps, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, scale=args.scale,
        warmup_ratio=args.warmup_ratio, max_len=args.max_len, dev=args.dev, dev_split=args.dev_split,
        eval_every=args.eval_every, save_every=args.save_every, resume=args.resume, seed=args.seed,
    )
    summary = contrastive_train(config, progress=not args.quiet and not args.json)
    if args.json:
        print(json.dumps(summary))
    else:
        dev = f", best dev nDCG@10 {summary['best_dev_ndcg']:.4f} (step {summary['best_step']})" \
            if summary["best_dev_ndcg"] is not None else ""
        loss = f", loss {summary['train_loss']:.4g}" if summary["train_loss"] is not None else ""
        print(f"semsearch: {summary['steps']} steps{loss}{dev}; "
              f"model saved to {summary['output_dir']}", file=sys.stderr)
    return EXIT_OK


def cmd_train_recipe(args) -> int:
    from indexer.beir import evaluate
    from training.recipes import DEFAULT_DATASETS, RECIPES

    def score(dataset: Path, model: str, mode: str) -> dict:
        result = evaluate(dataset, split="test", mode=mode, model=model)
        return {key: result[key] for key in ("ndcg@10", "recall@100", "queries", "seconds")}

    run, table = RECIPES[args.recipe]
    run_dir = Path(args.output or Path("runs") / args.recipe)
    summary = run(Path(args.datasets) if args.datasets else DEFAULT_DATASETS, run_dir, score,
                  log=lambda line: print(f"semsearch: {args.recipe}: {line}", file=sys.stderr))
    print(json.dumps(summary, indent=2) if args.json else table(summary))
    print(f"semsearch: summary written to {run_dir / 'summary.json'}", file=sys.stderr)
    return EXIT_OK


def cmd_fill(args) -> int:
    from training.fill import fill_mask

    guesses = fill_mask(args.text, args.model, k=args.k)
    if args.json:
        print(json.dumps([[[token, round(p, 6)] for token, p in mask] for mask in guesses], ensure_ascii=False))
        return EXIT_OK
    for number, mask in enumerate(guesses, 1):
        print(f"[MASK] {number}: " + "  ".join(f"{token} {p:.3f}" for token, p in mask))
    return EXIT_OK


TRAIN_COMMANDS = {
    "tokenizer": cmd_train_tokenizer,
    "pretrain": cmd_train_pretrain,
    "contrastive": cmd_train_contrastive,
    "recipe": cmd_train_recipe,
}

COMMANDS = {
    "index": cmd_index,
    "search": cmd_search,
    "eval": cmd_eval,
    "delete": cmd_delete,
    "info": cmd_info,
    "compact": cmd_compact,
    "upgrade": cmd_upgrade,
    "ui": cmd_ui,
    "serve": cmd_serve,
    "train": cmd_train,
    "fill": cmd_fill,
}


if __name__ == "__main__":
    sys.exit(main())
