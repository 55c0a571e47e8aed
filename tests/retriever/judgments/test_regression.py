"""The regression file: figures recorded, compared with later ones (``retriever.judgments.regression``)."""

from __future__ import annotations

import datetime

import pytest
import yaml

from retriever.errors import BadInputError
from retriever.evaluation import METRICS
from retriever.judgments.regression import DEFAULT_TOLERANCE, compare, load_expected, record, settings_changed
from retriever.judgments.scoring import Evaluation

SETTINGS = {"mode": "hybrid", "fusion": "convex", "alpha": 0.7, "feedback": True, "model": "tiny"}


def evaluation(ndcg=0.8, mrr=0.7, recall=0.9, map_=0.6, **settings) -> Evaluation:
    metrics = dict(zip(METRICS, (ndcg, mrr, recall, map_)))
    return Evaluation(metrics, queries=12, judgments=30, settings={**SETTINGS, **settings})


def test_the_file_records_figures_settings_counts_tolerance_and_date(tmp_path):
    path = tmp_path / "quality.yaml"
    record(path, evaluation(ndcg=0.812345))
    content = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert content["metrics"] == {"ndcg@10": 0.8123, "mrr@10": 0.7, "recall@100": 0.9, "map@100": 0.6}
    assert content["settings"] == SETTINGS and (content["queries"], content["judgments"]) == (12, 30)
    assert content["tolerance"] == DEFAULT_TOLERANCE == 0.01
    assert datetime.date.fromisoformat(str(content["date"])) == datetime.date.today()
    assert load_expected(path)["metrics"] == content["metrics"]


def test_a_metric_below_the_recorded_one_by_more_than_the_tolerance_is_a_regression(tmp_path):
    path = tmp_path / "quality.yaml"
    record(path, evaluation(), tolerance=0.02)
    expected = load_expected(path)
    assert compare(expected, evaluation()) == []
    assert compare(expected, evaluation(ndcg=0.79, mrr=0.95)) == []  # within the tolerance, or better
    assert compare(expected, evaluation(ndcg=0.78)) == []  # exactly at the tolerance
    regressions = compare(expected, evaluation(ndcg=0.7, map_=0.5))
    assert [(r.metric, r.expected, r.measured) for r in regressions] == [("ndcg@10", 0.8, 0.7), ("map@100", 0.6, 0.5)]
    assert "ndcg@10" in str(regressions[0]) and "0.8000" in str(regressions[0]) and "0.7000" in str(regressions[0])


def test_a_hand_written_file_needs_only_metrics(tmp_path):
    path = tmp_path / "hand.yaml"
    path.write_text("metrics:\n  ndcg@10: 0.5\n", encoding="utf-8")
    expected = load_expected(path)
    assert expected["tolerance"] == DEFAULT_TOLERANCE
    assert compare(expected, evaluation(ndcg=0.2, mrr=0.0)) == compare(expected, evaluation(ndcg=0.2))
    assert [r.metric for r in compare(expected, evaluation(ndcg=0.2))] == ["ndcg@10"]
    assert settings_changed(expected, evaluation()) == []


def test_changed_settings_and_counts_are_named(tmp_path):
    path = tmp_path / "quality.yaml"
    record(path, evaluation())
    changed = settings_changed(load_expected(path), evaluation(mode="bm25"))
    assert changed == ["mode: hybrid -> bm25"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metrics: [1, 2\n", "not YAML"),
        ("tolerance: 0.1\n", "has no metrics"),
        ("metrics:\n  ndcg@10: high\n", "must be a number"),
        ("metrics:\n  ndcg@11: 0.5\n", "unknown metric"),
        ("metrics:\n  ndcg@10: 0.5\ntolerance: -1\n", "tolerance must be a number of at least 0"),
    ],
)
def test_a_bad_file_is_refused_naming_why(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BadInputError, match=message):
        load_expected(path)


def test_a_missing_file_and_a_bad_tolerance_are_refused(tmp_path):
    with pytest.raises(BadInputError, match="cannot read"):
        load_expected(tmp_path / "absent.yaml")
    with pytest.raises(BadInputError, match="tolerance"):
        record(tmp_path / "q.yaml", evaluation(), tolerance=float("nan"))
    assert not (tmp_path / "q.yaml").exists()
