"""Adapting a collection's encoder to its own documents, without labels (``semsearch adapt``).

The seed's recipe applied to the user's data: pseudo-queries cut from the
collection's documents (``training.pseudo_queries``), hard negatives mined
by the collection's own hybrid search, and contrastive training
(``training.contrastive``: in-batch and hard negatives) from the
collection's model. Some pseudo-queries are held out of training; the
adapted model is kept only when it finds their source documents better than
the collection's model does, each ranking the same candidates (the hybrid
search's top ``CANDIDATES`` and the source) by its own embeddings. With
``switch``, a model that won becomes the collection's own: every document
re-embedded with it, in one generation (``retriever.storage.model_switch``).

Everything lands in ``output_dir``: ``queries.jsonl`` and ``pairs.jsonl``
(reused by a resumed run), the training run's checkpoints and log, the
model (a sentence-transformers directory that ``--model`` accepts), and
``adapt.json``, the report.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from retriever.errors import BadInputError
from retriever.storage.atomic import atomic_write_text
from training.contrastive import ContrastiveConfig, contrastive_train
from training.pairs import Pair
from training.pseudo_queries import PseudoQuery, draw_queries, mine_pairs

CANDIDATES = 20  # documents each held-out query's check ranks, besides its source
MIN_DOCUMENTS = 50
REPORT = "adapt.json"


@dataclass
class AdaptConfig:
    """How ``adapt`` draws, mines and trains (defaults measured on the visible BEIR sets)."""

    output_dir: str
    documents: int = 5_000  # documents that give pseudo-queries (a seeded sample of larger collections)
    held_out: int = 200  # at most; a fifth of the pseudo-queries on small collections
    hard_negatives: bool = False  # off: hybrid-mined negatives lowered SciFact's dense nDCG@10 (docs/benchmarks.md)
    ranks: tuple[int, int] = (3, 30)  # hybrid ranks a hard negative is drawn from
    batch_size: int = 32
    lr: float = 1e-5
    epochs: int = 1
    max_len: int = 256
    minutes: float | None = None  # for training; drawing, mining and the check come on top
    seed: int = 0
    resume: bool = True

    def validate(self) -> None:
        if self.documents < MIN_DOCUMENTS:
            raise BadInputError(f"adapt needs at least {MIN_DOCUMENTS} documents, got --documents {self.documents}")
        if not 10 <= self.held_out <= self.documents // 5:
            raise BadInputError(f"held out must be between 10 and a fifth of the documents, got {self.held_out}")
        if not 1 <= self.ranks[0] <= self.ranks[1] <= 200:
            raise BadInputError(f"negative ranks must satisfy 1 <= first <= last <= 200, got {self.ranks}")
        if self.minutes is not None and self.minutes <= 0:
            raise BadInputError(f"minutes must be positive, got {self.minutes:g}")


@dataclass
class AdaptReport:
    """What ``adapt`` did: sizes, the check's mean reciprocal ranks before and after, seconds per phase."""

    model_dir: str
    base_model: str
    queries: int  # pseudo-queries drawn (one per document that gave one)
    trained_on: int  # of those, the ones training saw
    held_out: int  # and the ones kept for the check
    steps: int
    before_mrr: float
    after_mrr: float
    better: bool
    seconds: dict[str, float] = field(default_factory=dict)
    switched: dict | None = None  # the collection's switch to the adapted model (``SwitchReport``), when it was made

    def to_dict(self) -> dict:
        return asdict(self)


def adapt(
    collection,
    config: AdaptConfig,
    *,
    switch: bool = False,
    progress: bool = True,
    embedder_of: Callable[[str], object] | None = None,
) -> AdaptReport:
    """Train an adapted copy of ``collection``'s model on its documents into ``config.output_dir``; check it.

    Args:
        collection (retriever.Collection): The collection (searched for negatives and candidates).
        config: The run's settings.
        switch: When the adapted model wins the check, re-embed the collection with it and make it the
            collection's model, in one generation (``Collection.switch_model``); else the collection is
            never changed.
        progress: Progress bars on stderr.
        embedder_of: Loads a model directory as an ``Embedder`` (default ``retriever.Embedder``).

    Returns:
        The report, also written to ``OUT/adapt.json``; ``better`` says whether the adapted model won the check,
        ``switched`` what the switch did.

    Raises:
        BadInputError: Too few documents give pseudo-queries, or settings out of range.
    """
    from retriever import Embedder

    config.validate()
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    began = started = time.monotonic()
    queries = _queries(collection, config, out / "queries.jsonl")
    n_held = max(10, min(config.held_out, len(queries) // 5))
    held, train = queries[:n_held], queries[n_held:]
    seconds["draw"] = round(time.monotonic() - started, 1)
    pairs_file = out / "pairs.jsonl"
    if not (config.resume and pairs_file.is_file()):
        started = time.monotonic()
        _write_pairs(collection, config, train, pairs_file, progress)
        seconds["mine"] = round(time.monotonic() - started, 1)
    base = collection.model["name"]
    started = time.monotonic()
    summary = _train(collection, config, pairs_file, began, progress)
    seconds["train"] = round(time.monotonic() - started, 1)
    started = time.monotonic()
    adapted = (embedder_of or Embedder)(str(out))
    before, after = check(collection, held, collection.embedder, adapted, progress=progress)
    seconds["check"] = round(time.monotonic() - started, 1)
    report = AdaptReport(
        str(out),
        base,
        len(queries),
        len(train),
        len(held),
        summary["steps"],
        round(before, 4),
        round(after, 4),
        after > before,
        seconds,
    )
    if switch and report.better:
        report.switched = collection.switch_model(adapted, progress=progress).to_dict()
        seconds["switch"] = report.switched["seconds"]
    atomic_write_text(out / REPORT, json.dumps(report.to_dict(), indent=2) + "\n")
    return report


def _write_pairs(collection, config: AdaptConfig, train: list[PseudoQuery], path: Path, progress: bool) -> None:
    """The training pairs as JSONL: each pseudo-query, its source, and a mined hard negative when asked."""
    pairs = (
        mine_pairs(collection, train, config.seed, ranks=config.ranks, progress=progress)
        if config.hard_negatives
        else [Pair(q.query, q.positive) for q in train]
    )
    rows = (
        {"anchor": p.anchor, "positive": p.positive} | ({"negative": p.negative} if p.negative else {}) for p in pairs
    )
    atomic_write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def _train(collection, config: AdaptConfig, pairs_file: Path, began: float, progress: bool) -> dict:
    """Contrastive training from the collection's model on ``pairs_file`` into ``config.output_dir``; its summary."""
    return contrastive_train(
        ContrastiveConfig(
            from_model=collection.model["name"],
            output_dir=str(config.output_dir),
            pairs=str(pairs_file),
            batch_size=config.batch_size,
            lr=config.lr,
            epochs=config.epochs,
            max_len=min(config.max_len, collection.embedder.max_tokens),
            max_minutes=_training_minutes(config.minutes, began),
            save_every=50,
            resume=config.resume,
            seed=config.seed,
        ),
        progress=progress,
    )


def _training_minutes(minutes: float | None, began: float) -> float | None:
    """What ``minutes`` leaves to training after drawing and mining, less a tenth kept for the check."""
    if minutes is None:
        return None
    return max(0.5, 0.9 * minutes - (time.monotonic() - began) / 60)


def _queries(collection, config: AdaptConfig, path: Path) -> list[PseudoQuery]:
    """The pseudo-queries of a seeded sample of documents, read back from ``path`` on a resumed run."""
    if config.resume and path.is_file():
        return [PseudoQuery(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]
    ids = sorted(collection.ids())
    random.Random(config.seed).shuffle(ids)
    documents = ((d.id, d.title, d.text) for d in map(collection.get, ids[: config.documents]) if d is not None)
    queries = draw_queries(documents, config.seed)
    if len(queries) < MIN_DOCUMENTS:
        raise BadInputError(
            f"only {len(queries)} of the collection's documents give a pseudo-query (a title of "
            f"3 or more words, or 2 or more sentences); adapt needs {MIN_DOCUMENTS}"
        )
    random.Random(config.seed + 1).shuffle(queries)
    atomic_write_text(path, "".join(json.dumps(asdict(q)) + "\n" for q in queries))
    return queries


def check(
    collection, held: list[PseudoQuery], current, adapted, *, k: int = 10, progress: bool = True
) -> tuple[float, float]:
    """Mean reciprocal rank (cut at ``k``) of each held-out query's source, by ``current`` and by ``adapted``.

    Both rank the same candidates: the collection's hybrid top ``CANDIDATES`` for the query, and the source,
    each by its first chunk as the collection embeds it (title in front where its chunker puts it).
    """
    from tqdm import tqdm

    candidates = {
        pq.query: list(
            dict.fromkeys(
                [pq.doc_id, *(h.id for h in collection.search(pq.query, k=CANDIDATES, mode="hybrid", evidence="none"))]
            )
        )
        for pq in tqdm(held, desc="check candidates", unit="query", disable=not progress)
    }
    ids = sorted({i for found in candidates.values() for i in found})
    texts = [collection.chunker.split(collection.get(i))[0].embed_text for i in ids]
    row = {doc_id: n for n, doc_id in enumerate(ids)}
    scores = {}
    for name, embedder in (("current", current), ("adapted", adapted)):
        passages = embedder.embed(texts, show_progress=progress)
        queries = embedder.embed([pq.query for pq in held])
        total = 0.0
        for query, pq in zip(queries, held):
            scored = passages[[row[i] for i in candidates[pq.query]]] @ query  # the source first
            rank = 1 + int(np.sum(scored > scored[0]))
            total += 1 / rank if rank <= k else 0.0
        scores[name] = total
    n = max(1, len(held))
    return scores["current"] / n, scores["adapted"] / n
