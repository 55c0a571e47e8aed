"""``training.adapt`` and ``semsearch adapt``: a collection's model adapted to its documents, checked, resumable."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from retriever import Collection, Embedder
from retriever.errors import BadInputError
from tests.training.test_pseudo_queries import documents
from training.adapt import REPORT, AdaptConfig, adapt


@pytest.fixture(scope="module")
def collection(tmp_path_factory, tiny_model_dir):
    col = Collection.create(tmp_path_factory.mktemp("adapt") / "col", tiny_model_dir)
    col.add(documents(120))
    yield col
    col.close()


def test_adapt_writes_a_model_that_loads_and_a_report_of_the_check(collection, tmp_path):
    out = tmp_path / "adapted"
    before = collection.info()["generation"]
    report = adapt(
        collection, AdaptConfig(str(out), documents=120, held_out=20, batch_size=8, hard_negatives=True), progress=False
    )
    assert (
        report.queries == 120
        and report.trained_on == 100
        and report.held_out == 20
        and 100 // 8 <= report.steps <= 100 // 8 + 1
    )
    assert (
        0 <= report.before_mrr <= 1
        and 0 <= report.after_mrr <= 1
        and report.better == (report.after_mrr > report.before_mrr)
    )
    assert set(report.seconds) == {"draw", "mine", "train", "check"}
    assert json.loads((out / REPORT).read_text())["after_mrr"] == report.after_mrr
    adapted, base = Embedder(str(out)), collection.embedder
    assert adapted.dim == base.dim and adapted.weights_sha256 != base.weights_sha256
    assert collection.info()["generation"] == before  # the collection itself is untouched
    lines = (out / "pairs.jsonl").read_text().splitlines()
    assert len(lines) == 100 and all("negative" in json.loads(line) for line in lines)


def test_a_rerun_resumes_from_the_drawn_queries_and_mined_pairs(collection, tmp_path):
    out = tmp_path / "adapted"
    adapt(collection, AdaptConfig(str(out), documents=120, held_out=20, batch_size=8), progress=False)
    queries = (out / "queries.jsonl").read_text()
    (out / "pairs.jsonl").write_text((out / "pairs.jsonl").read_text())  # untouched by a resumed run
    again = adapt(collection, AdaptConfig(str(out), documents=120, held_out=20, batch_size=8, seed=7), progress=False)
    assert (out / "queries.jsonl").read_text() == queries and "mine" not in again.seconds


@pytest.mark.parametrize(
    "settings, problem",
    [
        ({"documents": 10}, "at least 50 documents"),
        ({"held_out": 5}, "held out"),
        ({"held_out": 2000}, "a fifth"),
        ({"ranks": (5, 2)}, "negative ranks"),
        ({"minutes": 0}, "minutes must be positive"),
    ],
)
def test_bad_settings_are_refused(collection, tmp_path, settings, problem):
    with pytest.raises(BadInputError, match=problem):
        adapt(collection, AdaptConfig(str(tmp_path / "m"), **settings), progress=False)


def test_a_collection_without_enough_sentences_is_refused_by_name(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.add([{"id": f"d{i}", "text": f"word{i}"} for i in range(60)])
        with pytest.raises(BadInputError, match="only 0 of the collection's documents give a pseudo-query"):
            adapt(col, AdaptConfig(str(tmp_path / "m"), documents=60, held_out=10), progress=False)


def test_the_command_adapts_a_corpus_folder_and_reports_json(tmp_path, tiny_model_dir, capsys):
    corpus = tmp_path / "notes"
    corpus.mkdir()
    for doc in documents(100):
        (corpus / f"{doc['id']}.txt").write_text(doc["text"])
    code = main(
        [
            "adapt",
            "--corpus",
            str(corpus),
            "-o",
            str(tmp_path / "m"),
            "--model",
            str(tiny_model_dir),
            "--documents",
            "100",
            "--held-out",
            "20",
            "--batch-size",
            "8",
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["better"] else 1) and report["held_out"] == 20
    assert (tmp_path / "m" / "corpus-collection" / "manifest.json").is_file()
    assert Embedder(str(tmp_path / "m")).dim == 32
    assert main(["adapt", "-c", str(tmp_path / "nothing"), "-o", str(tmp_path / "m2")]) == 2
    assert "nothing" in capsys.readouterr().err


def test_bf16_autocast_is_chosen_by_the_cpu_unless_told(monkeypatch):
    import retriever.encoding.backends.choice as choice
    from training.contrastive import autocast_bf16

    assert autocast_bf16("bf16", "cpu") and not autocast_bf16("fp32", "cpu") and autocast_bf16("auto", "cuda")
    monkeypatch.setattr(choice, "has_bf16", lambda info=None: False)
    assert not autocast_bf16("auto", "cpu")
    monkeypatch.setattr(choice, "has_bf16", lambda info=None: True)
    assert autocast_bf16("auto", "cpu")


@pytest.mark.parametrize(
    "verdict, flags, switched", [((0.2, 0.6), [], True), ((0.6, 0.2), [], False), ((0.2, 0.6), ["--dry-run"], False)]
)
def test_the_command_switches_the_collection_only_to_a_model_that_won_the_check(
    tmp_path, tiny_model_dir, capsys, monkeypatch, verdict, flags, switched
):
    import training.adapt as adapting

    root = tmp_path / "col"
    with Collection.create(root, tiny_model_dir) as col:
        col.add(documents(100))
        col.delete(["d3"])
        generation, model = col.info()["generation"], col.model
    monkeypatch.setattr(adapting, "check", lambda *args, **kwargs: verdict)  # the verdict, not its measure
    code = main(
        ["adapt", "-c", str(root), "--documents", "100", "--held-out", "15", "--batch-size", "8", "--json", *flags]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if verdict[1] > verdict[0] else 1)
    out = root / "models" / f"adapted-g{generation}"
    assert report["model_dir"] == str(out.resolve()) and Embedder(str(out)).dim == 32
    with Collection.open(root) as col:
        if switched:
            assert report["switched"]["generation"] == generation + 1 == col.info()["generation"]
            assert col.model["sha256"] == Embedder(str(out)).weights_sha256 != model["sha256"]
            assert col.model["name"] == str(out.resolve()) and len(col) == 99 and "d3" not in col
            assert col.search("tea", k=3, mode="dense")
        else:
            assert report["switched"] is None and col.info()["generation"] == generation and col.model == model


def test_the_command_needs_an_output_for_a_corpus(tmp_path, capsys):
    assert main(["adapt", "--corpus", str(tmp_path)]) == 2
    assert "--corpus needs -o MODEL" in capsys.readouterr().err
