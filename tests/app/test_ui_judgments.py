"""The UI's judgment controls on hits and on the document view, and its sidebar panel of quality and learning.

Driven in-process by Streamlit's AppTest; one browser test clicks the control in headless Chromium.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

UI = Path(__file__).resolve().parents[2] / "app" / "ui" / "page.py"
TIMEOUT = 120  # the first run loads the model

DOCS = [
    {"id": "tea", "title": "Green tea", "text": "Green tea is steamed right after picking. " * 20},
    {"id": "coffee", "title": "Coffee roasting", "text": "Coffee beans are roasted at high temperature."},
    {"id": "rivers", "title": "Rivers", "text": "Rivers flow into the sea through deltas."},
]
TITLE_IDS = {doc["title"]: doc["id"] for doc in DOCS}


@pytest.fixture()
def collection(tmp_path, tiny_embedder) -> Path:
    from retriever import Collection

    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder) as col:
        col.upsert(DOCS)
    return path


def app(monkeypatch, root: Path, **query) -> AppTest:
    monkeypatch.setenv("SEMSEARCH_UI_COLLECTION", str(root))
    monkeypatch.delenv("SEMSEARCH_UI_PASSWORD", raising=False)
    at = AppTest.from_file(str(UI), default_timeout=TIMEOUT)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def no_failure(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def card_ids(at: AppTest) -> list[str]:
    """The document ids of the result cards, best first (from their titles)."""
    heads = [str(e.value) for e in at.get("html") if 'class="ss-card-head"' in str(e.value)]
    return [TITLE_IDS[re.search(r'class="ss-title">([^<]*)<', head).group(1)] for head in heads]


def pressed(at: AppTest, key: str) -> bool:
    """Whether the judgment button ``key`` shows as the judgment given (a primary button)."""
    return at.button(key=key).proto.type == "primary"


def stored(path: Path, query: str | None = None) -> list[tuple[str, str, int, str]]:
    from retriever import Collection

    with Collection.open(path) as col:
        return [(j.query, j.doc_id, j.grade, j.who) for j in col.judgments(query=query)]


def sidebar_text(at: AppTest) -> str:
    """The sidebar's HTML, captions and markdown, markdown's escapes undone."""
    parts = [str(e.value) for e in at.sidebar.get("html")]
    parts += [str(e.value) for e in at.sidebar.caption] + [str(e.value) for e in at.sidebar.markdown]
    return re.sub(r"\\(.)", r"\1", "\n".join(parts))


def test_a_click_on_a_hit_stores_the_judgment_and_a_new_session_shows_it(monkeypatch, collection):
    at = app(monkeypatch, collection, q="  green tea ", k="3")
    no_failure(at)
    ids = card_ids(at)
    assert len(ids) == 3 and not any(pressed(at, f"judge-{g}-{r}") for g in (0, 1) for r in (1, 2, 3))
    at.button(key="judge-1-2").click().run()
    no_failure(at)
    assert stored(collection) == [("green tea", ids[1], 1, "ui")]
    assert pressed(at, "judge-1-2") and not pressed(at, "judge-0-2") and not pressed(at, "judge-1-1")

    again = app(monkeypatch, collection, q="green tea", k="3")  # another browser session, the same search
    no_failure(again)
    assert card_ids(again) == ids
    assert pressed(again, "judge-1-2") and not pressed(again, "judge-0-2")
    assert not any(pressed(again, f"judge-{g}-{r}") for g in (0, 1) for r in (1, 3))
    other = app(monkeypatch, collection, q="coffee", k="3")  # another query: nothing given for it
    assert not any(pressed(other, f"judge-{g}-{r}") for g in (0, 1) for r in (1, 2, 3))


def test_a_judgment_is_changed_then_withdrawn(monkeypatch, collection):
    at = app(monkeypatch, collection, q="rivers", k="2")
    first = card_ids(at)[0]
    at.button(key="judge-1-1").click().run()
    at.button(key="judge-0-1").click().run()  # changed: does not answer
    no_failure(at)
    assert stored(collection) == [("rivers", first, 0, "ui")]
    assert pressed(at, "judge-0-1") and not pressed(at, "judge-1-1")
    at.button(key="judge-0-1").click().run()  # pressed again: withdrawn
    no_failure(at)
    assert stored(collection) == []
    assert not pressed(at, "judge-0-1") and not pressed(at, "judge-1-1")


def test_a_graded_judgment_from_elsewhere_shows_as_answers(monkeypatch, collection):
    from retriever import Collection

    with Collection.open(collection) as col:
        col.judge("coffee beans", "coffee", 3, who="cli")
    at = app(monkeypatch, collection, q="coffee beans", k="3")
    rank = card_ids(at).index("coffee") + 1
    assert pressed(at, f"judge-1-{rank}") and "grade 3" in at.button(key=f"judge-1-{rank}").help
    at.button(key=f"judge-0-{rank}").click().run()
    assert stored(collection) == [("coffee beans", "coffee", 0, "ui")]


def test_judging_a_deleted_document_is_a_one_line_message(monkeypatch, collection):
    from retriever import Collection

    at = app(monkeypatch, collection, q="green tea", k="3")
    gone = card_ids(at)[0]
    with Collection.open(collection) as other:  # deleted by another writer while the page shows it
        other.delete([gone])
    at.button(key="judge-1-1").click().run()
    assert not at.exception
    messages = [w.value for w in at.warning]
    assert len(messages) == 1 and "not stored" in messages[0] and "\n" not in messages[0], messages
    assert stored(collection) == []


def test_the_document_view_judges_the_document_for_the_query(monkeypatch, collection):
    at = app(monkeypatch, collection, q="green tea", k="1")
    doc_id = card_ids(at)[0]
    at.button(key="view-1").click().run()
    no_failure(at)
    assert at.query_params["doc"] == doc_id
    assert any("Does it answer “green tea”?" in str(e.value) for e in at.get("html"))
    at.button(key="judge-1-document").click().run()
    no_failure(at)
    assert stored(collection) == [("green tea", doc_id, 1, "ui")]
    assert pressed(at, "judge-1-document")
    at.button(key="judge-1-document").click().run()
    assert stored(collection) == [] and not pressed(at, "judge-1-document")

    bare = app(monkeypatch, collection, doc=doc_id)  # no query: nothing to judge against
    no_failure(bare)
    assert not [b for b in bare.button if b.key and b.key.startswith("judge-")]


def test_the_quality_panel_shows_the_collections_evaluation_and_follows_new_judgments(monkeypatch, collection):
    from retriever import Collection

    at = app(monkeypatch, collection, q="green tea", k="3")
    no_failure(at)
    assert "No judgments yet" in sidebar_text(at)
    assert not any(m.label in ("nDCG@10", "MRR@10") for m in at.sidebar.metric)

    with Collection.open(collection) as col:
        col.judge("green tea", "tea", 1)
        col.judge("green tea", "rivers", 0)
        col.judge("where do rivers end", "rivers", 2)
    at.run()
    no_failure(at)
    with Collection.open(collection) as col:
        expected = col.evaluate()
    shown = {m.label: m.value for m in at.sidebar.metric}
    assert shown["nDCG@10"] == f"{expected.metrics['ndcg@10']:.3f}"
    assert shown["MRR@10"] == f"{expected.metrics['mrr@10']:.3f}"
    assert expected.queries == 2 and expected.judgments == 3
    assert "On 2 judged queries (3 judgments)" in sidebar_text(at)

    rank = card_ids(at).index("coffee") + 1
    at.button(key=f"judge-1-{rank}").click().run()  # a judgment from the page: the panel measures again
    no_failure(at)
    with Collection.open(collection) as col:
        expected = col.evaluate()
    shown = {m.label: m.value for m in at.sidebar.metric}
    assert expected.judgments == 4 and "On 2 judged queries (4 judgments)" in sidebar_text(at)
    assert shown["nDCG@10"] == f"{expected.metrics['ndcg@10']:.3f}"


def test_queries_judged_only_not_to_be_answered_are_left_out_and_said_so(monkeypatch, collection):
    from retriever import Collection

    with Collection.open(collection) as col:
        col.judge("volcanoes", "rivers", 0)
    at = app(monkeypatch, collection)
    assert not at.exception
    assert "Not measured" in sidebar_text(at) and "nothing to measure" in sidebar_text(at)
    assert not any(m.label == "nDCG@10" for m in at.sidebar.metric)
    with Collection.open(collection) as col:
        col.judge("green tea", "tea", 1)
        expected = col.evaluate()
    at.run()
    no_failure(at)
    assert {m.label: m.value for m in at.sidebar.metric}["nDCG@10"] == f"{expected.metrics['ndcg@10']:.3f}"
    assert expected.unanswered == 1 and "1 more judged query has no document judged to answer it" in sidebar_text(at)


def test_the_panel_measures_only_when_the_judgments_change(monkeypatch, collection):
    from retriever import Collection

    calls = []
    real = Collection.evaluate

    def counted(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "evaluate", counted)
    with Collection.open(collection) as col:
        col.judge("green tea", "tea", 1)
        col.judge("where do rivers end", "rivers", 1)
    at = app(monkeypatch, collection, q="green tea", k="3")
    assert len(calls) == 1
    at.run()
    at.slider(key="k").set_value(2).run()
    assert len(calls) == 1  # reruns without a new judgment: measured once
    at.button(key="judge-0-1").click().run()
    assert len(calls) == 2
    with Collection.open(collection) as col:
        before = col.judgment_count()
    at.button(key="judge-1-1").click().run()  # a grade changed here: the count may stay, the panel follows
    assert len(calls) == 3
    with Collection.open(collection) as col:  # a judgment added elsewhere
        col.judge("coffee", "coffee", 1)
        assert col.judgment_count() != before
    at.run()
    assert len(calls) == 4


def test_the_learn_summary_shows_the_last_report(monkeypatch, collection):
    from retriever.judgments.learned import write_learn_report

    at = app(monkeypatch, collection)
    assert "has not run on this collection" in sidebar_text(at)
    report = {
        "at": time.time() - 7200,
        "judgments": 40,
        "queries": 12,
        "folds": 3,
        "switched": True,
        "model": {"before": "all-MiniLM-L6-v2", "after": None},
        "settings": {
            "before": {"fusion": "convex", "alpha": 0.7, "feedback": True},
            "after": {"fusion": "rrf", "alpha": 0.7, "feedback": False},
        },
        "cv": {"before": {"ndcg@10": 0.41234, "mrr@10": 0.5}, "after": {"ndcg@10": 0.45678, "mrr@10": 0.6}},
        "seconds": 12.5,
        "reason": "the chosen settings beat the current ones on every fold",
    }
    write_learn_report(collection, report)
    at.run()
    no_failure(at)
    text = sidebar_text(at)
    assert "2 hours ago" in text and "switched" in text and report["reason"] in text
    assert f"{report['cv']['before']['ndcg@10']:.3f} → {report['cv']['after']['ndcg@10']:.3f}" in text
    assert "convex fusion → rrf fusion" in text and "feedback on → feedback off" in text
    assert "alpha 0.7 →" not in text  # unchanged settings are not listed as changes
    assert f"{report['folds']}-fold cross-validation on {report['queries']} judged queries" in text

    write_learn_report(collection, {"at": "yesterday"})
    at.run()
    assert not at.exception and "unreadable" in sidebar_text(at)


# -- in a real browser -------------------------------------------------------------
try:
    from tests.app import test_ui_e2e as e2e
except pytest.skip.Exception as why:  # its own needs are missing (websockets): only the browser test skips
    e2e, E2E_MISSING = None, str(why)

    @pytest.fixture()
    def chromium() -> str:
        pytest.skip(E2E_MISSING)
else:
    chromium = e2e.chromium  # the fixture: Debian's chromium, or a skip with the reason


def test_clicking_answers_in_chromium_stores_the_judgment(chromium, collection, tmp_path):
    with e2e.running_ui(collection, tmp_path) as base:
        browser = e2e.Browser(chromium, tmp_path / "profile")
        try:
            browser.call("Page.enable")
            browser.call("Page.navigate", url=f"{base}/?q={urllib.parse.quote('green tea')}&k=1")
            title = e2e.wait_for(browser, "(document.querySelector('.ss-title') || {}).innerText")
            clicked = e2e.wait_for(
                browser,
                "(() => { const b = [...document.querySelectorAll('button')]"
                ".find(e => e.innerText.trim().endsWith('Answers')); if (b) b.click(); return !!b; })()",
            )
            deadline, judgments = time.monotonic() + 30, []
            while time.monotonic() < deadline and not judgments:
                judgments = stored(collection)
                time.sleep(0.25)
            given = e2e.wait_for(
                browser,
                "[...document.querySelectorAll('[data-testid=stBaseButton-primary]')]"
                ".some(e => e.innerText.trim().endsWith('Answers'))",
            )
        finally:
            browser.close()
    assert clicked and title in TITLE_IDS
    assert judgments == [("green tea", TITLE_IDS[title], 1, "ui")]
    assert given
