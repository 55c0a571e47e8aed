"""``semsearch train``: tokenizer, pretrain, contrastive, recipe.

Every flag that mirrors a setting of the training code takes its default
from there: ``PretrainConfig`` and ``ContrastiveConfig`` fields (the flag's
``dest`` is the field's name, and ``config_from`` passes it on),
``train_tokenizer``'s parameters, the recipe names. Each
step's flags are added only when that step runs, so only it imports its
module (and torch).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import MISSING, fields, replace
from pathlib import Path
from typing import Any, Callable

from app.commands.base import EXIT_OK, Parser, add_commands, parameter_defaults


def register(sub) -> None:
    """Add ``train`` (with its steps) to the command's subparsers."""
    add_commands(
        sub, [("train", "train a tokenizer, pretrain a BERT encoder or fine-tune it contrastively", add_train_steps)]
    )


def add_train_steps(p: argparse.ArgumentParser) -> None:
    """The steps of ``semsearch train``, each a subparser populated when it runs."""
    train = p.add_subparsers(dest="train_command", metavar="STEP", parser_class=Parser)
    train.required = True
    add_commands(
        train,
        [
            ("tokenizer", "train a WordPiece tokenizer on text files", add_tokenizer_flags),
            ("pretrain", "masked-LM pretraining of a BERT encoder", add_pretrain_flags),
            (
                "contrastive",
                "contrastive fine-tuning of a sentence encoder (in-batch negatives)",
                add_contrastive_flags,
            ),
            ("recipe", "run a training recipe end to end (resumable) and print its table", add_recipe_flags),
        ],
    )


def field_defaults(config: type) -> dict[str, Any]:
    """The default of each field of the dataclass ``config`` that has one, by name."""
    return {field.name: field.default for field in fields(config) if field.default is not MISSING}


def config_from(config: type, args: argparse.Namespace):
    """``config(...)`` from the parsed flags named as its fields; the others keep their defaults."""
    given = vars(args)
    return config(**{field.name: given[field.name] for field in fields(config) if field.name in given})


def add_tokenizer_flags(t: argparse.ArgumentParser) -> None:
    """Flags of ``train tokenizer``; defaults are ``train_tokenizer``'s parameters."""
    from training.tokenizer import train_tokenizer

    d = parameter_defaults(train_tokenizer)
    t.add_argument("paths", nargs="+", metavar="PATH", help="text files, or directories walked for *.txt")
    t.add_argument("-o", "--output", required=True, metavar="DIR", help="directory for the tokenizer")
    add_setting(t, d, "--vocab-size", int, "vocabulary size (default %(default)s)", metavar="N")
    case = t.add_mutually_exclusive_group()
    case.add_argument(
        "--lowercase",
        dest="lowercase",
        action="store_true",
        default=d["lowercase"],
        help="lowercase and strip accents" + (" (default)" if d["lowercase"] else ""),
    )
    case.add_argument(
        "--cased",
        dest="lowercase",
        action="store_false",
        help="keep case and accents" + ("" if d["lowercase"] else " (default)"),
    )
    t.add_argument(
        "--min-frequency",
        type=int,
        default=d["min_frequency"],
        metavar="N",
        help="fewest occurrences of a merge (default %(default)s)",
    )
    t.set_defaults(handler=run_tokenizer)


def add_pretrain_flags(t: argparse.ArgumentParser) -> None:
    """Flags of ``train pretrain``, one per ``PretrainConfig`` field (but weight decay, masking rate, device)."""
    from training.pretrain import POSITIONS, PretrainConfig

    d = field_defaults(PretrainConfig)
    t.add_argument(
        "--text", nargs="+", required=True, metavar="PATH", help="text files, or directories walked for *.txt"
    )
    source = t.add_mutually_exclusive_group(required=True)
    source.add_argument("--tokenizer", metavar="DIR", help="tokenizer of a new model (see 'semsearch train tokenizer')")
    source.add_argument(
        "--from",
        dest="from_model",
        metavar="MODEL",
        help="model directory to continue pretraining (its tokenizer is used)",
    )
    t.add_argument(
        "-o",
        "--output",
        dest="output_dir",
        required=True,
        metavar="DIR",
        help="output directory (final model, log.jsonl, checkpoints/)",
    )
    add_setting(t, d, "--layers", int, "transformer layers of a new model (default %(default)s)", metavar="L")
    add_setting(t, d, "--hidden", int, "hidden size of a new model (default %(default)s)", metavar="H")
    add_setting(t, d, "--heads", int, "attention heads of a new model (default %(default)s)", metavar="A")
    t.add_argument(
        "--intermediate",
        type=int,
        default=d["intermediate"],
        metavar="I",
        help="feed-forward size of a new model (default 4 x hidden)",
    )
    add_setting(t, d, "--dropout", float, "hidden and attention dropout of a new model (default %(default)g)")
    t.add_argument(
        "--positions",
        choices=POSITIONS,
        default=d["positions"],
        help="position embeddings of a new model: absolute (BertForMaskedLM) or rotary "
        "(RoFormerForMaskedLM; learns far faster at small sizes); default %(default)s",
    )
    add_setting(t, d, "--max-len", int, "tokens per sequence (default %(default)s)", metavar="N")
    add_setting(t, d, "--max-steps", int, "optimizer steps (default: one pass over the text)", metavar="N")
    add_setting(t, d, "--max-minutes", float, "stop cleanly, and save, after M minutes", metavar="M")
    add_setting(t, d, "--batch-size", int, "sequences per micro-batch (default %(default)s)", metavar="B")
    add_setting(t, d, "--grad-accum", int, "micro-batches per optimizer step (default %(default)s)", metavar="G")
    add_schedule_flags(t, d)
    add_setting(t, d, "--eval-fraction", float, "last share of sequences held out (default %(default)g)")
    add_setting(t, d, "--eval-every", int, "held-out evaluation every N steps (default %(default)s)", metavar="N")
    add_checkpoint_flags(t, d)
    add_setting(t, d, "--seed", int, "seed for initialisation, data order and masks (default %(default)s)")
    t.add_argument(
        "--nsp", action="store_true", default=d["nsp"], help="add next-sentence prediction (BertForPreTraining)"
    )
    add_output_flags(t)
    t.set_defaults(handler=run_pretrain)


def add_contrastive_flags(t: argparse.ArgumentParser) -> None:
    """Flags of ``train contrastive``, one per ``ContrastiveConfig`` field (but weight decay, device)."""
    from training.contrastive import PRECISIONS, UNSUPERVISED, ContrastiveConfig

    d = field_defaults(ContrastiveConfig)
    t.add_argument(
        "--from",
        dest="from_model",
        required=True,
        metavar="MODEL",
        help="model directory (sentence-transformers, or a plain BERT such as 'train pretrain' output)",
    )
    t.add_argument(
        "-o", "--output", dest="output_dir", required=True, metavar="DIR", help="output directory (model, log.jsonl)"
    )
    add_pairs_flags(t, d, UNSUPERVISED)
    add_setting(t, d, "--max-steps", int, "optimizer steps (default: --epochs passes over the pairs)", metavar="N")
    add_setting(t, d, "--epochs", int, "passes over the pairs without --max-steps (default %(default)s)", metavar="N")
    add_setting(t, d, "--batch-size", int, "pairs per batch (default %(default)s)", metavar="B")
    add_schedule_flags(t, d)
    add_setting(t, d, "--scale", float, "similarity scale, i.e. 1 / temperature (default %(default)g)")
    add_setting(t, d, "--max-len", int, "tokens per text (default: the model's window)", metavar="N")
    add_dev_flags(t, d)
    add_checkpoint_flags(t, d)
    t.add_argument(
        "--max-minutes",
        type=float,
        default=d["max_minutes"],
        metavar="M",
        help="stop cleanly, and save, after M minutes (rerun with --resume to go on)",
    )
    t.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=d["precision"],
        help="bf16 autocast of the forward pass; auto: where the CPU has bf16 arithmetic (default %(default)s)",
    )
    add_setting(t, d, "--seed", int, "seed for initialisation, data order and crops (default %(default)s)")
    add_output_flags(t)
    t.set_defaults(handler=run_contrastive)


def add_pairs_flags(t: argparse.ArgumentParser, d: dict[str, Any], unsupervised: tuple[str, ...]) -> None:
    """Where ``train contrastive``'s pairs come from: a pairs file, a BEIR split, or a corpus without labels."""
    pairs = t.add_mutually_exclusive_group()
    pairs.add_argument(
        "--pairs", default=d["pairs"], metavar="FILE", help='JSONL of {"anchor", "positive"[, "negative"]}'
    )
    pairs.add_argument(
        "--beir", default=d["beir"], metavar="DIR", help="BEIR dataset: (query, relevant document) pairs of --split"
    )
    pairs.add_argument(
        "--corpus",
        nargs="+",
        default=d["corpus"],
        metavar="PATH",
        help="text files/directories or BEIR corpora, with --unsupervised",
    )
    t.add_argument("--split", default=d["split"], help="qrels split of --beir (default %(default)s)")
    t.add_argument(
        "--unsupervised",
        choices=unsupervised,
        default=d["unsupervised"],
        help="pairs from --corpus: text with itself (simcse) or two random spans (crop)",
    )
    t.add_argument(
        "--hard-negatives",
        action="store_true",
        default=d["hard_negatives"],
        help="with --beir: one BM25-mined negative per pair",
    )


def add_dev_flags(t: argparse.ArgumentParser, d: dict[str, Any]) -> None:
    """The dev set ``train contrastive`` keeps its best model by, and how often it is scored."""
    t.add_argument(
        "--dev", default=d["dev"], metavar="DIR", help="BEIR dataset scored (dense nDCG@10) to keep the best model"
    )
    t.add_argument(
        "--dev-split",
        default=d["dev_split"],
        metavar="SPLIT",
        help="qrels split of --dev (default dev if present, else test)",
    )
    t.add_argument(
        "--dev-fraction",
        type=float,
        default=d["dev_fraction"],
        metavar="F",
        help="score only this share of the dev split's queries (a fixed draw by query id); "
        "when --beir trains on the same split, those queries are left out of training",
    )
    t.add_argument(
        "--dev-documents",
        type=int,
        default=d["dev_documents"],
        metavar="N",
        help="score over at most N documents of the dev corpus: all the dev queries judge, then a "
        "fixed draw of the rest (faster evaluations; default: the whole corpus)",
    )
    add_setting(t, d, "--eval-every", int, "dev evaluation every N steps (default %(default)s)", metavar="N")


def add_recipe_flags(t: argparse.ArgumentParser) -> None:
    """Flags of ``train recipe``: the recipe (one of ``RECIPES``), ``--datasets``, ``-o``, ``--json``."""
    from training.recipes import RECIPES

    t.add_argument(
        "recipe",
        choices=tuple(RECIPES),
        help="train-small: tokenizer, small BERT, contrastive on SciFact; "
        "finetune-minilm: adapt the packaged MiniLM to SciFact",
    )
    t.add_argument(
        "--datasets",
        metavar="DIR",
        help="directory with pretrain-text/, scifact/, cisi/, cranfield/, medline/ (default ../shared/datasets)",
    )
    t.add_argument("-o", "--output", metavar="DIR", help="run directory (default runs/RECIPE, runs/RECIPE-seed-N)")
    t.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="seed of initial weights, batch order and masks (default 0); another seed, another run",
    )
    t.add_argument("--json", action="store_true", help="print the summary as JSON instead of the table")
    t.set_defaults(handler=run_recipe)


def add_setting(t: argparse.ArgumentParser, d: dict[str, Any], flag: str, kind: type, text: str, **options) -> None:
    """A numeric flag whose default is the config field named as the flag (``--max-len`` -> ``d["max_len"]``)."""
    t.add_argument(flag, type=kind, default=d[flag[2:].replace("-", "_")], help=text, **options)


def add_schedule_flags(t: argparse.ArgumentParser, d: dict[str, Any]) -> None:
    """``--lr`` and ``--warmup-ratio``, defaults from the config's fields ``d``."""
    add_setting(t, d, "--lr", float, "peak learning rate (default %(default)g)")
    add_setting(t, d, "--warmup-ratio", float, "share of steps warming up (default %(default)g)")


def add_checkpoint_flags(t: argparse.ArgumentParser, d: dict[str, Any]) -> None:
    """``--save-every`` and ``--resume``, defaults from the config's fields ``d``."""
    add_setting(t, d, "--save-every", int, "checkpoint every N steps (default %(default)s)", metavar="N")
    t.add_argument(
        "--resume", action="store_true", default=d["resume"], help="continue from the latest checkpoint in DIR"
    )


def add_output_flags(t: argparse.ArgumentParser) -> None:
    """``--json`` (the summary on stdout) and ``-q/--quiet`` (no progress bar)."""
    t.add_argument("--json", action="store_true", help="print the summary as JSON")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run_tokenizer(args) -> int:
    """Train a WordPiece tokenizer on ``args.paths`` and save it to ``args.output``."""
    from training.tokenizer import train_tokenizer

    output = train_tokenizer(
        args.paths, args.output, vocab_size=args.vocab_size, lowercase=args.lowercase, min_frequency=args.min_frequency
    )
    print(f"semsearch: tokenizer saved to {output}", file=sys.stderr)
    return EXIT_OK


def run_pretrain(args) -> int:
    """Masked-LM pretraining with the ``PretrainConfig`` the flags describe."""
    from training.pretrain import PretrainConfig, pretrain

    summary = pretrain(config_from(PretrainConfig, args), progress=not args.quiet and not args.json)
    return print_summary(args, summary, describe_pretraining)


def run_contrastive(args) -> int:
    """Contrastive training with the ``ContrastiveConfig`` the flags describe."""
    from training.contrastive import ContrastiveConfig, contrastive_train

    summary = contrastive_train(config_from(ContrastiveConfig, args), progress=not args.quiet and not args.json)
    return print_summary(args, summary, describe_contrastive)


def print_summary(args, summary: dict, describe: Callable[[dict], str]) -> int:
    """A training run's summary: JSON on stdout with ``--json``, else ``describe(summary)`` on stderr."""
    if args.json:
        print(json.dumps(summary))
    else:
        print(describe(summary), file=sys.stderr)
    return EXIT_OK


def describe_pretraining(summary: dict) -> str:
    """One line: the last step, its figures, where the model went."""
    figures = ", ".join(
        f"{key} {value:.4g}" for key, value in summary.items() if isinstance(value, float) and key != "seconds"
    )
    return (
        f"semsearch: step {summary['step']}{', ' + figures if figures else ''}; model saved to {summary['output_dir']}"
    )


def describe_contrastive(summary: dict) -> str:
    """One line: steps, last loss, best dev nDCG@10, where the model went."""
    dev = (
        f", best dev nDCG@10 {summary['best_dev_ndcg']:.4f} (step {summary['best_step']})"
        if summary["best_dev_ndcg"] is not None
        else ""
    )
    loss = f", loss {summary['train_loss']:.4g}" if summary["train_loss"] is not None else ""
    return f"semsearch: {summary['steps']} steps{loss}{dev}; model saved to {summary['output_dir']}"


def run_recipe(args) -> int:
    """Run a recipe (resumable), scoring its models with ``indexer.beir.evaluate``, and print its table."""
    from indexer.beir import evaluate
    from training.recipes import DEFAULT_DATASETS, RECIPES

    def score(dataset: Path, model: str, mode: str) -> dict:
        result = evaluate(dataset, split="test", mode=mode, model=model)
        return {key: result[key] for key in ("ndcg@10", "recall@100", "queries", "seconds")}

    recipe = RECIPES[args.recipe]
    settings = recipe.settings if args.seed is None else replace(recipe.settings, seed=args.seed)
    default_dir = Path("runs") / (args.recipe if args.seed is None else f"{args.recipe}-seed-{args.seed}")
    run_dir = Path(args.output) if args.output else default_dir
    summary = recipe.run(
        Path(args.datasets) if args.datasets else DEFAULT_DATASETS,
        run_dir,
        score,
        settings,
        log=lambda line: print(f"semsearch: {args.recipe}: {line}", file=sys.stderr),
    )
    print(json.dumps(summary, indent=2) if args.json else recipe.table(summary))
    print(f"semsearch: summary written to {run_dir / 'summary.json'}", file=sys.stderr)
    return EXIT_OK
