"""``RemoteCollection``'s judgment verbs against a real HTTP API (served in this process): what they return
equals what ``Collection``'s return."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from retriever import Collection  # noqa: E402
from retriever import remote as remote_module  # noqa: E402
from retriever.errors import BadInputError  # noqa: E402
from retriever.judgments.records import Judgment, JudgmentImport  # noqa: E402
from retriever.judgments.scoring import Evaluation  # noqa: E402
from retriever.remote import RemoteCollection  # noqa: E402
from tests.app.test_server import DOCS  # noqa: E402
from tests.retriever.live_server import live_server  # noqa: E402

KEY = "remote-judging-key"
PLAIN_KEY_NAME = "api-key"  # the name the server gives a plain --api-key (app.server.access.KeyRing.plain)
JUDGED = [
    {"query": "green tea picking", "id": "tea", "grade": 2},
    {"query": "green tea picking", "id": "coffee", "grade": 0},
    {"query": "roasted coffee beans", "id": "coffee"},
    Judgment("roasted coffee beans", "kaffee", 1),
    {"query": "where rivers meet the sea", "id": "/notes/rivers and seas.md", "grade": 3},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir):
    """``(base URL, collection path)`` of a server (key ``KEY``) over a collection of ``DOCS``."""
    path = tmp_path_factory.mktemp("remote-judging") / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(DOCS)
    with live_server(path, api_key=KEY) as url:
        yield url, path


@pytest.fixture()
def local(served):
    """The served collection opened here too, with no judgments."""
    with Collection.open(served[1]) as col:
        col.remove_judgments(everything=True)
        yield col


@pytest.fixture()
def remote(served) -> RemoteCollection:
    return RemoteCollection(served[0], api_key=KEY)


def test_judge_stores_one_under_the_key_name_and_returns_it(remote, local):
    judgment = remote.judge("  green tea picking ", "tea", 2)
    assert isinstance(judgment, Judgment)
    assert (judgment.query, judgment.doc_id, judgment.grade, judgment.who) == ("green tea picking", "tea", 2, "api-key")
    assert judgment.at > 0 and local.judgments() == [judgment]
    assert remote.judge("green tea picking", "tea", 0).grade == 0 and local.judgment_count() == (1, 1)
    with pytest.raises(BadInputError, match="no document 'nope'"):
        remote.judge("green tea picking", "nope")
    for grade in (4, True, 1.0):
        with pytest.raises(BadInputError, match="grade"):
            remote.judge("green tea picking", "tea", grade)
    with pytest.raises(BadInputError, match="query"):
        remote.judge("   ", "tea")
    assert [j.grade for j in local.judgments()] == [0]


def test_import_judgments_reports_as_the_local_verb_does(remote, local):
    rows = [*JUDGED, {"query": "green tea picking", "id": "no-such-doc"}]
    report = remote.import_judgments(rows, dry_run=True)
    assert local.judgment_count() == (0, 0)
    assert report == local.import_judgments(rows, dry_run=True)
    report = remote.import_judgments(rows)
    assert isinstance(report, JudgmentImport)
    assert report == JudgmentImport(stored=5, replaced=0, unknown=[(5, "no-such-doc")], queries=3)
    assert {j.who for j in local.judgments()} == {PLAIN_KEY_NAME}
    assert remote.import_judgments(rows[:2]) == JudgmentImport(stored=0, replaced=2, queries=1)


def test_import_judgments_in_several_requests_numbers_unknown_ids_across_them(remote, local, monkeypatch):
    monkeypatch.setattr(remote_module, "MAX_JUDGMENTS", 2)
    rows = [*JUDGED[:3], {"query": "tea", "id": "nope-3"}, JUDGED[3], {"query": "tea", "id": "nope-5"}]
    report = remote.import_judgments(rows)
    assert report == JudgmentImport(stored=4, replaced=0, unknown=[(3, "nope-3"), (5, "nope-5")], queries=2)
    assert local.judgment_count() == (4, 2)


def test_a_bad_judgment_stops_the_whole_import_before_anything_is_sent(remote, local, monkeypatch):
    monkeypatch.setattr(remote_module, "MAX_JUDGMENTS", 1)
    with pytest.raises(BadInputError, match=r"judgments\[2\]: .*grade"):
        remote.import_judgments([JUDGED[0], JUDGED[2], {"query": "tea", "id": "tea", "grade": 7}])
    with pytest.raises(BadInputError, match="read it first"):
        remote.import_judgments("judgments.jsonl")
    assert local.judgment_count() == (0, 0)


def test_judgments_and_remove_judgments_select_as_the_local_verbs_do(remote, local):
    local.import_judgments(JUDGED, who="seed")
    assert remote.judgments() == local.judgments()
    assert (
        remote.judgments(doc_id="coffee") == local.judgments(doc_id="coffee")
        and len(local.judgments(doc_id="coffee")) == 2
    )
    assert remote.judgments("roasted coffee beans", doc_id="kaffee") == local.judgments(
        "roasted coffee beans", doc_id="kaffee"
    )
    assert remote.judgments("/notes and more?&id=x") == []
    assert remote.remove_judgments("green tea picking", doc_id="tea") == 1
    assert remote.remove_judgments(doc_id="coffee") == 2
    with pytest.raises(BadInputError, match="name a query"):
        remote.remove_judgments()
    with pytest.raises(BadInputError, match="not both"):
        remote.remove_judgments("x", everything=True)
    with pytest.raises(BadInputError, match="query"):
        remote.judgments(" ")
    assert remote.remove_judgments(everything=True) == 2 and local.judgment_count() == (0, 0)


@pytest.mark.parametrize("mode", Collection.SEARCH_MODES)
def test_evaluate_returns_what_the_local_collection_measures(remote, local, mode):
    local.import_judgments(JUDGED, who="seed")
    got, want = remote.evaluate(mode=mode, per_query=True), local.evaluate(mode=mode, per_query=True)
    assert isinstance(got, Evaluation)
    assert got.settings.pop("model") == "model" and want.settings.pop("model")  # the server shows no path
    assert got == want and got.queries == 3


def test_evaluate_on_judgments_given_stores_none(remote, local):
    settings = {"mode": "hybrid", "fusion": "rrf", "alpha": 0.4, "feedback": False}
    got = remote.evaluate(JUDGED[2:4], **settings)
    assert got.metrics == local.evaluate(JUDGED[2:4], **settings).metrics and got.judgments == 2
    assert local.judgment_count() == (0, 0)
    with pytest.raises(BadInputError, match="fusion"):
        remote.evaluate(fusion="max")
    with pytest.raises(BadInputError, match=r"judgments\[0\]"):
        remote.evaluate([{"query": "tea"}])
    with pytest.raises(BadInputError, match="no judgments"):
        remote.evaluate()
