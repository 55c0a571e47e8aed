"""Training recipes behind ``make train-small`` and ``make finetune-minilm``.

``semsearch train recipe NAME`` runs them; the caller passes the scorer
(``Scorer``: dataset directory, model, mode to nDCG@10 and friends), so the
recipes chain training steps without depending on how collections are built.

A recipe is a fixed sequence of stages under its run directory. A finished
stage leaves ``stages/<name>.json`` (its result and wall time) and is skipped
on a rerun; training stages resume from their latest checkpoint; evaluation reuses
the cached collections of ``semsearch eval``. So an interrupted recipe, run
again, continues where it stopped. Run again with other settings, it redoes
the first stage they reach and every stage after it. The last stage writes
``summary.json`` and the recipe prints its table.

``train-small``: an 8k WordPiece tokenizer and a 2-layer, 128-wide BERT
pretrained with masked LM on the public-domain books (small enough for
thousands of optimizer steps in the 45-minute budget: a masked LM predicts
little more than word frequencies until it has taken enough steps to learn
to use context), then contrastive training on SciFact: 600 steps of
Contriever-style crops of its corpus, then 10 epochs of its train split's
query-document pairs with BM25-mined hard negatives, each stage under a
linear warmup and decay and keeping its best checkpoint on a dev set of a
fifth of SciFact's *train* queries (held out of the pairs; the test split
never chooses anything), scored on SciFact's test split.

``finetune-minilm``: the packaged all-MiniLM-L6-v2 trained contrastively
on SciFact's train split, scored before and after on SciFact and on CISI,
Cranfield and MEDLINE (which the fine-tuning must not hurt).
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from retriever.errors import BadInputError
from retriever.storage.atomic import atomic_write_text

Scorer = Callable[[Path, str, str], dict]
"""``score(dataset_dir, model, mode)`` -> ``{"ndcg@10": ..., ...}`` on the dataset's test split."""

DEFAULT_DATASETS = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets"
STAGES = "stages"
SUMMARY = "summary.json"
SETTINGS = "settings.json"
OTHER_DATASETS = ("cisi", "cranfield", "medline")
CHECKPOINT_EVERY = 20  # contrastive steps between checkpoints (a killed recipe loses at most these)


@dataclass(frozen=True)
class SmallRecipe:
    """Settings of ``train-small``: a model small enough to pretrain on a few CPU cores (times: docs/benchmarks.md)."""

    vocab_size: int = 8000
    layers: int = 2
    hidden: int = 128
    heads: int = 2
    intermediate: int = 512
    max_len: int = 128
    positions: str = (
        "rotary"  # absolute positions leave a model this small near unigram guessing for thousands of steps
    )
    dropout: float = 0.0  # less than one pass over the books: nothing to regularise yet
    pretrain_batch: int = 32
    pretrain_lr: float = 2e-3
    pretrain_steps: int = 9000
    pretrain_minutes: float = 44.0
    pretrain_eval_every: int = 1000
    crop_steps: int = 600
    crop_batch: int = 64
    crop_lr: float = 5e-4
    crop_eval_every: int = 150
    pairs_epochs: int = 10
    pairs_batch: int = 32
    pairs_lr: float = 4e-4
    pairs_eval_every: int = 46  # about two epochs of the pairs left after the dev queries
    dev_fraction: float = 0.2  # of SciFact's train queries: held out of training, they choose each stage's model
    dev_documents: int = 1500  # of SciFact's corpus scored at each dev evaluation (every judged one among them)
    seed: int = 0  # initial weights, batch order and masks of every stage


@dataclass(frozen=True)
class FinetuneRecipe:
    """Settings of ``finetune-minilm``: a gentle adaptation that keeps what the encoder knew."""

    model: str = "all-MiniLM-L6-v2"
    epochs: int = 2
    batch: int = 32
    lr: float = 2e-5
    hard_negatives: bool = True
    seed: int = 0


@dataclass(frozen=True)
class StagePlan:
    """A recipe stage as ``_claim`` sees it: the settings it reads and its output directory under the run."""

    name: str
    keys: tuple[str, ...] = ()
    output: str | None = None


def _small_stages(recipe: SmallRecipe) -> list[StagePlan]:
    """``train-small``'s stages in order (a settings key not named here belongs to the first)."""
    names = list(asdict(recipe))
    model = ("layers", "hidden", "heads", "intermediate", "max_len", "positions", "dropout")
    return [
        StagePlan("tokenizer", ("vocab_size",), "tokenizer"),
        StagePlan("pretrain", (*model, *[k for k in names if k.startswith("pretrain_")], "seed"), "mlm"),
        StagePlan("contrastive-crop", (*[k for k in names if k.startswith(("crop_", "dev_"))], "seed"), "crop"),
        StagePlan(
            "contrastive-pairs", (*[k for k in names if k.startswith(("pairs_", "dev_"))], "seed"), "contrastive"
        ),
        StagePlan("eval-mlm-only"),
        StagePlan("eval-contrastive"),
        StagePlan("eval-bm25"),
    ]


def run_stage(run_dir: Path, name: str, work: Callable[[], dict], *, log: Callable[[str], None]) -> dict:
    """Result of stage ``name``: read from ``stages/<name>.json`` or computed by ``work`` and saved there.

    ``seconds`` is the stage's wall time unless ``work`` reports its own
    (a resumed pretraining run reports all its invocations together).
    """
    path = run_dir / STAGES / f"{name}.json"
    if path.is_file():
        log(f"{name}: done earlier ({path})")
        return json.loads(path.read_text(encoding="utf-8"))
    log(f"{name}: running")
    started = time.monotonic()
    result = work()
    result.setdefault("seconds", round(time.monotonic() - started, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=2) + "\n")
    return result


def train_small(
    datasets: Path,
    run_dir: Path,
    score: Scorer,
    recipe: SmallRecipe = SmallRecipe(),
    *,
    log: Callable[[str], None] = print,
) -> dict:
    """Run ``train-small`` and return its summary (also written to ``run_dir/summary.json``)."""
    from training.tokenizer import train_tokenizer

    books, scifact = _require(datasets / "pretrain-text"), _require(datasets / "scifact")
    plans = _small_stages(recipe)
    _claim(run_dir, asdict(recipe), plans, log=log)
    out = {plan.name: run_dir / plan.output for plan in plans if plan.output}
    mlm_dir, contrastive_dir = out["pretrain"], out["contrastive-pairs"]

    def tokenizer() -> dict:
        train_tokenizer([books], out["tokenizer"], vocab_size=recipe.vocab_size)
        return {"vocab_size": recipe.vocab_size}

    work = {
        "tokenizer": tokenizer,
        "pretrain": lambda: _small_pretrain(recipe, books, out["tokenizer"], mlm_dir),
        "contrastive-crop": lambda: _small_crop(recipe, scifact, mlm_dir, out["contrastive-crop"]),
        "contrastive-pairs": lambda: _small_pairs(recipe, scifact, out["contrastive-crop"], contrastive_dir),
        "eval-mlm-only": lambda: score(scifact, str(mlm_dir), "dense"),
        "eval-contrastive": lambda: score(scifact, str(contrastive_dir), "dense"),
        "eval-bm25": lambda: score(scifact, str(contrastive_dir), "bm25"),
    }
    stages = {name: run_stage(run_dir, name, stage, log=log) for name, stage in work.items()}
    return _write_summary(run_dir, _small_summary(recipe, stages), stages)


def _small_pretrain(recipe: SmallRecipe, books: Path, tokenizer_dir: Path, output: Path) -> dict:
    """``train-small``'s masked-LM stage: a small BERT pretrained on the books."""
    from training.pretrain import PretrainConfig, pretrain

    return pretrain(
        PretrainConfig(
            text=[str(books)],
            output_dir=str(output),
            tokenizer=str(tokenizer_dir),
            layers=recipe.layers,
            hidden=recipe.hidden,
            heads=recipe.heads,
            intermediate=recipe.intermediate,
            dropout=recipe.dropout,
            positions=recipe.positions,
            max_len=recipe.max_len,
            batch_size=recipe.pretrain_batch,
            lr=recipe.pretrain_lr,
            max_steps=recipe.pretrain_steps,
            max_minutes=recipe.pretrain_minutes,
            eval_every=recipe.pretrain_eval_every,
            save_every=recipe.pretrain_eval_every,
            resume=True,
            seed=recipe.seed,
        )
    )


def _small_dev(recipe: SmallRecipe, scifact: Path, every: int) -> dict:
    """The dev set both contrastive stages keep their best model by: a fixed draw of SciFact's train queries."""
    return {
        "dev": str(scifact),
        "dev_split": "train",
        "dev_fraction": recipe.dev_fraction,
        "dev_documents": recipe.dev_documents,
        "eval_every": every,
    }


def _small_crop(recipe: SmallRecipe, scifact: Path, mlm_dir: Path, output: Path) -> dict:
    """``train-small``'s unsupervised contrastive stage: crops of SciFact's documents as pairs."""
    from training.contrastive import ContrastiveConfig, contrastive_train

    return contrastive_train(
        ContrastiveConfig(
            from_model=str(mlm_dir),
            output_dir=str(output),
            corpus=[str(scifact)],
            unsupervised="crop",
            max_steps=recipe.crop_steps,
            batch_size=recipe.crop_batch,
            lr=recipe.crop_lr,
            save_every=CHECKPOINT_EVERY,
            resume=True,
            seed=recipe.seed,
            **_small_dev(recipe, scifact, recipe.crop_eval_every),
        )
    )


def _small_pairs(recipe: SmallRecipe, scifact: Path, crop_dir: Path, output: Path) -> dict:
    """``train-small``'s supervised contrastive stage: SciFact's train pairs with hard negatives."""
    from training.contrastive import ContrastiveConfig, contrastive_train

    return contrastive_train(
        ContrastiveConfig(
            from_model=str(crop_dir),
            output_dir=str(output),
            beir=str(scifact),
            split="train",
            hard_negatives=True,
            epochs=recipe.pairs_epochs,
            batch_size=recipe.pairs_batch,
            lr=recipe.pairs_lr,
            save_every=CHECKPOINT_EVERY,
            resume=True,
            seed=recipe.seed,
            **_small_dev(recipe, scifact, recipe.pairs_eval_every),
        )
    )


def _small_summary(recipe: SmallRecipe, stages: dict[str, dict]) -> dict:
    """The ``train-small`` figures from its stages' results."""
    return {
        "recipe": "train-small",
        "settings": asdict(recipe),
        "mlm_accuracy_before": stages["pretrain"]["initial_masked_accuracy"],
        "mlm_accuracy_after": stages["pretrain"]["masked_accuracy"],
        "pretrain_steps": stages["pretrain"]["step"],
        "ndcg_mlm_only": stages["eval-mlm-only"]["ndcg@10"],
        "ndcg_contrastive": stages["eval-contrastive"]["ndcg@10"],
        "ndcg_bm25": stages["eval-bm25"]["ndcg@10"],
    }


def finetune_minilm(
    datasets: Path,
    run_dir: Path,
    score: Scorer,
    recipe: FinetuneRecipe = FinetuneRecipe(),
    *,
    log: Callable[[str], None] = print,
) -> dict:
    """Run ``finetune-minilm`` and return its summary (also written to ``run_dir/summary.json``)."""
    from training.contrastive import ContrastiveConfig, contrastive_train

    scifact = _require(datasets / "scifact")
    others = {name: _require(datasets / name) for name in OTHER_DATASETS}
    training = StagePlan("finetune", tuple(asdict(recipe)), "model")
    evaluations = [
        StagePlan(f"eval-{name}-{when}") for name in ("scifact", *OTHER_DATASETS) for when in ("before", "after")
    ]
    _claim(run_dir, asdict(recipe), [training, *evaluations], log=log)
    model_dir = run_dir / training.output

    def finetune() -> dict:
        return contrastive_train(
            ContrastiveConfig(
                from_model=recipe.model,
                output_dir=str(model_dir),
                beir=str(scifact),
                split="train",
                hard_negatives=recipe.hard_negatives,
                epochs=recipe.epochs,
                batch_size=recipe.batch,
                lr=recipe.lr,
                save_every=CHECKPOINT_EVERY,
                resume=True,
                seed=recipe.seed,
            )
        )

    stages = {"finetune": run_stage(run_dir, "finetune", finetune, log=log)}
    scores: dict[str, dict[str, float]] = {}
    for name, path in {"scifact": scifact, **others}.items():
        for when, model in (("before", recipe.model), ("after", str(model_dir))):
            stage = f"eval-{name}-{when}"
            stages[stage] = run_stage(run_dir, stage, lambda p=path, m=model: score(p, m, "dense"), log=log)
            scores.setdefault(name, {})[when] = stages[stage]["ndcg@10"]
    summary = {
        "recipe": "finetune-minilm",
        "settings": asdict(recipe),
        "ndcg_before": scores["scifact"]["before"],
        "ndcg_after": scores["scifact"]["after"],
        "others": {name: scores[name] for name in OTHER_DATASETS},
    }
    return _write_summary(run_dir, summary, stages)


def _write_summary(run_dir: Path, summary: dict, stages: dict[str, dict]) -> dict:
    """``summary`` with ``wall_seconds`` (each stage's, and their total) added, written to ``run_dir/summary.json``."""
    seconds = {name: stage["seconds"] for name, stage in stages.items()}
    summary = {**summary, "wall_seconds": {**seconds, "total": round(sum(seconds.values()), 1)}}
    atomic_write_text(run_dir / SUMMARY, json.dumps(summary, indent=2) + "\n")
    return summary


def format_small(summary: dict) -> str:
    """The ``train-small`` table: masked-LM accuracy, SciFact nDCG@10 and wall times, with the bars."""
    gain = summary["ndcg_contrastive"] - summary["ndcg_mlm_only"]
    rows = [
        ("held-out masked accuracy, untrained", f"{summary['mlm_accuracy_before']:.4f}", ""),
        (
            f"held-out masked accuracy, after {summary['pretrain_steps']} steps",
            f"{summary['mlm_accuracy_after']:.4f}",
            _bar(summary["mlm_accuracy_after"] >= 0.25, ">= 0.25"),
        ),
        ("SciFact nDCG@10, BM25", f"{summary['ndcg_bm25']:.4f}", ""),
        ("SciFact nDCG@10, MLM only (mean pooling)", f"{summary['ndcg_mlm_only']:.4f}", ""),
        (
            "SciFact nDCG@10, contrastive",
            f"{summary['ndcg_contrastive']:.4f}",
            _bar(gain >= 0.15, f"{gain:+.4f} over MLM only, bar +0.15"),
        ),
    ]
    return "\n".join([_table(rows, ("train-small", "value", "")), "", _wall_table(summary["wall_seconds"])])


def format_finetune(summary: dict) -> str:
    """The ``finetune-minilm`` table: nDCG@10 before and after on each dataset, with the bars."""
    rows = [
        (
            "scifact",
            f"{summary['ndcg_before']:.4f}",
            f"{summary['ndcg_after']:.4f}",
            f"{summary['ndcg_after'] - summary['ndcg_before']:+.4f}",
            _bar(summary["ndcg_after"] >= 0.69, "after >= 0.69"),
        )
    ]
    for name, scores in summary["others"].items():
        change = scores["after"] - scores["before"]
        rows.append(
            (
                name,
                f"{scores['before']:.4f}",
                f"{scores['after']:.4f}",
                f"{change:+.4f}",
                _bar(change >= -0.01, "loss <= 0.01"),
            )
        )
    header = ("dense nDCG@10", "before", "after", "change", "")
    return "\n".join([_table(rows, header), "", _wall_table(summary["wall_seconds"])])


def _bar(met: bool, text: str) -> str:
    return f"{'met' if met else 'MISSED'} ({text})"


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [header, tuple("-" * w for w in widths), *rows]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def _wall_table(seconds: dict[str, float]) -> str:
    rows = [(name, f"{value:.0f}", f"{value / 60:.1f}") for name, value in seconds.items()]
    return _table(rows, ("stage", "seconds", "minutes"))


def _claim(run_dir: Path, settings: dict, stages: list[StagePlan], *, log: Callable[[str], None]) -> None:
    """Record the recipe's settings in ``run_dir``; where a run with other settings left results, clear the
    first stage those settings reach (result and output directory) and every stage after it."""
    path = run_dir / SETTINGS
    if path.is_file():
        earlier = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in settings.keys() | earlier.keys() if settings.get(k) != earlier.get(k))
        if changed:
            first = next((i for i, stage in enumerate(stages) if set(stage.keys) & set(changed)), 0)
            log(f"settings changed ({', '.join(changed)}): {stages[first].name} and the stages after it run again")
            for stage in stages[first:]:
                (run_dir / STAGES / f"{stage.name}.json").unlink(missing_ok=True)
                if stage.output:
                    shutil.rmtree(run_dir / stage.output, ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(settings, indent=2) + "\n")


def _require(path: Path) -> Path:
    if not path.exists():
        raise BadInputError(f"{path}: not found (the recipes read ../shared/datasets; see --datasets)")
    return path


@dataclass(frozen=True)
class Recipe:
    """A recipe as ``semsearch train recipe`` runs it: ``run(datasets, run_dir, score, settings, log=)``,
    ``table(summary)`` and its default ``settings``."""

    run: Callable[..., dict]
    table: Callable[[dict], str]
    settings: SmallRecipe | FinetuneRecipe


RECIPES = {
    "train-small": Recipe(train_small, format_small, SmallRecipe()),
    "finetune-minilm": Recipe(finetune_minilm, format_finetune, FinetuneRecipe()),
}
