"""The Streamlit UI, driven in-process by Streamlit's AppTest, and its helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.ui.filters import build_where, field_clause, filter_fields  # noqa: E402
from app.ui.folders import find_collections  # noqa: E402
from indexer.uploads import index_uploads, safe_file_name  # noqa: E402

UI = Path(__file__).resolve().parents[2] / "app" / "ui" / "page.py"
TIMEOUT = 120  # the first run loads the model

DOCS = [
    {
        "id": "tea",
        "title": "Green tea",
        "text": "Green tea is steamed right after picking. " * 40,
        "metadata": {"lang": "en", "year": 2021, "reviewed": True},
    },
    {
        "id": "coffee",
        "title": "Coffee <b>roasting</b> & $maths$",
        "text": "Coffee beans are roasted at high temperature. <script>alert(1)</script> *not bold*",
        "metadata": {"lang": "en", "year": 2019, "reviewed": False},
    },
    {
        "id": "kaffee",
        "title": "Kaffee",
        "text": "Kaffee wird geröstet, heiß und stark.",
        "metadata": {"lang": "de", "year": 2020, "reviewed": True},
    },
    {
        "id": "rivers",
        "title": "Rivers",
        "text": "Rivers flow into the sea through deltas.",
        "metadata": {"lang": "en", "year": 2018},
    },
]


@pytest.fixture()
def collection(tmp_path, tiny_embedder) -> Path:
    from retriever import Collection

    path = tmp_path / "col"
    with Collection.create(path, tiny_embedder) as col:
        col.upsert(DOCS)
    return path


def app(monkeypatch, root: Path, **query) -> AppTest:
    monkeypatch.setenv("SEMSEARCH_UI_COLLECTION", str(root))
    at = AppTest.from_file(str(UI), default_timeout=TIMEOUT)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def html_of(at: AppTest) -> str:
    return "\n".join(str(element.value) for element in at.get("html"))


def cards(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.get("html") if 'class="ss-card-head"' in str(e.value)]


def no_failure(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_query_in_url_shows_result_cards(monkeypatch, collection):
    at = app(monkeypatch, collection, q="green tea")
    no_failure(at)
    assert at.text_input(key="q").value == "green tea"
    found = cards(at)
    assert len(found) == 4
    page = html_of(at)
    assert "Green tea" in page and "4 results" in page and " ms" in page
    # the evidence sentence is marked and the query's terms in it are bold, not the whole passage
    assert (
        '<mark class="ss-evidence" title="holds the query\'s words"><b class="ss-term">Green</b> '
        '<b class="ss-term">tea</b> is steamed right after picking.</mark>'
    ) in page
    # titles and passages are escaped: no markup from documents reaches the page
    assert "Coffee &lt;b&gt;roasting&lt;/b&gt; &amp; $maths$" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    # stats in the sidebar
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Documents"] == "4" and int(metrics["Chunks"]) >= 4
    assert "1 segment: exact (" in page


def test_k_mode_and_filters(monkeypatch, collection):
    from retriever import Collection

    at = app(monkeypatch, collection, q="coffee", k="2")
    no_failure(at)
    assert at.slider(key="k").value == 2 and len(cards(at)) == 2
    assert at.selectbox(key="mode").options == list(Collection.SEARCH_MODES)
    at.slider(key="k").set_value(10)
    at.multiselect(key="f:col:lang").set_value(["de"]).run()
    no_failure(at)
    assert len(cards(at)) == 1 and "Kaffee" in cards(at)[0] and "filtered" in html_of(at)

    at.multiselect(key="f:col:lang").set_value([])
    at.number_input(key="f:col:year:lo").set_value(2019)
    at.number_input(key="f:col:year:hi").set_value(2020).run()
    assert sorted("Kaffee" in c for c in cards(at)) == [False, True] and len(cards(at)) == 2

    at.selectbox(key="f:col:reviewed").set_value("no").run()
    assert len(cards(at)) == 1 and "Coffee" in cards(at)[0]

    at.text_area(key="where").set_value('{"lang": "de"}').run()  # ANDed with the widgets: nothing left
    no_failure(at)
    assert not cards(at) and any("No documents match" in i.value for i in at.info)

    at.button[-1].click().run()  # Clear filters
    assert at.text_area(key="where").value == "" and len(cards(at)) == 4


def test_a_tagged_field_is_offered_with_every_label(monkeypatch, collection):
    from retriever import Collection

    with Collection.open(collection) as col:
        col.tag(
            "kind",
            [
                {"id": "tea", "label": "tea"},
                {"id": "rivers", "label": "nature"},
                {"text": "coffee and tea in a cup", "label": "tea"},
            ],
            method="tfidf",
        )
        nature = sorted(doc_id for doc_id in col.ids() if col.get(doc_id).metadata["kind"] == "nature")
    at = app(monkeypatch, collection, q="water", k="10")
    no_failure(at)
    assert at.multiselect(key="f:col:kind").options == ["nature", "tea"]
    at.multiselect(key="f:col:kind").set_value(["nature"]).run()
    no_failure(at)
    assert len(cards(at)) == len(nature) and "Rivers" in "".join(cards(at))


def test_bad_filter_and_failures_are_messages(monkeypatch, collection):
    at = app(monkeypatch, collection, q="tea", where="{not json")
    assert not at.exception
    assert any("not valid JSON" in w.value for w in at.warning) and not cards(at)

    at.text_area(key="where").set_value('{"year": {"$between": [1, 2]}}').run()
    assert not at.exception
    assert any("could not run" in w.value and r"\$between" in w.value for w in at.warning)  # no LaTeX

    from retriever import Collection, SemsearchError

    def broken(*_args, **_kwargs):
        raise SemsearchError("the index is on fire")

    monkeypatch.setattr(Collection, "search", broken)
    at.text_area(key="where").set_value("").run()
    assert not at.exception
    assert any("the index is on fire" in e.value for e in at.error)


def test_empty_states(monkeypatch, tmp_path, tiny_embedder, collection):
    from retriever import Collection

    Collection.create(tmp_path / "empty", tiny_embedder).close()
    at = app(monkeypatch, tmp_path / "empty", q="anything")
    assert not at.exception and any("collection is empty" in i.value for i in at.info)

    at = app(monkeypatch, collection, q="tea", doc="no-such-id")
    assert not at.exception and any("no document with id" in w.value for w in at.warning)

    (tmp_path / "stuff").mkdir()
    (tmp_path / "stuff" / "notes.txt").write_text("not a collection")
    at = app(monkeypatch, tmp_path / "stuff")
    assert not at.exception and any("holds no collection" in i.value for i in at.info)

    at = app(monkeypatch, tmp_path / "new")
    assert not at.exception and any("no collection at" in i.value for i in at.info)
    assert any(b.label == "Create the collection" for b in at.button)


def test_document_view_highlights_the_chunk(monkeypatch, collection):
    at = app(monkeypatch, collection, q="green tea", k="1")
    no_failure(at)
    at.button(key="view-1").click().run()
    no_failure(at)
    assert at.query_params["doc"] == "tea"
    page = html_of(at)
    assert '<mark id="match">' in page and "ss-doc" in page and "characters" in page
    assert not cards(at)
    at.button[0].click().run()  # Back to results
    assert "doc" not in at.query_params and len(cards(at)) == 1


def test_add_pasted_document_is_found(monkeypatch, collection):
    at = app(monkeypatch, collection, q="volcanic eruptions lava")
    at.text_input(key="paste-title").set_value("Volcanoes")
    at.text_input(key="paste-id").set_value("volcano-1")
    at.text_area(key="paste-text").set_value("Volcanic eruptions pour lava over the island.")
    at.text_area(key="paste-meta").set_value('{"lang": "en", "year": 2024}')
    at.button(key="FormSubmitter:paste-Add document").click().run()
    no_failure(at)
    assert any("1 added" in s.value for s in at.success)
    assert at.text_area(key="paste-text").value == ""  # the form is emptied after success
    assert {m.label: m.value for m in at.metric}["Documents"] == "5"
    assert any("Volcanoes" in c for c in cards(at))

    at.text_area(key="paste-text").set_value("x")
    at.text_area(key="paste-meta").set_value("[1, 2]")
    at.button(key="FormSubmitter:paste-Add document").click().run()
    assert not at.exception
    assert any("Nothing was added" in e.value for e in at.error)
    assert "metadata must be a JSON object" in str(at.dataframe[0].value)
    assert at.text_area(key="paste-text").value == "x"  # kept for the user to fix


def test_upload_files_with_progress_and_per_file_errors(monkeypatch, collection):
    at = app(monkeypatch, collection)
    records = "\n".join(
        [
            json.dumps({"id": "r1", "title": "Glaciers", "text": "Glaciers carve valleys.", "topic": "ice"}),
            "{broken",
            json.dumps({"id": "r2", "title": "Deserts", "text": "Deserts receive little rain.", "topic": "sand"}),
        ]
    )
    at.file_uploader[0].set_value(
        [
            ("orchids.txt", b"Orchids grow on trees in rain forests.", "text/plain"),
            ("records.jsonl", records.encode(), "application/octet-stream"),
            ("broken.pdf", b"%PDF-1.4 this is not really a pdf", "application/pdf"),
        ]
    ).run()
    at.button(key="index-files").click().run()
    assert not at.exception and not at.error
    assert any("3 added" in s.value for s in at.success)
    assert any("2 problems, skipped" in w.value for w in at.warning)
    problems = at.dataframe[0].value
    sources = list(problems["File or record"])
    assert "broken.pdf" in sources and "records.jsonl:2" in sources
    assert {m.label: m.value for m in at.metric}["Documents"] == "7"

    from retriever import Collection

    with Collection.open(collection) as col:
        doc = col.get("orchids.txt")
        assert doc is not None and doc.metadata["source"] == "orchids.txt"
        assert col.get("r1").metadata["topic"] == "ice"


def test_sees_writes_from_other_processes_without_restart(monkeypatch, collection):
    from retriever import Collection

    at = app(monkeypatch, collection, q="penguins in antarctica")
    assert not any("Penguins" in c for c in cards(at))
    with Collection.open(collection) as other:  # another writer, e.g. a batch job
        other.upsert([{"id": "p", "title": "Penguins", "text": "Penguins live in Antarctica."}])
    at.run()
    assert any("Penguins" in c for c in cards(at))
    assert {m.label: m.value for m in at.metric}["Documents"] == "5"


def test_collection_picker(monkeypatch, tmp_path, tiny_embedder):
    from retriever import Collection

    for name, title in (("alpha", "Alpha doc"), ("beta", "Beta doc")):
        with Collection.create(tmp_path / "root" / name, tiny_embedder) as col:
            col.upsert([{"id": name, "title": title, "text": f"{title} text about {name}."}])
    (tmp_path / "root" / "not-a-collection").mkdir()
    at = app(monkeypatch, tmp_path / "root", q="doc", c="beta")
    no_failure(at)
    assert at.selectbox(key="c").options == ["alpha", "beta"] and at.selectbox(key="c").value == "beta"
    assert any("Beta doc" in c for c in cards(at)) and not any("Alpha doc" in c for c in cards(at))
    at.selectbox(key="c").set_value("alpha").run()
    assert any("Alpha doc" in c for c in cards(at))


# -- helpers -----------------------------------------------------------------------
def test_filter_fields_and_clauses():
    specs = {
        s.name: s
        for s in filter_fields(
            {
                "lang": ["en", "de"],
                "year": [2020, 2019.5],
                "ok": [True],
                "tags": [],
                "encoding": ["utf-8"],
                "path": [f"p{i}" for i in range(20)],
            }
        )
    }
    assert set(specs) == {"lang", "year", "ok", "path"}
    assert specs["lang"].kind == "choice" and specs["lang"].options == ("de", "en")
    assert specs["year"].kind == "number" and (specs["year"].low, specs["year"].high) == (2019.5, 2020)
    assert specs["ok"].kind == "bool" and specs["path"].kind == "text"
    assert field_clause(specs["lang"], ["en"]) == {"lang": "en"}
    assert field_clause(specs["lang"], ["en", "de"]) == {"lang": {"$in": ["en", "de"]}}
    assert field_clause(specs["year"], (2000, None)) == {"year": {"$gte": 2000}}
    assert field_clause(specs["ok"], "no") == {"ok": False}
    assert field_clause(specs["path"], "p1, 7") == {"path": {"$in": ["p1", 7]}}
    assert build_where([None, {"a": 1}], {"b": 2}) == {"$and": [{"a": 1}, {"b": 2}]}
    assert build_where([None], None) is None


def test_find_collections(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text("{}")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "manifest.json").write_text("{}")
    (tmp_path / "c").mkdir()
    assert [p.name for p in find_collections(tmp_path)] == ["a", "b"]
    assert find_collections(tmp_path / "a") == [tmp_path / "a"]
    assert find_collections(tmp_path / "missing") == []
    assert safe_file_name("../../etc/passwd") == "passwd"
    assert safe_file_name("C:\\x\\my notes.txt") == "my notes.txt"


def test_a_password_guards_every_session(monkeypatch, collection):
    monkeypatch.setenv("SEMSEARCH_UI_PASSWORD", "s3cret")
    at = app(monkeypatch, collection, q="tea")
    assert not cards(at) and at.text_input(key="password") is not None
    at.text_input(key="password").input("wrong")
    at.button[0].click()
    at.run()
    assert not cards(at) and any("Wrong password" in e.value for e in at.error)
    at.text_input(key="password").input("s3cret")
    at.button[0].click()
    at.run()
    no_failure(at)
    assert cards(at) and "s3cret" not in html_of(at)


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sign_in(at: AppTest, password: str) -> AppTest:
    at.text_input(key="password").input(password)
    at.button[0].click()
    return at.run()


def test_wrong_passwords_pause_sign_in_for_every_session_for_a_while(monkeypatch, collection):
    from app.ui import lockout

    clock = Clock()
    monkeypatch.setattr(
        lockout,
        "THROTTLE",
        lockout.SignInThrottle(tries_before_pause=3, first_pause_s=30, longest_pause_s=120, clock=clock),
    )
    monkeypatch.setenv("SEMSEARCH_UI_PASSWORD", "s3cret")
    at = app(monkeypatch, collection, q="tea")
    for _ in range(2):
        assert [e.value for e in sign_in(at, "wrong").error] == ["Wrong password."]
    errors = [e.value for e in sign_in(at, "wrong").error]
    assert len(errors) == 1 and "Wrong password" in errors[0] and "paused for 30 s" in errors[0], errors
    other = app(monkeypatch, collection, q="tea")  # another browser session: the same pause
    assert any("paused for 30 s" in w.value for w in other.warning)
    errors = [e.value for e in sign_in(other, "s3cret").error]  # even the right password waits
    assert not cards(other) and len(errors) == 1 and "try again" in errors[0].lower(), errors
    clock.now += 30
    sign_in(other, "s3cret")
    no_failure(other)
    assert cards(other)


def test_the_pause_doubles_up_to_a_cap_and_a_right_password_clears_it():
    from app.ui.lockout import SignInThrottle

    clock = Clock()
    throttle = SignInThrottle(tries_before_pause=2, first_pause_s=10, longest_pause_s=35, clock=clock)
    assert throttle.wait_s() == 0 and throttle.failed() == 0
    pauses = []
    for _ in range(4):
        pauses.append(throttle.failed())
        assert throttle.wait_s() == pauses[-1]
        clock.now += pauses[-1]
    assert pauses == [10, 20, 35, 35] and throttle.wait_s() == 0
    assert throttle.failed() == 35
    clock.now += 30
    assert throttle.wait_s() == 5
    clock.now += 5
    throttle.succeeded()
    assert throttle.failed() == 0 and throttle.wait_s() == 0  # counting starts again


class RefusingCollection:
    """Stands in for a collection: ``upsert`` records each call and refuses the document ``bad``."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def upsert(self, documents):
        from retriever import WriteReport
        from retriever.errors import BadInputError

        ids = [doc.id for doc in documents]
        self.calls.append(ids)
        if "bad" in ids:
            raise BadInputError("document 'bad': refused")
        return WriteReport(added=ids)


def test_uploads_skip_a_refused_record_and_keep_batches_under_the_size_cap():
    from indexer.batches import MAX_BATCH_CHARS

    long_text = "word " * (MAX_BATCH_CHARS // 10 + 1)  # two of them pass the cap
    records = [
        {"id": "g1", "text": "fine"},
        {"id": "bad", "text": "refused"},
        {"id": "g2", "text": long_text},
        {"id": "g3", "text": long_text},
    ]
    content = "\n".join(json.dumps(r) for r in records).encode()
    col, messages = RefusingCollection(), []
    report = index_uploads(col, [("recs.jsonl", content)], progress=lambda f, text: messages.append(text))
    assert report.added == ["g1", "g2", "g3"]
    assert report.errors == [("recs.jsonl (bad)", "document 'bad': refused")]
    assert col.calls == [["g1", "bad", "g2"], ["g1"], ["bad"], ["g2"], ["g3"]]
    assert (
        "Indexing recs.jsonl: 3 of 4 document(s)" in messages and "Indexing recs.jsonl: 4 of 4 document(s)" in messages
    )


def test_without_a_password_the_page_answers_only_loopback_hosts_and_addresses(monkeypatch, collection):
    """DNS rebinding, and `streamlit run app/ui/page.py` listening on every interface: the script itself refuses."""
    from app.ui import guard

    monkeypatch.delenv("SEMSEARCH_UI_PASSWORD", raising=False)
    monkeypatch.setattr(guard, "listening_address", lambda: "127.0.0.1")
    monkeypatch.setattr(guard, "request_host", lambda: "evil.example:8501")
    at = app(monkeypatch, collection, q="tea")
    assert not cards(at) and any("evil.example" in e.value for e in at.error)
    monkeypatch.setattr(guard, "request_host", lambda: "localhost:8501")
    at = app(monkeypatch, collection, q="tea")
    no_failure(at)
    assert cards(at)
    monkeypatch.setattr(guard, "listening_address", lambda: None)  # `streamlit run`'s default: every interface
    at = app(monkeypatch, collection, q="tea")
    assert not cards(at) and any("SEMSEARCH_UI_PASSWORD" in e.value for e in at.error)
    monkeypatch.setenv("SEMSEARCH_UI_PASSWORD", "s3cret")  # a password: every session signs in first
    at = app(monkeypatch, collection, q="tea")
    assert not at.error and at.text_input(key="password") is not None


def test_no_ui_module_is_named_like_a_module_it_would_hide():
    """``streamlit run app/ui/page.py`` puts ``app/ui/`` first on ``sys.path``: a ``json.py`` there would hide ``json``."""
    import pkgutil
    import sys

    taken = set(sys.stdlib_module_names) | {
        m.name for m in pkgutil.iter_modules() if m.module_finder.path != str(UI.parent)
    }
    assert {path.stem for path in UI.parent.glob("*.py")} & taken <= {"__init__"}
