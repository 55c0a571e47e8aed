"""``training.learning`` and ``semsearch learn``: candidates judged by cross-validation, the winner adopted."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from retriever import Collection
from retriever.errors import BadInputError
from retriever.judgments.learned import read_learn_report
from tests.training.test_pseudo_queries import TOPICS, documents
from training.learning import LearnConfig, fold_of, learn
from training.learning_state import STATE

N_DOCS = 60


def judged_rows(n: int = 24) -> list[dict]:
    """A query per document ``d0 .. d{n-1}``, answered by it (grade 2) and not by its neighbour (grade 0)."""
    rows = []
    for i in range(n):
        query = f"{TOPICS[i % len(TOPICS)]} study {i}"
        rows += [
            {"query": query, "id": f"d{i}", "grade": 2},
            {"query": query, "id": f"d{(i + 1) % N_DOCS}", "grade": 0},
        ]
    return rows


@pytest.fixture
def collection(tmp_path, tiny_model_dir):
    col = Collection.create(tmp_path / "col", tiny_model_dir)
    col.add(documents(N_DOCS))
    col.import_judgments(judged_rows())
    yield col
    col.close()


def quick(tmp_path, **changes) -> LearnConfig:
    base = {"work_dir": str(tmp_path / "work"), "folds": 2, "epochs": 1, "batch_size": 8, "max_len": 16}  # texts cut
    return LearnConfig(**{**base, **changes})


def test_settings_that_win_become_the_collections_own(collection, tmp_path):
    collection.choose_search_settings(alpha=1.0, feedback=False)  # the random tiny model alone: a poor start
    generation = collection.info()["generation"]
    report = learn(collection, quick(tmp_path, train_model=False), progress=False)
    assert set(report.cv) == {"current", "settings"} and report.cv["settings"] > report.cv["current"] + 0.005
    assert report.chosen == "settings" and not report.switched and report.settings_after["alpha"] < 1.0
    assert collection.search_settings() == report.settings_after
    assert collection.info()["generation"] == generation  # the model and the documents are as they were
    kept = read_learn_report(collection.root)
    assert (
        kept["settings"]["after"] == report.settings_after and kept["cv"]["after"]["ndcg@10"] == report.cv["settings"]
    )


def test_no_winner_by_the_margin_leaves_the_collection_then_a_rerun_resumes_and_adopts(collection, tmp_path):
    before = (collection.model["sha256"], collection.search_settings(), collection.info()["generation"])
    refused = learn(collection, quick(tmp_path, min_gain=1.0), progress=False)
    assert set(refused.cv) == {"current", "settings", "model"} and refused.chosen == "current"
    assert "left as it is" in refused.reason and not refused.switched
    assert (collection.model["sha256"], collection.search_settings(), collection.info()["generation"]) == before
    state = json.loads((tmp_path / "work" / STATE).read_text())
    assert {"current", "fold-1", "fold-2"} <= set(state["phases"])
    assert not list((tmp_path / "work").glob("fold-*/model"))  # models removed, pairs and scores kept

    pairs = tmp_path / "work" / "fold-1" / "model-pairs.jsonl"
    written = pairs.stat().st_mtime_ns
    adopted = learn(collection, quick(tmp_path, min_gain=-1.0), progress=False)  # the folds are read back
    assert adopted.cv == refused.cv and adopted.chosen == max(adopted.cv, key=adopted.cv.get)
    assert pairs.stat().st_mtime_ns == written  # no fold trained again
    if adopted.chosen == "model":
        assert adopted.switched and collection.model["sha256"] != before[0]
        assert collection.model["name"] == adopted.model_after and "/models/learned-g" in adopted.model_after
    else:
        assert not adopted.switched and collection.model["sha256"] == before[0]
    assert collection.search_settings() == adopted.settings_after


def test_no_fold_trains_on_a_query_it_scores(collection, tmp_path):
    learn(collection, quick(tmp_path, min_gain=1.0), progress=False)
    judged = collection.judged()
    fold = fold_of(sorted(judged.queries), 2, 0)
    for number in (0, 1):
        anchors = {
            json.loads(line)["anchor"]
            for line in (tmp_path / "work" / f"fold-{number + 1}" / "model-pairs.jsonl").open()
        }
        scored = {judged.queries[key] for key, n in fold.items() if n == number}
        assert anchors and not anchors & scored


def test_minutes_stop_a_run_that_a_rerun_finishes(collection, tmp_path):
    stopped = learn(collection, quick(tmp_path, minutes=1e-6, min_gain=1.0), progress=False)
    assert not stopped.finished and read_learn_report(collection.root) is None
    assert "current" in json.loads((tmp_path / "work" / STATE).read_text())["phases"]
    finished = learn(collection, quick(tmp_path, min_gain=1.0), progress=False)
    assert finished.finished and read_learn_report(collection.root)["queries"] == finished.queries == 24


def test_too_few_judged_queries_are_refused_by_count(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "few", tiny_model_dir) as col:
        col.add(documents(20))
        col.import_judgments(judged_rows(4))
        with pytest.raises(BadInputError, match="at least 10 queries .* has 4"):
            learn(col, quick(tmp_path), progress=False)


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"folds": 1}, "folds"),
        ({"tune_share": 0.6}, "tune share"),
        ({"minutes": 0}, "minutes"),
        ({"epochs": 0}, "epochs"),
    ],
)
def test_bad_settings_are_refused(changes, words, tmp_path):
    with pytest.raises(BadInputError, match=words):
        quick(tmp_path, **changes).validate()


def test_the_command_reports_json_and_a_dry_run_changes_nothing(collection, tmp_path, capsys):
    root = collection.root
    collection.choose_search_settings(alpha=1.0)
    collection.close()
    code = main(
        [
            "learn",
            "-c",
            str(root),
            "--settings-only",
            "--dry-run",
            "--folds",
            "2",
            "--work",
            str(tmp_path / "w"),
            "--json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["chosen"] == "settings" and "dry run" in report["reason"]
    with Collection.open(root) as reopened:
        assert reopened.search_settings()["alpha"] == 1.0
