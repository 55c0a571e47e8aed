"""Learning from a collection's judgments (``semsearch learn``): its encoder fine-tuned, its hybrid settings chosen.

Three candidates are judged by cross-validation over the judged queries (a
query is scored only by what never saw its judgments):

- ``current``: the collection as it is (its model, its settings);
- ``settings``: its model with the hybrid settings (``training.settings_choice``)
  that score best on the other folds' queries;
- ``model``: a copy of its model fine-tuned (``training.contrastive``) on the
  pairs of the other folds' queries (``training.judged_pairs``) but a tuning
  share, which chooses its settings; scored on a scratch copy of the
  collection re-embedded with it (``retriever.judgments.trial``).

The best candidate wins only when its mean nDCG@10 beats ``current``'s by
``min_gain``. A winning model is trained again on every judgment into
``DIR/models/learned-g<generation>`` and the collection switches to it in one
generation, with the settings the folds' held-out scores favour; winning
settings alone are made the collection's own. Otherwise nothing changes.
The run's state is kept in a work folder, so an interrupted run (or one past
``minutes``) resumes where it stopped; the report is kept in the collection
(``retriever.judgments.learned``).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from retriever.errors import BadInputError
from retriever.judgments.learned import write_learn_report
from retriever.judgments.records import JudgedSet
from retriever.storage.atomic import atomic_write_text
from training.judged_pairs import PairPlan, judged_pairs
from training.learning_state import LearnState
from training.pairs import no_duplicate_batches
from training.settings_choice import Setting, best_setting, candidates, mean_over, score_settings

MIN_QUERIES = 10  # judged queries (with an answering document) learn needs
TARGET_STEPS = 60  # training steps aimed at when the epochs are not given
MAX_EPOCHS = 10
CANDIDATES = ("current", "settings", "model")


@dataclass
class LearnConfig:
    """How ``learn`` splits, trains and decides.

    Attributes:
        work_dir: Where folds' models and the resumable state go (default ``~/.cache/semsearch/learn/<uuid>``).
        folds: Cross-validation folds over the judged queries (default 3; fewer when fewer queries).
        tune_share: Share of a fold's training queries kept out of its pairs to choose its model's settings.
        train_model: Fine-tune the encoder (default True); off: choose settings only.
        epochs: Passes over the pairs (default: enough for ``TARGET_STEPS`` steps, at most ``MAX_EPOCHS``).
        batch_size, lr: Contrastive training settings.
        max_len: Tokens of each text trained on (default 128, the length the packaged model was trained at;
            longer chunks are cut for training only, and embedded whole as ever).
        hard_negatives: Give each pair a judged or mined hard negative (``training.judged_pairs``).
        min_gain: What the winner's cross-validated nDCG@10 must beat the current one by (default 0.005).
        minutes: Stop after about this long, resumable (default: no limit).
        seed: Seeds folds, negatives and training.
        resume: Take up the work folder's state when it is of the same judgments and settings.
    """

    work_dir: str | None = None
    folds: int = 3
    tune_share: float = 0.25
    train_model: bool = True
    epochs: int | None = None
    batch_size: int = 32
    lr: float = 2e-5
    max_len: int = 128
    hard_negatives: bool = True
    min_gain: float = 0.005
    minutes: float | None = None
    seed: int = 0
    resume: bool = True

    def validate(self) -> None:
        if self.folds < 2:
            raise BadInputError(f"folds must be at least 2, got {self.folds}")
        if not 0.0 < self.tune_share < 0.5:
            raise BadInputError(f"tune share must be between 0 and 0.5, got {self.tune_share:g}")
        if self.epochs is not None and self.epochs < 1:
            raise BadInputError(f"epochs must be at least 1, got {self.epochs}")
        if self.batch_size < 2 or self.lr <= 0 or self.max_len < 8:
            raise BadInputError("batch size must be at least 2, lr positive and max length at least 8")
        if self.minutes is not None and self.minutes <= 0:
            raise BadInputError(f"minutes must be positive, got {self.minutes:g}")

    def fingerprint_fields(self) -> dict:
        """The settings a resumed run must share with the one it takes up."""
        return {k: v for k, v in asdict(self).items() if k not in ("work_dir", "minutes", "resume", "min_gain")}


@dataclass
class LearnReport:
    """What ``learn`` found and did; ``to_dict`` is the report ``retriever.judgments.learned`` keeps."""

    judgments: int
    queries: int
    folds: int
    cv: dict[str, float]  # candidate -> cross-validated mean nDCG@10
    chosen: str  # the winning candidate ("current" when nothing changed)
    settings_before: dict
    settings_after: dict
    model_before: str
    model_after: str | None = None
    switched: bool = False
    finished: bool = True  # False: stopped by ``minutes``; run again to resume
    reason: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict:
        return {
            "at": self.at,
            "judgments": self.judgments,
            "queries": self.queries,
            "folds": self.folds,
            "switched": self.switched,
            "finished": self.finished,
            "chosen": self.chosen,
            "model": {"before": self.model_before, "after": self.model_after},
            "settings": {"before": self.settings_before, "after": self.settings_after},
            "cv": {
                "before": {"ndcg@10": self.cv.get("current", 0.0)},
                "after": {"ndcg@10": self.cv.get(self.chosen, self.cv.get("current", 0.0))},
                "candidates": dict(self.cv),
            },
            "seconds": sum(self.seconds.values()),
            "phases": dict(self.seconds),
            "reason": self.reason,
        }


def learn(collection, config: LearnConfig, *, switch: bool = True, progress: bool = True) -> LearnReport:
    """Judge the three candidates by cross-validation over ``collection``'s judgments and adopt the winner.

    Args:
        collection (retriever.Collection): The collection, its judgments (``Collection.judged``) the data.
        config: Folds, training and the decision's margin.
        switch: Adopt a winner (default True); False: measure and report only.
        progress: Progress bars on stderr.

    Returns:
        The report (also kept in the collection when it finished: ``read_learn_report``).

    Raises:
        BadInputError: Fewer than ``MIN_QUERIES`` judged queries have an answering document, or bad settings.
    """
    config.validate()
    judged = answered(collection.judged())
    if len(judged) < MIN_QUERIES:
        raise BadInputError(
            f"learn needs judgments of at least {MIN_QUERIES} queries with a document that answers them; "
            f"this collection has {len(judged)} (add some with `semsearch judge import` or in the UI)"
        )
    run = _Run(collection, config, judged, progress)
    return run.execute(switch)


def answered(judged: JudgedSet) -> JudgedSet:
    """The queries of ``judged`` with at least one document graded above 0 (the others score 0 whatever ranks)."""
    return judged.subset([key for key in judged.queries if any(g > 0 for g in judged.qrels.get(key, {}).values())])


def fold_of(keys: list[str], folds: int, seed: int) -> dict[str, int]:
    """Each query key's fold, ``0 .. folds - 1``: a seeded shuffle dealt round-robin."""
    order = sorted(keys)
    random.Random(seed).shuffle(order)
    return {key: n % folds for n, key in enumerate(order)}


def epochs_for(pairs: list, batch_size: int, given: int | None) -> int:
    """``given``, or the passes over ``pairs`` that make about ``TARGET_STEPS`` steps (1 to ``MAX_EPOCHS``), its
    batches counted as training makes them (no text twice in a batch: a query's answers go to different ones)."""
    if given is not None:
        return given
    per_epoch = max(1, len(no_duplicate_batches(pairs, batch_size)))
    return max(1, min(MAX_EPOCHS, round(TARGET_STEPS / per_epoch)))


def judgments_fingerprint(judged: JudgedSet, extra: dict) -> str:
    """A digest of the judgments and ``extra`` (settings, model): a resumed run must match it."""
    rows = sorted((key, doc_id, grade) for key, grades in judged.qrels.items() for doc_id, grade in grades.items())
    blob = json.dumps({"rows": rows, "extra": extra}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def keep_window(model_dir: Path, tokens: int) -> None:
    """Give the trained model in ``model_dir`` the window of ``tokens`` its base model reads (training may have
    cut its texts shorter), so that it embeds the collection's chunks whole."""
    config_file = model_dir / "sentence_bert_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    config["max_seq_length"] = tokens
    atomic_write_text(config_file, json.dumps(config, indent=2) + "\n")


def _place_model(trained: Path, model_dir: Path) -> None:
    """Copy the model files of the training folder ``trained`` (no checkpoints, no log) to ``model_dir``,
    whole or not at all."""
    partial = model_dir.with_name(f".{model_dir.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(trained, partial, ignore=shutil.ignore_patterns("checkpoints", "log.jsonl"))
    shutil.rmtree(model_dir, ignore_errors=True)
    partial.rename(model_dir)


class _Run:
    """One ``learn`` over one collection: its folds, its state on disk, its decision."""

    def __init__(self, collection, config: LearnConfig, judged: JudgedSet, progress: bool) -> None:
        self.collection, self.config, self.judged, self.progress = collection, config, judged, progress
        self.began = time.monotonic()
        self.current = Setting.of(collection.search_settings())
        self.model_before = collection.model["name"]
        self.keys = sorted(judged.queries)
        self.folds = min(config.folds, len(self.keys))
        self.fold = fold_of(self.keys, self.folds, config.seed)
        work = Path(config.work_dir or Path("~/.cache/semsearch/learn").expanduser() / collection.manifest.uuid)
        extra = {"config": config.fingerprint_fields(), "model": collection.model["sha256"], "at": self.current}
        self.state = LearnState.open(work, judgments_fingerprint(judged, extra), resume=config.resume)
        self.seconds: dict[str, float] = dict(self.state.get("seconds", {}))

    # -- the phases ---------------------------------------------------------
    def execute(self, switch: bool) -> LearnReport:
        grid = self._phase(
            "current",
            lambda: score_settings(
                self.collection, self.judged, candidates(self.current), progress=self.progress, label="current settings"
            ),
        )
        cv = {"current": mean_over(grid[self.current], self.keys), "settings": self._settings_cv(grid)}
        held_out: dict = {}
        if self.config.train_model:
            for number in range(self.folds):
                if self._out_of_time():
                    return self._report(cv, "current", finished=False, reason="stopped by --minutes; run again")
                held_out[number] = self._phase(f"fold-{number + 1}", lambda n=number: self._model_fold(n))
            cv["model"] = mean_over(self._pooled(held_out, chosen_only=True), self.keys)
        chosen = max(cv, key=lambda name: (cv[name], -CANDIDATES.index(name)))
        if chosen == "current" or cv[chosen] < cv["current"] + self.config.min_gain:
            return self._report(cv, "current", reason=self._no_win_reason(cv))
        if not switch:
            return self._report(cv, chosen, reason="dry run: the collection was left as it is")
        if chosen == "settings":
            after = best_setting(grid, self.keys)
            self.collection.choose_search_settings(**after.to_dict())
            return self._report(cv, chosen, settings_after=after, reason="the chosen settings scored best")
        return self._adopt_model(cv, self._pooled(held_out, chosen_only=False))

    def _settings_cv(self, grid) -> float:
        """Mean nDCG@10 of each query under the settings the other folds' queries favour (current model)."""
        scores = {}
        for number in range(self.folds):
            held = [k for k in self.keys if self.fold[k] == number]
            rest = [k for k in self.keys if self.fold[k] != number]
            chosen = best_setting(grid, rest)
            scores.update({k: grid[chosen][k] for k in held})
        return mean_over(scores, self.keys)

    def _model_fold(self, number: int) -> dict:
        """Train on fold ``number``'s training share, choose its settings on its tuning share, score its queries.

        Returns:
            ``{"chosen": setting dict, "scores": [[setting dict, {key: nDCG@10 of the fold's queries}], ...]}``.
        """
        from retriever.judgments.trial import scratch_copy

        held = [k for k in self.keys if self.fold[k] == number]
        rest = [k for k in self.keys if self.fold[k] != number]
        random.Random(self.config.seed + number).shuffle(rest)
        n_tune = max(1, round(len(rest) * self.config.tune_share))
        tune, fit = rest[:n_tune], rest[n_tune:]
        model_dir = self.state.folder / f"fold-{number + 1}" / "model"
        self._train(self.judged.subset(fit), model_dir, f"fold {number + 1}/{self.folds}")
        with scratch_copy(self.collection, self._embedder(model_dir), progress=self.progress) as copy:
            grid = score_settings(
                copy,
                self.judged.subset(tune + held),
                candidates(self.current),
                progress=self.progress,
                label=f"fold {number + 1} scores",
            )
        chosen = best_setting(grid, tune)
        return {
            "chosen": chosen.to_dict(),
            "scores": [[s.to_dict(), {k: per[k] for k in held}] for s, per in grid.items()],
        }

    def _adopt_model(self, cv: dict[str, float], pooled: dict[Setting, dict[str, float]]) -> LearnReport:
        """Train the winning model on every judgment, switch the collection to it with the favoured settings."""
        from retriever.storage.cleanup import MODELS_DIR

        generation = self.collection.reader.current().generation
        model_dir = self.collection.root.resolve() / MODELS_DIR / f"learned-g{generation}"
        started = time.monotonic()
        trained = self.state.folder / "final" / "model"
        self._train(self.judged, trained, "final model")
        _place_model(trained, model_dir)
        self.seconds["final-training"] = round(time.monotonic() - started, 1)
        after = best_setting(pooled, self.keys)
        started = time.monotonic()
        self.collection.switch_model(self._embedder(model_dir), progress=self.progress)
        self.collection.choose_search_settings(**after.to_dict())
        self.seconds["switch"] = round(time.monotonic() - started, 1)
        return self._report(
            cv,
            "model",
            settings_after=after,
            model_after=str(model_dir),
            switched=True,
            reason="the fine-tuned model scored best",
        )

    # -- parts ---------------------------------------------------------------
    def _train(self, judged: JudgedSet, model_dir: Path, label: str) -> None:
        """Fine-tune the collection's model on ``judged``'s pairs into ``model_dir`` (resumed when begun)."""
        from training.contrastive import ContrastiveConfig, contrastive_train

        pairs = judged_pairs(self.collection, judged, PairPlan(self.config.hard_negatives, seed=self.config.seed))
        if len(pairs) < 2:
            pairs = judged_pairs(self.collection, judged, PairPlan(False, seed=self.config.seed))
        pairs_file = model_dir.parent / f"{model_dir.name}-pairs.jsonl"
        pairs_file.parent.mkdir(parents=True, exist_ok=True)
        rows = (
            {"anchor": p.anchor, "positive": p.positive} | ({"negative": p.negative} if p.negative else {})
            for p in pairs
        )
        atomic_write_text(pairs_file, "".join(json.dumps(row) + "\n" for row in rows))
        if self.progress:
            print(f"semsearch: training the {label} on {len(pairs)} pairs", flush=True)
        contrastive_train(
            ContrastiveConfig(
                from_model=self._base_location(),
                output_dir=str(model_dir),
                pairs=str(pairs_file),
                epochs=epochs_for(pairs, self.config.batch_size, self.config.epochs),
                batch_size=self.config.batch_size,
                lr=self.config.lr,
                max_len=min(self.config.max_len, self.collection.embedder.max_tokens),
                max_minutes=self._minutes_left(),
                save_every=50,
                resume=True,
                seed=self.config.seed,
            ),
            progress=self.progress,
        )
        keep_window(model_dir, self.collection.embedder.max_tokens)

    def _base_location(self) -> str:
        """Where the collection's model loads from (its name: the packaged alias, a hub id or a directory)."""
        return self.collection.model["name"]

    def _embedder(self, model_dir: Path):
        from retriever import Embedder

        return Embedder(str(model_dir))

    def _pooled(self, held_out: dict, *, chosen_only: bool) -> dict:
        """Fold results merged: each query's nDCG@10 by its fold's model, under that fold's chosen setting
        (``chosen_only``: ``{"chosen": {key: score}}``) or under every setting (``{Setting: {key: score}}``)."""
        pooled: dict = {}
        for result in held_out.values():
            chosen = Setting.of(result["chosen"])
            for setting_dict, scores in result["scores"]:
                setting = Setting.of(setting_dict)
                if chosen_only and setting != chosen:
                    continue
                pooled.setdefault("chosen" if chosen_only else setting, {}).update(scores)
        return pooled.get("chosen", {}) if chosen_only else pooled

    def _phase(self, name: str, work: Callable[[], object]):
        """``work()``'s result, kept in the state (a resumed run reads it back instead of working again)."""
        if name in self.state:
            return self._decoded(name, self.state[name])
        started = time.monotonic()
        result = work()
        self.seconds[name] = round(time.monotonic() - started, 1)
        self.state.put(name, self._encoded(result), seconds=self.seconds)
        return result

    @staticmethod
    def _encoded(result):
        if isinstance(result, dict) and result and all(isinstance(k, Setting) for k in result):
            return {"grid": [[s.to_dict(), per] for s, per in result.items()]}
        return result

    @staticmethod
    def _decoded(name: str, stored):
        if isinstance(stored, dict) and "grid" in stored:
            return {Setting.of(s): per for s, per in stored["grid"]}
        return stored

    def _minutes_left(self) -> float | None:
        if self.config.minutes is None:
            return None
        return max(0.5, self.config.minutes - (time.monotonic() - self.began) / 60)

    def _out_of_time(self) -> bool:
        return self.config.minutes is not None and time.monotonic() - self.began > self.config.minutes * 60

    def _no_win_reason(self, cv: dict[str, float]) -> str:
        best = max((name for name in cv if name != "current"), key=lambda n: cv[n], default=None)
        if best is None:
            return "nothing to compare"
        return (
            f"no candidate beat the current nDCG@10 {cv['current']:.4f} by {self.config.min_gain:g} "
            f"(best: {best} {cv[best]:.4f}); the collection was left as it is"
        )

    def _report(
        self,
        cv,
        chosen: str,
        *,
        finished: bool = True,
        reason: str = "",
        settings_after=None,
        model_after=None,
        switched=False,
    ) -> LearnReport:
        report = LearnReport(
            judgments=sum(len(g) for g in self.judged.qrels.values()),
            queries=len(self.keys),
            folds=self.folds,
            cv={k: round(v, 4) for k, v in cv.items()},
            chosen=chosen,
            settings_before=self.current.to_dict(),
            settings_after=(settings_after or self.current).to_dict(),
            model_before=self.model_before,
            model_after=model_after,
            switched=switched,
            finished=finished,
            reason=reason,
            seconds=dict(self.seconds),
        )
        if finished:
            write_learn_report(self.collection.root, report.to_dict())
            self.state.finish(report.to_dict())
        return report
