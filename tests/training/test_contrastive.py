"""Contrastive fine-tuning: pair sources, duplicate-free batches, learning, dev selection, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from app.cli import main
from retriever.errors import BadInputError
from tests.training.conftest import QUERIES, SENTENCES, Stop, stop_at
from training.contrastive import (
    ContrastiveConfig,
    Pair,
    beir_pairs,
    contrastive_train,
    crop_pairs,
    evaluate_dev,
    is_dev_query,
    load_dev,
    load_mean_pooling_model,
    no_duplicate_batches,
    read_corpus,
    simcse_pairs,
)


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("".join(json.dumps({"anchor": " ".join(s.split()[:3]), "positive": s}) + "\n" for s in SENTENCES))
    return path


# -- pair sources -----------------------------------------------------------
def test_simcse_pairs_are_identical_texts(corpus_dir):
    documents = read_corpus([corpus_dir])
    pairs = simcse_pairs(documents)
    assert pairs and all(p.anchor == p.positive and p.negative is None for p in pairs)
    assert len(pairs) == len(set(documents))  # repeated paragraphs paired once


def test_crop_pairs_are_differing_spans_of_one_document():
    documents = [" ".join(f"w{d}_{i}" for i in range(40)) for d in range(20)] + ["too short to crop"]
    pairs = crop_pairs(documents, seed=3)
    assert len(pairs) == 20
    for doc, pair in zip(documents, pairs):
        for span in (pair.anchor, pair.positive):
            assert span in doc and 5 <= len(span.split()) <= 20
    assert sum(p.anchor != p.positive for p in pairs) >= 18
    assert crop_pairs(documents, seed=3) == pairs and crop_pairs(documents, seed=4) != pairs


def test_beir_train_pairs_and_hard_negatives(beir_dir):
    pairs = beir_pairs(beir_dir, "train")
    assert pairs == [
        Pair(QUERIES[q][0], f"topic {QUERIES[q][1]}\n{SENTENCES[QUERIES[q][1]]}")
        for q in ("q0", "q1", "q2", "q3", "q4", "q5")
    ]  # score 0 is not a positive
    mined = beir_pairs(beir_dir, "train", hard_negatives=True)
    documents = {f"topic {i}\n{s}" for i, s in enumerate(SENTENCES)}
    for plain, pair in zip(pairs, mined):
        assert (pair.anchor, pair.positive) == (plain.anchor, plain.positive)
        assert pair.negative in documents and pair.negative != pair.positive


def test_read_corpus_reads_beir_corpora(beir_dir):
    assert read_corpus([beir_dir]) == [f"topic {i}\n{s}" for i, s in enumerate(SENTENCES)]
    assert read_corpus([beir_dir / "corpus.jsonl"]) == read_corpus([beir_dir])


# -- batching -----------------------------------------------------------------
def test_batches_never_repeat_a_text():
    rng = np.random.default_rng(0)
    words = [f"t{i}" for i in range(12)]
    pairs = [
        Pair(str(rng.choice(words)), str(rng.choice(words)), str(rng.choice(words)) if i % 2 else None)
        for i in range(200)
    ]
    batches = no_duplicate_batches(pairs, 8, seed=1)
    assert batches and all(2 <= len(b) <= 8 for b in batches)
    for batch in batches:
        texts = [t for i in batch for t in pairs[i].texts()]
        assert len(texts) == len(set(texts))
    flat = [i for b in batches for i in b]
    assert len(flat) == len(set(flat))
    unique = [Pair(f"a{i}", f"p{i}") for i in range(20)]
    assert sorted(i for b in no_duplicate_batches(unique, 8) for i in b) == list(range(20))
    assert no_duplicate_batches(unique, 8, seed=5) == no_duplicate_batches(unique, 8, seed=5)


# -- training -----------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tiny_model_dir, pairs_file, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("contrastive") / "model"
    config = ContrastiveConfig(
        from_model=str(tiny_model_dir),
        output_dir=str(out),
        pairs=str(pairs_file),
        max_steps=20,
        batch_size=8,
        lr=1e-3,
        seed=0,
    )
    return out, contrastive_train(config, progress=False)


def test_loss_falls_and_run_is_deterministic(trained, tiny_model_dir, pairs_file, tmp_path):
    out, summary = trained
    losses = [record["train_loss"] for record in _log(out)]
    assert len(losses) == 20 and summary["steps"] == 20 and summary["seconds"] > 0
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    assert summary["best_dev_ndcg"] is None and summary["train_loss"] == losses[-1]
    again = tmp_path / "again"
    contrastive_train(
        ContrastiveConfig(
            from_model=str(tiny_model_dir),
            output_dir=str(again),
            pairs=str(pairs_file),
            max_steps=20,
            batch_size=8,
            lr=1e-3,
            seed=0,
        ),
        progress=False,
    )
    assert [r["train_loss"] for r in _log(again)] == losses  # same seed, same run


def test_resume_matches_an_uninterrupted_run(tiny_model_dir, corpus_dir, tmp_path):
    from safetensors.torch import load_file

    from training.checkpoints import latest_checkpoint

    def config(out: Path, **overrides) -> ContrastiveConfig:  # crops: pairs redrawn each epoch
        return ContrastiveConfig(
            from_model=str(tiny_model_dir),
            output_dir=str(out),
            corpus=[str(corpus_dir)],
            unsupervised="crop",
            max_steps=9,
            batch_size=4,
            lr=1e-3,
            save_every=3,
            **overrides,
        )

    full, split = tmp_path / "full", tmp_path / "split"
    contrastive_train(config(full), progress=False)
    with pytest.raises(Stop):  # killed in step 7, after the checkpoint of step 6
        contrastive_train(config(split), progress=False, callback=stop_at(7))
    assert latest_checkpoint(split).name == "step-6"
    assert sorted(p.name for p in (split / "checkpoints").iterdir()) == ["step-3", "step-6"]
    steps: list[int] = []
    summary = contrastive_train(
        config(split, resume=True), progress=False, callback=lambda record: steps.append(record["step"])
    )
    assert steps == [7, 8, 9] and summary["steps"] == 9
    assert [r["step"] for r in _log(split)] == list(range(1, 10))
    assert [r["train_loss"] for r in _log(split)] == [r["train_loss"] for r in _log(full)]
    expected = load_file(next(full.rglob("model.safetensors")))
    actual = load_file(next(split.rglob("model.safetensors")))
    assert all(torch.equal(expected[name], actual[name]) for name in expected)


def test_output_loads_in_embedder_and_collection(trained, tmp_path):
    from retriever import Collection, Embedder

    embedder = Embedder(trained[0])
    vectors = embedder.embed(["rivers flow into the sea", "green tea"])
    assert vectors.shape == (2, 32)
    with Collection.create(tmp_path / "col", embedder) as collection:
        collection.upsert([{"id": f"d{i}", "text": s} for i, s in enumerate(SENTENCES)])
        hits = collection.search("Rivers flow", k=3, mode="dense")
    assert len(hits) == 3 and {h.id for h in hits} <= {f"d{i}" for i in range(len(SENTENCES))}


def test_plain_bert_loads_with_mean_pooling_and_other_pooling_is_refused(tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from retriever.errors import BadInputError

    plain = load_mean_pooling_model(tiny_model_dir.parent / "raw")  # a plain HF BERT directory
    assert [type(m).__name__ for m in plain][-1] == "Pooling"
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    cls = SentenceTransformer(modules=[model[0], Pooling(32, pooling_mode="cls")], device="cpu")
    cls.save(str(tmp_path / "cls"))
    with pytest.raises(BadInputError, match="pooling"):
        load_mean_pooling_model(tmp_path / "cls")


def test_dev_records_ndcg_and_keeps_the_best(tiny_model_dir, beir_dir, tmp_path):
    out = tmp_path / "dev"
    config = ContrastiveConfig(
        from_model=str(tiny_model_dir),
        output_dir=str(out),
        beir=str(beir_dir),
        hard_negatives=True,
        max_steps=6,
        batch_size=4,
        lr=1e-3,
        dev=str(beir_dir),
        eval_every=2,
    )
    summary = contrastive_train(config, progress=False)
    log = _log(out)
    scores = {r["step"]: r["dev_ndcg@10"] for r in log if "dev_ndcg@10" in r}
    assert sorted(scores) == [2, 4, 6] and all(0 <= s <= 1 for s in scores.values())
    assert summary["best_dev_ndcg"] == max(scores.values())
    assert scores[summary["best_step"]] == summary["best_dev_ndcg"]
    saved = [r["step"] for r in log if r.get("saved")]
    assert saved[0] == 2 and saved[-1] == summary["best_step"]
    dev = load_dev(config.dev, config.dev_split)
    assert evaluate_dev(load_mean_pooling_model(out), dev) == pytest.approx(summary["best_dev_ndcg"])


def test_dev_draw_is_fixed_by_query_id_and_nested():
    ids = [f"query-{i}" for i in range(20_000)]
    quarter = {q for q in ids if is_dev_query(q, 0.25)}
    assert 0.23 < len(quarter) / len(ids) < 0.27
    assert quarter < {q for q in ids if is_dev_query(q, 0.5)}  # a larger fraction keeps the smaller draw
    assert not any(is_dev_query(q, 0.0) for q in ids) and all(is_dev_query(q, 1.0) for q in ids)


def test_dev_fraction_holds_its_queries_out_of_training(tiny_model_dir, beir_dir, tmp_path):
    drawn = {q for q in ("q0", "q1", "q2", "q3", "q4", "q5") if is_dev_query(q, 0.5)}
    assert drawn and len(drawn) < 6  # both sides of the split hold queries
    dev = load_dev(beir_dir, "train", 0.5)
    assert set(dev.dataset.queries) == set(dev.dataset.qrels) == drawn
    kept = beir_pairs(beir_dir, "train", leave_out=lambda q: is_dev_query(q, 0.5))
    assert {p.anchor for p in kept} == {QUERIES[q][0] for q in ("q0", "q1", "q2", "q3", "q4", "q5")} - {
        QUERIES[q][0] for q in drawn
    }

    out = tmp_path / "held-out"
    common = dict(
        from_model=str(tiny_model_dir),
        output_dir=str(out),
        beir=str(beir_dir),
        split="train",
        max_steps=2,
        batch_size=2,
        lr=1e-3,
        dev=str(beir_dir),
        dev_split="train",
        eval_every=1,
    )
    with pytest.raises(BadInputError, match="give --dev-fraction"):
        contrastive_train(ContrastiveConfig(**common), progress=False)
    summary = contrastive_train(ContrastiveConfig(**common, dev_fraction=0.5), progress=False)
    assert summary["pairs"] == len(kept) and summary["best_dev_ndcg"] is not None
    with pytest.raises(BadInputError, match="draws none"):
        load_dev(beir_dir, "train", 1e-6)


def test_a_capped_dev_corpus_keeps_every_judged_document_then_a_fixed_draw(beir_dir):
    whole = load_dev(beir_dir, "train", 0.5)
    judged = {doc for judgments in whole.dataset.qrels.values() for doc in judgments}
    tight = load_dev(beir_dir, "train", 0.5, max_documents=1)
    assert {d["id"] for d in tight.documents} == judged  # never fewer than the judged ones
    capped = load_dev(beir_dir, "train", 0.5, max_documents=len(judged) + 2)
    ids = [d["id"] for d in capped.documents]
    assert len(ids) == len(judged) + 2 and judged < set(ids) <= {d["id"] for d in whole.documents}
    assert ids == [d["id"] for d in load_dev(beir_dir, "train", 0.5, max_documents=len(judged) + 2).documents]


# -- CLI ------------------------------------------------------------------------
def test_cli_trains_and_rejects_bad_combinations(tiny_model_dir, corpus_dir, tmp_path, capsys):
    out = tmp_path / "cli"
    assert (
        main(
            [
                "train",
                "contrastive",
                "--from",
                str(tiny_model_dir),
                "-o",
                str(out),
                "--corpus",
                str(corpus_dir),
                "--unsupervised",
                "crop",
                "--max-steps",
                "2",
                "--batch-size",
                "4",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 2 and (out / "modules.json").is_file() and len(_log(out)) == 2
    assert (
        main(
            [
                "train",
                "contrastive",
                "--from",
                str(tiny_model_dir),
                "-o",
                str(out),
                "--corpus",
                str(corpus_dir),
                "--unsupervised",
                "simcse",
                "--max-steps",
                "1",
                "--batch-size",
                "4",
                "-q",
            ]
        )
        == 0
    )
    assert "1 steps" in capsys.readouterr().err

    bad = [
        ["--from", str(tiny_model_dir), "-o", str(out)],  # no pair source
        ["--from", str(tiny_model_dir), "-o", str(out), "--corpus", str(corpus_dir)],  # no --unsupervised
        ["--from", str(tiny_model_dir), "-o", str(out), "--pairs", "x.jsonl", "--beir", "y"],
        ["--from", str(tiny_model_dir), "-o", str(out), "--pairs", str(tmp_path / "missing.jsonl")],
        ["--from", str(tmp_path / "nope"), "-o", str(out), "--corpus", str(corpus_dir), "--unsupervised", "simcse"],
    ]
    for args in bad:
        assert main(["train", "contrastive", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("semsearch: error:") and len(err.strip().splitlines()) == 1, err
