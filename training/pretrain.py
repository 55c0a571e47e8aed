"""Masked-language-model pretraining of a BERT encoder.

The shared loop (``training.loop``: AdamW, linear warmup then linear decay,
gradient accumulation and clipping, checkpoints, resume) runs a masked-LM
stage: dynamic masking (``training.masking``), optional next-sentence prediction.
A new model places tokens with BERT's learned absolute position embeddings
(``BertForMaskedLM``) or with rotary position embeddings (RoFormer's BERT,
``RoFormerForMaskedLM``): rotary attention sees relative offsets from the
first step, so a small model learns to read a masked token's neighbours
in hundreds of steps rather than thousands.
Checkpoints land in ``OUT/checkpoints/step-N`` (model, tokenizer, optimizer,
scheduler, step and RNG states, the masking generator's state; see
``training.checkpoints``). Batch order depends only on the seed and the
step, so a resumed run sees the same data as an uninterrupted one. The final
``BertForMaskedLM`` and its tokenizer are saved to ``OUT`` itself, where
``Embedder`` (mean pooling) and ``semsearch fill`` load them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from retriever.errors import BadInputError
from training.data import PackedSequences, collect_text_files, pack_sequences, read_documents
from training.loop import LOG, Run, Schedule, Stage, open_run, train_loop
from training.masking import IGNORE_INDEX, MaskingCollator

POSITIONS = ("absolute", "rotary")
_MODEL_TYPES = ("bert", "roformer")  # models whose masked-LM head masked_lm_loss knows


@dataclass
class PretrainConfig:
    """Everything a pretraining run depends on.

    Exactly one of ``tokenizer`` (a new model of the given size) and
    ``from_model`` (continue pretraining a model directory, its tokenizer
    used, size flags ignored) is set. Without ``max_steps`` the run lasts one
    pass over the training sequences; ``max_minutes`` stops it earlier, cleanly.
    """

    text: list[str]
    output_dir: str
    tokenizer: str | None = None
    from_model: str | None = None
    layers: int = 12
    hidden: int = 768
    heads: int = 12
    intermediate: int | None = None  # default 4 * hidden
    dropout: float = 0.1  # hidden and attention dropout of a new model
    positions: str = "absolute"  # a new model's position embeddings: "absolute" or "rotary"
    max_len: int = 128
    max_steps: int | None = None
    max_minutes: float | None = None
    batch_size: int = 32
    grad_accum: int = 1
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_ratio: float = 0.06
    eval_fraction: float = 0.02
    eval_every: int = 500
    save_every: int = 1000
    mlm_probability: float = 0.15
    nsp: bool = False
    resume: bool = False
    seed: int = 0
    device: str | None = None

    def validate(self) -> None:
        """Raise ``BadInputError`` for inconsistent or out-of-range settings."""
        if (self.tokenizer is None) == (self.from_model is None):
            raise BadInputError("give exactly one of a tokenizer (new model) or a model to continue from")
        for name in ("layers", "hidden", "heads", "max_len", "batch_size", "grad_accum", "eval_every", "save_every"):
            if getattr(self, name) < 1:
                raise BadInputError(f"{name.replace('_', ' ')} must be at least 1, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise BadInputError(f"hidden size {self.hidden} is not a multiple of {self.heads} heads")
        if self.max_steps is not None and self.max_steps < 1:
            raise BadInputError(f"max steps must be at least 1, got {self.max_steps}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise BadInputError(f"max minutes must be positive, got {self.max_minutes}")
        if self.positions not in POSITIONS:
            raise BadInputError(f"positions must be one of {', '.join(POSITIONS)}, got {self.positions!r}")
        if self.nsp and self.positions != "absolute" and self.from_model is None:
            raise BadInputError("next-sentence prediction needs absolute positions (BertForPreTraining)")
        if not 0 <= self.dropout < 1:
            raise BadInputError(f"dropout must be in [0, 1), got {self.dropout}")
        if not 0 <= self.eval_fraction < 1 or not 0 <= self.warmup_ratio < 1:
            raise BadInputError("eval fraction and warmup ratio must be in [0, 1)")
        if self.lr <= 0:
            raise BadInputError(f"learning rate must be positive, got {self.lr}")


def pretrain(config: PretrainConfig, *, progress: bool = True, callback: Callable[[dict], None] | None = None) -> dict:
    """Run masked-language-model pretraining.

    Args:
        config: The run's settings.
        progress: Progress bar and evaluation lines on stderr.
        callback: Called with each step's log record (after any checkpoint of that step).

    Returns:
        Summary: ``step``, ``train_loss`` (last step), ``eval_loss``,
        ``perplexity``, ``masked_accuracy`` (held-out; ``None`` without held-out
        data), ``initial_masked_accuracy`` (held-out, before the first step),
        ``seconds`` (all invocations of the run, resumed ones summed), ``output_dir``.
    """
    config.validate()
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    run = open_run(config.output_dir, resume=config.resume, progress=progress, callback=callback)
    torch.manual_seed(config.seed)
    stage = _MaskedLM(config, run)
    schedule = Schedule(
        total=stage.total,
        lr=config.lr,
        weight_decay=config.weight_decay,
        warmup_ratio=config.warmup_ratio,
        save_every=config.save_every,
        eval_every=config.eval_every,
        grad_accum=config.grad_accum,
        max_minutes=config.max_minutes,
    )
    outcome = train_loop(run, stage, schedule)
    return {
        "step": outcome.step,
        "train_loss": outcome.record.get("train_loss"),
        "eval_loss": stage.evaluation.get("eval_loss"),
        "perplexity": stage.evaluation.get("perplexity"),
        "masked_accuracy": stage.evaluation.get("masked_accuracy"),
        "initial_masked_accuracy": stage.initial.get("masked_accuracy"),
        "seconds": outcome.seconds,
        "output_dir": str(run.output),
    }


class _MaskedLM(Stage):
    """Masked-LM pretraining as a loop stage: seeded batch order, dynamic masks, held-out figures.

    Micro-batch ``i`` is always the same sequences (``_batch_index``), and
    masks come from a collator whose generator is checkpointed, so a resumed
    run sees the same batches and masks as an uninterrupted one. A fresh run
    logs the untrained model's held-out figures as a step-0 record.
    """

    label = "pretrain"

    def __init__(self, config: PretrainConfig, run: Run):
        self.config, self.output = config, run.output
        self.tokenizer, self.model = _load_model(config, run.checkpoint)
        self.device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device)
        files = collect_text_files(config.text)
        data = pack_sequences(read_documents(files), self.tokenizer, config.max_len, nsp=config.nsp, seed=config.seed)
        self.train, self.held_out = data.split(config.eval_fraction)
        self.total = config.max_steps or math.ceil(math.ceil(len(self.train) / config.batch_size) / config.grad_accum)
        self.collator = MaskingCollator(self.tokenizer, mlm_probability=config.mlm_probability, seed=config.seed)
        self.evaluates = len(self.held_out) > 0
        self.initial: dict = {}  # held-out figures before the first step
        self.evaluation: dict = {}  # the latest held-out figures of this invocation

    def loss(self, micro_step: int) -> torch.Tensor:
        index = _batch_index(len(self.train), self.config.batch_size, micro_step, self.config.seed)
        batch = {k: v.to(self.device) for k, v in self.collator(self.train.select(index)).items()}
        return masked_lm_loss(self.model, batch)[0]

    def begin(self, step: int) -> dict | None:
        if step:
            self.initial = _initial_evaluation(self.output / LOG)
            return None
        if not self.evaluates:
            return None
        self.initial = self._held_out()
        return {"step": 0, **self.initial}

    def evaluate(self, step: int) -> dict:
        self.evaluation = self._held_out()
        return self.evaluation

    def describe(self, record: dict) -> str:
        train = f"train loss {record['train_loss']:.4f}, " if "train_loss" in record else ""
        return (
            f"step {record['step']}: {train}held-out loss "
            f"{record['eval_loss']:.4f}, perplexity {record['perplexity']:.2f}, "
            f"masked accuracy {record['masked_accuracy']:.3f}"
        )

    def save_model(self, directory: Path) -> None:
        self.model.save_pretrained(str(directory))
        self.tokenizer.save_pretrained(str(directory))

    def state(self) -> dict:
        return {"mask_rng": self.collator.generator.get_state()}

    def restore(self, state: dict) -> None:
        self.collator.generator.set_state(state["mask_rng"])

    def finish(self) -> None:
        if not self.evaluation and self.evaluates:  # resumed from the last checkpoint: nothing left to train
            self.evaluation = self._held_out()
        _save_final(self.output, self.model, self.tokenizer, self.config.nsp)

    def _held_out(self) -> dict[str, float]:
        return evaluate(
            self.model, self.held_out, self.tokenizer, self.config.batch_size, self.device, seed=self.config.seed
        )


def masked_lm_loss(model, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, logits, targets)`` with the vocabulary projection at selected positions only.

    ``batch`` is a collator's output; ``logits`` has shape ``(selected, vocab)``;
    ``model`` is a ``BertForMaskedLM``, ``BertForPreTraining`` or ``RoFormerForMaskedLM``.
    Projecting only the ~15% selected positions (not all of them, as
    ``BertForMaskedLM.forward`` does) gives the same loss for about half the
    compute of a small model. With ``next_sentence_label`` in the batch (a
    ``BertForPreTraining`` model) the loss adds next-sentence prediction.
    """
    labels = batch["labels"]
    outputs = model.base_model(
        input_ids=batch["input_ids"],
        attention_mask=batch.get("attention_mask"),
        token_type_ids=batch.get("token_type_ids"),
    )
    selected = labels != IGNORE_INDEX
    logits = model.cls.predictions(outputs[0][selected])
    targets = labels[selected]
    loss = torch.nn.functional.cross_entropy(logits, targets)
    if "next_sentence_label" in batch:
        nsp_logits = model.cls.seq_relationship(outputs[1])
        loss = loss + torch.nn.functional.cross_entropy(nsp_logits, batch["next_sentence_label"])
    return loss, logits, targets


@torch.no_grad()
def evaluate(
    model, data: PackedSequences, tokenizer, batch_size: int, device: torch.device, *, seed: int = 0
) -> dict[str, float]:
    """Held-out masked-LM loss, perplexity and accuracy at the selected positions.

    Masks come from a collator seeded with ``seed`` afresh on every call, so
    figures from different steps are comparable.
    """
    collator = MaskingCollator(tokenizer, seed=seed)
    was_training = model.training
    model.eval()
    loss_sum, correct, count = 0.0, 0, 0
    for start in range(0, len(data), batch_size):
        batch = collator(data.select(slice(start, start + batch_size)))
        batch.pop("next_sentence_label", None)
        _, logits, targets = masked_lm_loss(model, {k: v.to(device) for k, v in batch.items()})
        loss_sum += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
        correct += int((logits.argmax(-1) == targets).sum())
        count += len(targets)
    model.train(was_training)
    loss = loss_sum / max(count, 1)
    return {"eval_loss": loss, "perplexity": math.exp(min(loss, 50.0)), "masked_accuracy": correct / max(count, 1)}


def _load_model(config: PretrainConfig, checkpoint: Path | None):
    """``(tokenizer, model)`` from the checkpoint, the model to continue, or a new config.

    RoFormer's sinusoidal position table stays fixed, as in a new model
    (``from_pretrained`` would make it trainable), so a run resumed from a
    checkpoint trains the same parameters as an uninterrupted one.
    """
    from transformers.models.roformer.modeling_roformer import RoFormerSinusoidalPositionalEmbedding
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    source = checkpoint or (Path(config.from_model) if config.from_model else None)
    tokenizer = _load_tokenizer(source or Path(config.tokenizer))
    model = _new_model(config, tokenizer) if source is None else _load_pretrained(config, source)
    for module in model.modules():
        if isinstance(module, RoFormerSinusoidalPositionalEmbedding):
            module.weight.requires_grad_(False)
    tokenizer.model_max_length = min(config.max_len, model.config.max_position_embeddings)
    return tokenizer, model


def _load_tokenizer(source: Path):
    """The BERT-style tokenizer of directory ``source``; it must have ``[MASK]``, ``[CLS]`` and ``[SEP]``."""
    from transformers import AutoTokenizer

    if not source.is_dir():
        raise BadInputError(f"{source}: no such directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source))
    except (OSError, ValueError) as exc:
        raise BadInputError(f"cannot load a tokenizer from {source}: {str(exc).splitlines()[0]}") from None
    if tokenizer.mask_token_id is None or tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise BadInputError(f"tokenizer in {source} lacks [MASK], [CLS] or [SEP]")
    return tokenizer


def _load_pretrained(config: PretrainConfig, source: Path):
    """The BERT or RoFormer masked-LM model (``BertForPreTraining`` with NSP) saved in ``source``."""
    from transformers import AutoConfig, AutoModelForMaskedLM, BertForPreTraining

    try:
        model_type = AutoConfig.from_pretrained(str(source)).model_type
    except (OSError, ValueError) as exc:
        raise BadInputError(f"cannot load a model config from {source}: {str(exc).splitlines()[0]}") from None
    if model_type not in _MODEL_TYPES:
        raise BadInputError(f"{source} holds a {model_type!r} model; pretraining continues BERT or RoFormer models")
    if config.nsp and model_type != "bert":
        raise BadInputError(f"next-sentence prediction needs a BERT model, {source} holds {model_type!r}")
    try:
        model = (BertForPreTraining if config.nsp else AutoModelForMaskedLM).from_pretrained(str(source))
    except (OSError, ValueError) as exc:
        raise BadInputError(f"cannot load a model from {source}: {str(exc).splitlines()[0]}") from None
    if config.max_len > model.config.max_position_embeddings:
        raise BadInputError(
            f"max length {config.max_len} exceeds the model's {model.config.max_position_embeddings} positions"
        )
    return model


def _new_model(config: PretrainConfig, tokenizer):
    """A randomly initialised masked-LM model of the configured size and position embeddings."""
    from transformers import BertConfig, BertForMaskedLM, BertForPreTraining, RoFormerConfig, RoFormerForMaskedLM

    size = dict(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        intermediate_size=config.intermediate or 4 * config.hidden,
        max_position_embeddings=config.max_len,
        pad_token_id=tokenizer.pad_token_id,
        hidden_dropout_prob=config.dropout,
        attention_probs_dropout_prob=config.dropout,
    )
    if config.positions == "rotary":
        return RoFormerForMaskedLM(RoFormerConfig(embedding_size=config.hidden, **size))
    return (BertForPreTraining if config.nsp else BertForMaskedLM)(BertConfig(**size))


def _batch_index(n: int, batch_size: int, micro_step: int, seed: int) -> torch.Tensor:
    """Indices of micro-batch ``micro_step``: epochs are seeded permutations of ``range(n)``."""
    per_epoch = math.ceil(n / batch_size)
    epoch, position = divmod(micro_step, per_epoch)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
    return order[position * batch_size : (position + 1) * batch_size]


def _save_final(output: Path, model, tokenizer, nsp: bool) -> None:
    """Save a ``BertForMaskedLM`` (the NSP head dropped) and the tokenizer to ``output``."""
    if nsp:
        from transformers import BertForMaskedLM

        mlm = BertForMaskedLM(model.config)
        mlm.load_state_dict(model.state_dict(), strict=False)
        model = mlm
    model.save_pretrained(str(output))
    tokenizer.save_pretrained(str(output))


def _initial_evaluation(path: Path) -> dict:
    """The held-out figures of the untrained model (the log's step-0 record), or ``{}``."""
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and json.loads(line).get("step") == 0:
                return json.loads(line)
    return {}
