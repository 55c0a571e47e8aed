"""Contrastive fine-tuning of a sentence encoder (InfoNCE with in-batch negatives).

Pairs come from a JSONL file, a BEIR training split or unlabelled text
(``training.pairs``). The loss is sentence-transformers'
``MultipleNegativesRankingLoss``; batches never hold the same text twice, so
no in-batch "negative" is secretly a positive.

The shared loop (``training.loop``: AdamW, linear warmup then linear decay,
gradient clipping, checkpoints, resume) runs a contrastive stage. Batch
order depends only on the seed and the epoch, so a run resumed from a
checkpoint (``OUT/checkpoints/step-N``, every ``save_every`` steps) trains
on the same batches as an uninterrupted one. With a dev dataset the model is
scored (nDCG@10, dense search through a temporary ``Collection``;
``training.dev_set``) every ``eval_every`` steps and at the end, and ``OUT``
keeps the best one; without, ``OUT`` holds the final model.
``OUT/log.jsonl`` has one record per step. ``OUT`` is a sentence-transformers
directory (mean pooling) that ``retriever.Embedder`` loads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from retriever.errors import BadInputError
from training.dev_set import DevSet, default_dev_split, evaluate_dev, is_dev_query, load_dev
from training.loop import Schedule, Stage, open_run, train_loop
from training.pairs import Pair, beir_pairs, crop_pairs, no_duplicate_batches, read_corpus, read_pairs, simcse_pairs

UNSUPERVISED = ("simcse", "crop")
PRECISIONS = ("auto", "fp32", "bf16")

Batches = Callable[[int], tuple[list[Pair], list[list[int]]]]
"""``batches(epoch)`` -> the epoch's pairs and their duplicate-free batches (indices into the pairs)."""


@dataclass
class ContrastiveConfig:
    """Everything a contrastive run depends on.

    Exactly one pair source: ``pairs`` (JSONL), ``beir`` (with ``split``) or
    ``corpus`` (with ``unsupervised``). Without ``max_steps`` the run lasts
    ``epochs`` passes over the pairs.
    """

    from_model: str
    output_dir: str
    pairs: str | None = None
    beir: str | None = None
    split: str = "train"
    corpus: list[str] | None = None
    unsupervised: str | None = None
    hard_negatives: bool = False
    max_steps: int | None = None
    epochs: int = 1
    batch_size: int = 32
    lr: float = 2e-5
    scale: float = 20.0
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_len: int | None = None
    dev: str | None = None
    dev_split: str | None = None  # default: "dev" when the dataset has it, else "test"
    dev_fraction: float | None = None  # only this share of the dev split's queries; left out of training pairs
    dev_documents: int | None = None  # cut the dev corpus to this many (every judged one first) for faster scoring
    eval_every: int = 500
    save_every: int = 500
    resume: bool = False
    seed: int = 0
    device: str | None = None
    max_minutes: float | None = None  # stop cleanly, with a checkpoint and the model saved, after this long
    precision: str = "auto"  # "fp32", "bf16" (autocast), or "auto": bf16 on a CPU with bf16 arithmetic, or CUDA

    def validate(self) -> None:
        """Raise ``BadInputError`` for inconsistent or out-of-range settings."""
        sources = [s for s in (self.pairs, self.beir, self.corpus) if s]
        if len(sources) != 1:
            raise BadInputError("give exactly one pair source: --pairs, --beir or --corpus with --unsupervised")
        if self.corpus and self.unsupervised not in UNSUPERVISED:
            raise BadInputError(f"--corpus needs --unsupervised {' or '.join(UNSUPERVISED)}")
        if self.unsupervised and not self.corpus:
            raise BadInputError("--unsupervised needs --corpus")
        if self.hard_negatives and not self.beir:
            raise BadInputError("--hard-negatives mines BM25 negatives for --beir (a pairs file gives its own)")
        for name in ("epochs", "batch_size", "eval_every", "save_every"):
            if getattr(self, name) < 1:
                raise BadInputError(f"{name.replace('_', ' ')} must be at least 1, got {getattr(self, name)}")
        if self.batch_size < 2:
            raise BadInputError("batch size must be at least 2 (in-batch negatives)")
        if self.max_steps is not None and self.max_steps < 1:
            raise BadInputError(f"max steps must be at least 1, got {self.max_steps}")
        if self.max_len is not None and self.max_len < 8:
            raise BadInputError(f"max length must be at least 8, got {self.max_len}")
        if self.precision not in PRECISIONS:
            raise BadInputError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.lr <= 0 or self.scale <= 0:
            raise BadInputError("learning rate and scale must be positive")
        if not 0 <= self.warmup_ratio < 1:
            raise BadInputError("warmup ratio must be in [0, 1)")
        if self.dev_documents is not None and not (self.dev and self.dev_documents >= 1):
            raise BadInputError("--dev-documents needs --dev and must be at least 1")
        if self.dev_fraction is not None and not (self.dev and 0 < self.dev_fraction < 1):
            raise BadInputError("--dev-fraction needs --dev and must be between 0 and 1 (exclusive)")
        if self.trains_on_dev_queries() and self.dev_fraction is None:
            raise BadInputError(
                f"the dev set is the training split {self.split!r} of {self.beir}: "
                "give --dev-fraction to hold some of its queries out of training"
            )

    def trains_on_dev_queries(self) -> bool:
        """Whether the training pairs come from the dev set's own dataset and split."""
        if not (self.beir and self.dev):
            return False
        dev_split = self.dev_split or default_dev_split(self.dev)
        return Path(self.beir).resolve() == Path(self.dev).resolve() and self.split == dev_split


def load_mean_pooling_model(location: str | Path, device: str | None = None):
    """A ``SentenceTransformer`` from a sentence-transformers or plain HF directory; its pooling must be mean.

    ``"all-MiniLM-L6-v2"`` names the packaged default encoder.
    """
    from sentence_transformers.sentence_transformer.modules import Pooling

    from retriever.encoding.models import open_sentence_transformer, resolve_model

    location = resolve_model(location)[1]
    if not Path(location).is_dir():
        raise BadInputError(f"{location}: no such model directory")
    model = open_sentence_transformer(location, device)  # no remote code
    poolings = [m for m in model if isinstance(m, Pooling)]
    if not poolings or any(m.pooling_mode != "mean" for m in poolings):
        modes = ", ".join(m.pooling_mode for m in poolings) or "none"
        raise BadInputError(f"model {str(location)!r} uses {modes} pooling; semsearch embeds with mean pooling only")
    return model


def _build_pairs(config: ContrastiveConfig) -> Callable[[int], list[Pair]]:
    """Pairs for each epoch (crops are redrawn every epoch; other sources are fixed)."""
    if config.pairs:
        pairs = read_pairs(config.pairs)
        return lambda epoch: pairs
    if config.beir:
        fraction = config.dev_fraction
        leave_out = (lambda query_id: is_dev_query(query_id, fraction)) if config.trains_on_dev_queries() else None
        pairs = beir_pairs(
            config.beir, config.split, hard_negatives=config.hard_negatives, seed=config.seed, leave_out=leave_out
        )
        return lambda epoch: pairs
    documents = read_corpus(config.corpus or [])
    if config.unsupervised == "simcse":
        pairs = simcse_pairs(documents)
        return lambda epoch: pairs
    crop_pairs(documents, config.seed)  # fail early when no document is long enough
    return lambda epoch: crop_pairs(documents, config.seed * 1_000_003 + epoch)


def _epoch_batches(config: ContrastiveConfig) -> Batches:
    """``batches(epoch)``: the pairs of ``epoch`` and their duplicate-free batches (seeded by the epoch)."""
    pairs_of = _build_pairs(config)

    def batches(epoch: int) -> tuple[list[Pair], list[list[int]]]:
        pairs = pairs_of(epoch)
        return pairs, no_duplicate_batches(pairs, config.batch_size, config.seed * 1_000_003 + epoch)

    return batches


def _columns(pairs: list[Pair]) -> list[list[str]]:
    columns = [[p.anchor for p in pairs], [p.positive for p in pairs]]
    if all(p.negative is not None for p in pairs):  # mixed batches train without their negatives
        columns.append([p.negative for p in pairs])  # type: ignore[misc]
    return columns


def contrastive_train(
    config: ContrastiveConfig, *, progress: bool = True, callback: Callable[[dict], None] | None = None
) -> dict:
    """Fine-tune ``config.from_model`` contrastively and save it to ``config.output_dir``.

    Args:
        config: The run's settings.
        progress: Progress bar on stderr.
        callback: Called with each step's log record (after any checkpoint of that step).

    Returns:
        Summary: ``steps``, ``train_loss`` (last step), ``best_dev_ndcg``
        (``None`` without a dev set), ``best_step``, ``pairs``, ``seconds``
        (resumed invocations summed), ``output_dir``.
    """
    config.validate()
    run = open_run(config.output_dir, resume=config.resume, progress=progress, callback=callback)
    dev = load_dev(config.dev, config.dev_split, config.dev_fraction, config.dev_documents) if config.dev else None
    batches = _epoch_batches(config)
    first, first_batches = batches(0)
    if not first_batches:
        raise BadInputError("too few distinct pairs for one batch of two")
    total = config.max_steps or config.epochs * len(first_batches)

    random.seed(config.seed)
    torch.manual_seed(config.seed)
    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = load_mean_pooling_model(run.checkpoint or config.from_model, device)
    if config.max_len:
        model.max_seq_length = config.max_len
    stage = _Contrastive(model, config.scale, batches, run.output, dev, autocast_bf16(config.precision, device))
    outcome = train_loop(
        run,
        stage,
        Schedule(
            total=total,
            lr=config.lr,
            weight_decay=config.weight_decay,
            warmup_ratio=config.warmup_ratio,
            save_every=config.save_every,
            eval_every=config.eval_every,
            max_minutes=config.max_minutes,
        ),
    )
    return {
        "steps": total,
        "train_loss": outcome.record.get("train_loss"),
        "best_dev_ndcg": stage.best_ndcg,
        "best_step": stage.best_step,
        "pairs": len(first),
        "seconds": outcome.seconds,
        "output_dir": str(run.output),
    }


def autocast_bf16(precision: str, device: str) -> bool:
    """Whether the forward pass runs under bf16 autocast: ``auto`` says yes on CUDA and on CPUs with bf16
    arithmetic (AVX-512 BF16 or AMX), where it is faster (docs/benchmarks.md); elsewhere bf16 is emulated
    and slower."""
    if precision != "auto":
        return precision == "bf16"
    if str(device).startswith("cuda"):
        return True
    from retriever.encoding.backends.choice import has_bf16

    return has_bf16()


class _Contrastive(Stage):
    """Contrastive training as a loop stage: duplicate-free batches in seeded epochs, best-on-dev keeping.

    The checkpointed ``epoch`` and ``position`` (batches of the epoch
    taken) say where a resumed run continues; epoch ``e``'s pairs and batches
    are rebuilt from the seed and ``e``.
    """

    label = "contrastive"

    def __init__(self, model, scale: float, batches: Batches, output: Path, dev: DevSet | None, bf16: bool = False):
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

        self.model, self.batches_of, self.output, self.dev, self.bf16 = model, batches, output, dev, bf16
        self.loss_fn = MultipleNegativesRankingLoss(model, scale=scale)
        self.evaluates = dev is not None
        self.epoch, self.position = 0, 0
        self.pairs, self.batches = batches(0)
        self.rows: list[Pair] = []
        self.best_ndcg: float | None = None
        self.best_step: int | None = None

    def loss(self, micro_step: int) -> torch.Tensor:
        if self.position == len(self.batches):
            self.epoch, self.position = self.epoch + 1, 0
            self.pairs, self.batches = self.batches_of(self.epoch)
        self.rows = [self.pairs[i] for i in self.batches[self.position]]
        self.position += 1
        device = self.model.device
        features = [
            {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in self.model.preprocess(column).items()}
            for column in _columns(self.rows)
        ]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16):
            return self.loss_fn(features, None)

    def step_fields(self) -> dict:
        return {"batch": len(self.rows)}

    def evaluate(self, step: int) -> dict:
        ndcg = evaluate_dev(self.model, self.dev)
        fields: dict = {"dev_ndcg@10": ndcg}
        if self.best_ndcg is None or ndcg > self.best_ndcg:
            self.best_ndcg, self.best_step = ndcg, step
            self.model.save(str(self.output))
            fields["saved"] = True
        return fields

    def describe(self, record: dict) -> str:
        return (
            f"step {record['step']}: dev nDCG@10 {record['dev_ndcg@10']:.4f} "
            f"(best {self.best_ndcg:.4f} at step {self.best_step})"
        )

    def save_model(self, directory: Path) -> None:
        self.model.save(str(directory))

    def state(self) -> dict:
        state: dict = {"epoch": self.epoch, "position": self.position}
        if self.best_ndcg is not None:
            state.update(best_ndcg=self.best_ndcg, best_step=self.best_step)
        return state

    def restore(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self.best_ndcg, self.best_step = state.get("best_ndcg"), state.get("best_step")
        if self.epoch:
            self.pairs, self.batches = self.batches_of(self.epoch)

    def finish(self) -> None:
        self.model.eval()
        if self.dev is None:
            self.model.save(str(self.output))
