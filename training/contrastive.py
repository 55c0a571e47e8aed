"""Contrastive fine-tuning of a sentence encoder (InfoNCE with in-batch negatives).

Pairs ``(anchor, positive[, negative])`` come from a JSONL file, a BEIR
training split (query, relevant document; optionally one BM25-mined hard
negative each), or unlabelled text: SimCSE (a text paired with itself, the
two views made different by dropout) or Contriever-style crops (two random
spans of the same document). The loss is sentence-transformers'
``MultipleNegativesRankingLoss``; batches never hold the same text twice, so
no in-batch "negative" is secretly a positive.

A simple loop: AdamW, linear warmup then linear decay, gradient clipping.
Batch order depends only on the seed and the epoch, so a run resumed from
a checkpoint (``OUT/checkpoints/step-N``, every ``save_every`` steps) trains
on the same batches as an uninterrupted one. With a dev dataset the model is
scored (nDCG@10, dense search through a temporary ``Collection``) every
``eval_every`` steps and at the end, and ``OUT`` keeps the best one;
without, ``OUT`` holds the final model. ``OUT/log.jsonl`` has one record per
step. ``OUT`` is a sentence-transformers directory (mean pooling) that
``retriever.Embedder`` loads.
"""

from __future__ import annotations

import json
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch

from retriever.errors import BadInputError
from retriever.jsonl import read_jsonl
from training.checkpoints import latest_checkpoint, read_trainer_state, truncate_log, write_checkpoint
from training.data import collect_text_files, read_documents

LOG = "log.jsonl"
UNSUPERVISED = ("simcse", "crop")
CROP_MIN_WORDS = 5
CROP_RATIO = (0.1, 0.5)


@dataclass(frozen=True)
class Pair:
    anchor: str
    positive: str
    negative: str | None = None

    def texts(self) -> set[str]:
        return {t for t in (self.anchor, self.positive, self.negative) if t is not None}


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
    eval_every: int = 500
    save_every: int = 500
    resume: bool = False
    seed: int = 0
    device: str | None = None

    def validate(self) -> None:
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
        if self.lr <= 0 or self.scale <= 0:
            raise BadInputError("learning rate and scale must be positive")
        if not 0 <= self.warmup_ratio < 1:
            raise BadInputError("warmup ratio must be in [0, 1)")


# -- pair sources -----------------------------------------------------------
def read_pairs(path: str | Path) -> list[Pair]:
    """``{"anchor", "positive"[, "negative"]}`` records of a JSONL file."""
    path = Path(path)
    if not path.is_file():
        raise BadInputError(f"{path}: no such file")
    pairs = []
    for number, record in read_jsonl(path, "an anchor/positive record"):
        anchor, positive, negative = record.get("anchor"), record.get("positive"), record.get("negative")
        if not all(isinstance(t, str) and t.strip() for t in (anchor, positive)) or not (
            negative is None or (isinstance(negative, str) and negative.strip())
        ):
            raise BadInputError(f"{path}:{number}: anchor, positive and negative must be non-empty strings")
        pairs.append(Pair(anchor, positive, negative))
    if not pairs:
        raise BadInputError(f"{path} holds no pairs")
    return pairs


def _doc_text(record: dict) -> str:
    title, text = (record.get("title") or "").strip(), record.get("text") or ""
    return f"{title}\n{text}" if title else text


def beir_pairs(root: str | Path, split: str = "train", *, hard_negatives: bool = False, seed: int = 0) -> list[Pair]:
    """(query, title + "\\n" + text) for every judged-relevant (score > 0) document of ``split``.

    With ``hard_negatives`` each pair gets the query's top BM25 document that
    is not judged relevant (a random such document when BM25 finds none).
    """
    from retriever.evaluation import load_beir

    dataset = load_beir(root, split)
    corpus = {str(record["_id"]): record for record in dataset.corpus()}
    pairs = []
    index = analyzer = None
    if hard_negatives:
        from retriever.search.bm25 import Analyzer
        from retriever.search.bm25_matrix import BM25Index

        analyzer = Analyzer()
        index = BM25Index.empty().updated(
            [], [(doc_id, analyzer(f"{r.get('title') or ''} {r.get('text') or ''}")) for doc_id, r in corpus.items()]
        )
    rng = random.Random(seed)
    doc_ids = list(corpus)
    for query_id, judged in dataset.qrels.items():
        relevant = [d for d, score in judged.items() if score > 0 and d in corpus]
        if not relevant:
            continue
        negative = None
        if index is not None:
            positive_ids = {d for d, score in judged.items() if score > 0}
            ranked = index.top(analyzer(dataset.queries[query_id]), len(positive_ids) + 1)
            negative_id = next((d for d, _ in ranked if d not in positive_ids and d != query_id), None)
            if negative_id is None:
                others = [d for d in doc_ids if d not in positive_ids]
                negative_id = rng.choice(others) if others else None
            negative = _doc_text(corpus[negative_id]) if negative_id else None
        for doc_id in relevant:
            pairs.append(Pair(dataset.queries[query_id], _doc_text(corpus[doc_id]), negative))
    if not pairs:
        raise BadInputError(f"{root}: split {split!r} has no relevant documents in the corpus")
    return pairs


def read_corpus(paths: Sequence[str | Path]) -> list[str]:
    """Documents of text files/directories (paragraphs) and BEIR corpora (``corpus.jsonl`` or its directory)."""
    documents: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        jsonl = path / "corpus.jsonl" if path.is_dir() else path
        if jsonl.suffix == ".jsonl" and jsonl.is_file():
            for _, record in read_jsonl(jsonl, "a corpus record"):
                text = _doc_text(record).strip()
                if text:
                    documents.append(text)
        else:
            documents.extend(read_documents(collect_text_files([path])))
    if not documents:
        raise BadInputError(f"no text in {', '.join(map(str, paths))}")
    return documents


def simcse_pairs(documents: Sequence[str]) -> list[Pair]:
    """Each distinct document paired with itself (dropout makes the two views differ)."""
    return [Pair(doc, doc) for doc in dict.fromkeys(documents)]


def crop_pairs(documents: Sequence[str], seed: int = 0, *, min_words: int = CROP_MIN_WORDS,
               ratio: tuple[float, float] = CROP_RATIO) -> list[Pair]:
    """Two independent random word spans of each document (each ``ratio`` of its words, at least ``min_words``).

    Documents shorter than ``2 * min_words`` words are skipped. Spans are
    redrawn a few times when they come out identical.
    """
    rng = random.Random(seed)
    pairs = []
    for doc in documents:
        words = doc.split()
        n = len(words)
        if n < 2 * min_words:
            continue
        low = max(min_words, math.ceil(ratio[0] * n))
        high = max(low, int(ratio[1] * n))

        def span() -> str:
            length = rng.randint(low, high)
            start = rng.randint(0, n - length)
            return " ".join(words[start:start + length])

        first, second = span(), span()
        for _ in range(10):
            if first != second:
                break
            second = span()
        pairs.append(Pair(first, second))
    if not pairs:
        raise BadInputError(f"no document has the {2 * min_words} words two crops need")
    return pairs


# -- batching ---------------------------------------------------------------
def no_duplicate_batches(pairs: Sequence[Pair], batch_size: int, seed: int = 0) -> list[list[int]]:
    """Indices of ``pairs`` in shuffled batches in which no text occurs in two rows.

    Greedy, like sentence-transformers' ``NoDuplicatesBatchSampler``: rows go
    in shuffled order into the current batch unless one of their texts is
    already there (they then wait for a later batch). Every row lands in
    exactly one batch; batches of fewer than two rows (no negatives) are dropped.
    """
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    batches: list[list[int]] = []
    while order:
        batch: list[int] = []
        seen: set[str] = set()
        left: list[int] = []
        for i in order:
            texts = pairs[i].texts()
            if len(batch) < batch_size and not texts & seen:
                batch.append(i)
                seen |= texts
            else:
                left.append(i)
        batches.append(batch)
        order = left
    return [batch for batch in batches if len(batch) >= 2]


# -- training ---------------------------------------------------------------
def load_mean_pooling_model(location: str | Path, device: str | None = None):
    """A ``SentenceTransformer`` from a sentence-transformers or plain HF directory; its pooling must be mean.

    ``"all-MiniLM-L6-v2"`` names the packaged default encoder.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers.utils import logging as hf_logging

    from retriever.encoding.embedder import resolve_model

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    location = resolve_model(location)[1]
    if not Path(location).is_dir():
        raise BadInputError(f"{location}: no such model directory")
    try:
        model = SentenceTransformer(str(location), device=device)
    except (OSError, ValueError) as exc:
        raise BadInputError(f"cannot load model {str(location)!r}: {str(exc).splitlines()[0]}") from None
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
        pairs = beir_pairs(config.beir, config.split, hard_negatives=config.hard_negatives, seed=config.seed)
        return lambda epoch: pairs
    documents = read_corpus(config.corpus or [])
    if config.unsupervised == "simcse":
        pairs = simcse_pairs(documents)
        return lambda epoch: pairs
    crop_pairs(documents, config.seed)  # fail early when no document is long enough
    return lambda epoch: crop_pairs(documents, config.seed * 1_000_003 + epoch)


def _columns(pairs: list[Pair]) -> list[list[str]]:
    columns = [[p.anchor for p in pairs], [p.positive for p in pairs]]
    if all(p.negative is not None for p in pairs):  # mixed batches train without their negatives
        columns.append([p.negative for p in pairs])  # type: ignore[misc]
    return columns


def contrastive_train(
    config: ContrastiveConfig,
    *,
    progress: bool = True,
    callback: Callable[[dict], None] | None = None,
) -> dict:
    """Fine-tune ``config.from_model`` contrastively and save it to ``config.output_dir``.

    Returns:
        Summary: ``steps``, ``train_loss`` (last step), ``best_dev_ndcg``
        (``None`` without a dev set), ``best_step``, ``pairs``, ``seconds``
        (resumed invocations summed), ``output_dir``.
    """
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    config.validate()
    started = time.monotonic()
    output = Path(config.output_dir)
    checkpoint = latest_checkpoint(output) if config.resume else None
    if config.resume and checkpoint is None and progress:
        print(f"no checkpoint in {output / 'checkpoints'}; starting from step 0", file=sys.stderr)
    dev = _load_dev(config) if config.dev else None
    pairs_of = _build_pairs(config)

    def epoch_batches(epoch: int) -> tuple[list[Pair], list[list[int]]]:
        """The pairs of ``epoch`` and their duplicate-free batches (seeded by the epoch)."""
        pairs = pairs_of(epoch)
        return pairs, no_duplicate_batches(pairs, config.batch_size, config.seed * 1_000_003 + epoch)

    first, batches = epoch_batches(0)
    if not batches:
        raise BadInputError("too few distinct pairs for one batch of two")
    total = config.max_steps or config.epochs * len(batches)

    random.seed(config.seed)
    torch.manual_seed(config.seed)
    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = load_mean_pooling_model(checkpoint or config.from_model, device)
    if config.max_len:
        model.max_seq_length = config.max_len
    loss_fn = MultipleNegativesRankingLoss(model, scale=config.scale)
    optimizer = torch.optim.AdamW(_param_groups(model, config.weight_decay), lr=config.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total), total)

    output.mkdir(parents=True, exist_ok=True)
    done, epoch, position, pairs = 0, 0, 0, first
    best_ndcg: float | None = None
    best_step: int | None = None
    earlier_seconds = 0.0
    if checkpoint is not None:
        state = read_trainer_state(checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        done, epoch, position = int(state["step"]), int(state["epoch"]), int(state["position"])
        best_ndcg, best_step = state.get("best_ndcg"), state.get("best_step")
        earlier_seconds = float(state["seconds"])
        if epoch:
            pairs, batches = epoch_batches(epoch)
    truncate_log(output / LOG, done)
    record: dict = {}
    bar = tqdm(total=total, initial=done, disable=not progress, file=sys.stderr, desc="contrastive", unit="step")
    model.train()
    for step in range(done + 1, total + 1):
        if position == len(batches):
            epoch, position = epoch + 1, 0
            pairs, batches = epoch_batches(epoch)
        rows = [pairs[i] for i in batches[position]]
        position += 1
        features = [{k: (v.to(device) if torch.is_tensor(v) else v) for k, v in model.preprocess(column).items()}
                    for column in _columns(rows)]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(features, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        record = {"step": step, "train_loss": loss.item(), "lr": scheduler.get_last_lr()[0], "batch": len(rows),
                  "seconds": round(earlier_seconds + time.monotonic() - started, 3)}
        if dev is not None and (step % config.eval_every == 0 or step == total):
            ndcg = evaluate_dev(model, dev)
            record["dev_ndcg@10"] = ndcg
            if best_ndcg is None or ndcg > best_ndcg:
                best_ndcg, best_step = ndcg, step
                model.save(str(output))
                record["saved"] = True
            bar.write(f"step {step}: dev nDCG@10 {ndcg:.4f} (best {best_ndcg:.4f} at step {best_step})",
                      file=sys.stderr)
        if step % config.save_every == 0 or step == total:
            state = {"seconds": record["seconds"], "epoch": epoch, "position": position,
                     "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                     "torch_rng": torch.get_rng_state()}
            if best_ndcg is not None:
                state.update(best_ndcg=best_ndcg, best_step=best_step)
            write_checkpoint(output, step, lambda directory: model.save(str(directory)), state)
        with open(output / LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
        bar.update(1)
        bar.set_postfix(loss=f"{record['train_loss']:.3f}")
        if callback is not None:
            callback(record)
    bar.close()
    model.eval()
    if dev is None:
        model.save(str(output))
    return {
        "steps": total,
        "train_loss": record.get("train_loss"),
        "best_dev_ndcg": best_ndcg,
        "best_step": best_step,
        "pairs": len(first),
        "seconds": round(earlier_seconds + time.monotonic() - started, 3),
        "output_dir": str(output),
    }


@dataclass
class _Dev:
    dataset: object
    documents: list[dict] = field(default_factory=list)


def _load_dev(config: ContrastiveConfig) -> _Dev:
    from retriever.evaluation import load_beir

    root = Path(config.dev)
    split = config.dev_split or ("dev" if (root / "qrels" / "dev.tsv").is_file() else "test")
    dataset = load_beir(root, split)
    documents = [{"id": str(r["_id"]), "title": r.get("title") or "", "text": r.get("text") or ""}
                 for r in dataset.corpus() if (r.get("text") or "").strip()]
    if not documents:
        raise BadInputError(f"{root}: the dev corpus is empty")
    return _Dev(dataset, documents)


def evaluate_dev(model, dev: _Dev) -> float:
    """nDCG@10 of dense search with ``model`` over the dev corpus (a fresh temporary collection)."""
    import warnings

    from retriever import Collection, Embedder
    from retriever.evaluation import DEPTH, evaluate_run, run_queries

    was_training = model.training
    with tempfile.TemporaryDirectory(prefix="semsearch-dev-") as tmp:
        model.save(str(Path(tmp) / "model"))
        # torch: a checkpoint is scored once, so exporting and timing other backends would not pay
        embedder = Embedder(Path(tmp) / "model", device=str(model.device), backend="torch")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Collection.create(Path(tmp) / "collection", embedder) as collection:
                collection.upsert(dev.documents)
                run = run_queries(lambda q: [h.id for h in collection.search(q, k=DEPTH, mode="dense")],
                                  dev.dataset.queries, progress=False)
    model.train(was_training)
    return evaluate_run(run, dev.dataset.qrels)["ndcg@10"]


def _param_groups(model, weight_decay: float) -> list[dict]:
    """AdamW groups: decay on weights, none on biases and LayerNorm."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if name.endswith("bias") or "LayerNorm" in name else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
