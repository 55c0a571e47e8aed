"""The judgment routes of the HTTP API (``app.server.judgment_routes``): stored under the calling key's name,
behind its scopes, and measured as ``Collection.evaluate`` measures."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from app.server import create_app  # noqa: E402
from app.server.access import ApiKey, KeyRing, digest  # noqa: E402
from app.server.multi import create_multi_app  # noqa: E402
from app.server.schemas import MAX_JUDGMENTS  # noqa: E402
from retriever import Collection  # noqa: E402
from tests.app.test_server import DOCS  # noqa: E402
from tests.hostile.strategies import hostile_float, hostile_int, hostile_text, json_like  # noqa: E402

TOKENS = {"reader": "judge-read-token", "writer": "judge-write-token"}
RING = KeyRing(
    [
        ApiKey("reader", digest(TOKENS["reader"]), {"docs": "read"}),
        ApiKey("writer", digest(TOKENS["writer"]), {"docs": "write", "other": "read"}),
    ]
)
JUDGED = [
    {"query": "green tea picking", "id": "tea", "grade": 2},
    {"query": "green tea picking", "id": "coffee", "grade": 0},
    {"query": "roasted coffee beans", "id": "coffee", "grade": 1},
    {"query": "roasted coffee beans", "id": "kaffee", "grade": 1},
    {"query": "where rivers meet the sea", "id": "/notes/rivers and seas.md", "grade": 3},
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tiny_model_dir) -> Path:
    """Collections ``docs`` (``DOCS``) and ``other`` (one document)."""
    root = tmp_path_factory.mktemp("judged")
    with Collection.create(root / "docs", tiny_model_dir) as col:
        col.upsert(DOCS)
    with Collection.create(root / "other", tiny_model_dir) as col:
        col.upsert([{"id": "tea", "text": "A different tea document."}])
    return root


@pytest.fixture(scope="module")
def client(folder):
    app = create_multi_app({"docs": folder / "docs", "other": folder / "other"}, keys=RING, warm_up=False)
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture()
def docs(folder, client):
    """The ``docs`` collection, opened here beside the server, with no judgments (nor has ``other``)."""
    with Collection.open(folder / "other") as other:
        other.remove_judgments(everything=True)
    with Collection.open(folder / "docs") as col:
        col.remove_judgments(everything=True)
        yield col


def call(client, method, path, who, body=None, params=None):
    headers = {"Authorization": f"Bearer {TOKENS[who]}"}
    response = client.request(
        method, path, headers=headers, params=params, **({"json": body} if body is not None else {})
    )
    return response.status_code, response.json()


def test_a_write_key_stores_judgments_under_its_name_and_unknown_ids_are_reported(client, docs):
    rows = [*JUDGED, {"query": "green tea picking", "id": "no-such-doc", "grade": 1}]
    status, report = call(client, "POST", "/collections/docs/judgments", "writer", {"judgments": rows})
    assert status == 200
    assert report == {
        "stored": len(JUDGED),
        "replaced": 0,
        "unknown": [{"line": len(JUDGED), "id": "no-such-doc"}],
        "queries": 3,
        "dry_run": False,
    }
    stored = docs.judgments()
    assert len(stored) == len(JUDGED) and {j.who for j in stored} == {"writer"}
    assert {(j.query, j.doc_id, j.grade) for j in stored} == {(r["query"], r["id"], r["grade"]) for r in JUDGED}
    status, listed = call(client, "GET", "/collections/docs/judgments", "reader")
    assert status == 200 and listed == {"judgments": [j.to_dict() for j in stored]}

    status, report = call(
        client, "POST", "/collections/docs/judgments", "writer", {"judgments": [JUDGED[0] | {"grade": 3}]}
    )
    assert status == 200 and (report["stored"], report["replaced"]) == (0, 1)
    assert [j.grade for j in docs.judgments("green tea picking", doc_id="tea")] == [3]
    assert call(client, "GET", "/collections/other/judgments", "writer") == (200, {"judgments": []})


def test_a_read_key_may_list_and_measure_but_not_write_or_remove(client, docs):
    docs.import_judgments(JUDGED, who="seed")
    for method, params, body in (
        ("POST", None, {"judgments": JUDGED[:1]}),
        ("DELETE", {"query": "green tea picking"}, None),
    ):
        status, answer = call(client, method, "/collections/docs/judgments", "reader", body, params)
        assert status == 403 and answer["detail"].endswith("(needs docs:write)"), method
    status, answer = call(client, "POST", "/collections/other/judgments", "writer", {"judgments": JUDGED[:1]})
    assert status == 403 and "needs other:write" in answer["detail"]
    assert docs.judgment_count() == (len(JUDGED), 3)
    assert call(client, "POST", "/collections/docs/eval", "reader", {})[0] == 200


def test_listing_and_removing_select_by_query_id_or_both(client, docs):
    docs.import_judgments(JUDGED, who="seed")
    path = "/collections/docs/judgments"
    status, listed = call(client, "GET", path, "reader", params={"id": "coffee"})
    assert status == 200 and sorted(j["query"] for j in listed["judgments"]) == [
        "green tea picking",
        "roasted coffee beans",
    ]
    status, listed = call(client, "GET", path, "reader", params={"query": "roasted coffee beans", "id": "kaffee"})
    assert [(j["id"], j["grade"], j["who"]) for j in listed["judgments"]] == [("kaffee", 1, "seed")]

    assert call(client, "DELETE", path, "writer", params={"query": "green tea picking", "id": "tea"}) == (
        200,
        {"removed": 1},
    )
    assert call(client, "DELETE", path, "writer", params={"id": "coffee"}) == (200, {"removed": 2})
    assert call(client, "DELETE", path, "writer", params={"query": "no such query"}) == (200, {"removed": 0})
    status, answer = call(client, "DELETE", path, "writer")
    assert status == 422 and answer["detail"].startswith("query, id:") and docs.judgment_count()[0] == 2
    assert call(client, "DELETE", path, "writer", params={"all": "true"}) == (200, {"removed": 2})
    assert docs.judgment_count() == (0, 0)


def test_a_dry_run_reports_and_stores_nothing(client, docs):
    status, report = call(
        client, "POST", "/collections/docs/judgments", "writer", {"judgments": JUDGED, "dry_run": True}
    )
    assert status == 200 and report["dry_run"] and report["stored"] == len(JUDGED)
    assert docs.judgment_count() == (0, 0)


@pytest.mark.parametrize("mode", Collection.SEARCH_MODES)
def test_eval_answers_what_collection_evaluate_measures(client, docs, mode):
    docs.import_judgments(JUDGED, who="seed")
    status, answer = call(client, "POST", "/collections/docs/eval", "reader", {"mode": mode, "per_query": True})
    assert status == 200
    want = docs.evaluate(mode=mode, per_query=True).to_dict()
    assert answer["settings"].pop("model") == "model"  # the model folder's name, not its path
    want["settings"].pop("model")
    assert answer == want
    assert answer["queries"] == 3 and set(answer["metrics"]) == {"ndcg@10", "mrr@10", "recall@100", "map@100"}


def test_eval_on_judgments_sent_measures_them_and_stores_none(client, docs):
    settings = {"mode": "hybrid", "fusion": "rrf", "alpha": 0.3, "feedback": False}
    sent = JUDGED[2:4]
    status, answer = call(client, "POST", "/collections/docs/eval", "reader", {"judgments": sent, **settings})
    assert status == 200 and answer["queries"] == 1 and answer["judgments"] == 2 and answer["per_query"] is None
    assert answer["metrics"] == docs.evaluate(sent, **settings).metrics
    assert {name: answer["settings"][name] for name in settings} == settings
    assert docs.judgment_count() == (0, 0)


@pytest.mark.parametrize(
    "body, field",
    [
        ({"judgments": [{"query": "tea", "id": "tea", "grade": 4}]}, "judgments[0].grade"),
        ({"judgments": [{"query": "tea", "id": "tea", "grade": True}]}, "judgments[0].grade"),
        ({"judgments": [{"query": "tea", "id": "tea", "grade": "1"}]}, "judgments[0].grade"),
        ({"judgments": [{"query": "tea", "id": "tea"}, {"query": "  ", "id": "tea"}]}, "judgments[1].query"),
        ({"judgments": [{"query": "tea"}]}, "judgments[0].id"),
        ({"judgments": [{"query": "tea", "id": "tea", "who": "someone else"}]}, "judgments[0].who"),
        ({"judgments": [{"query": "q" * 2001, "id": "tea"}]}, "judgments[0].query"),
        ({"judgments": []}, "judgments"),
        ({"judgments": [{"query": "tea", "id": "tea"}] * (MAX_JUDGMENTS + 1)}, "judgments"),
    ],
)
def test_a_bad_judgment_is_a_422_naming_it_and_nothing_is_stored(client, docs, body, field):
    status, answer = call(client, "POST", "/collections/docs/judgments", "writer", body)
    assert status == 422 and answer["errors"][0]["field"] == field, answer
    if len(body["judgments"]) > MAX_JUDGMENTS:
        assert f"at most {MAX_JUDGMENTS:,} judgments a request" in answer["detail"]
    assert docs.judgment_count() == (0, 0)


@pytest.mark.parametrize(
    "body, problem",
    [
        ({"mode": "fuzzy"}, "mode:"),
        ({"fusion": "max"}, "fusion:"),
        ({"alpha": 1.5}, "alpha:"),
        ({"k": 5}, "k: Extra inputs"),
        ({"judgments": [{"query": "tea", "id": "tea", "grade": 9}]}, "judgments[0].grade:"),
        ({"judgments": [{"query": "tea", "id": "tea"}] * (MAX_JUDGMENTS + 1)}, "judgments:"),
    ],
)
def test_a_bad_eval_request_is_a_422_naming_the_field(client, docs, body, problem):
    status, answer = call(client, "POST", "/collections/docs/eval", "reader", body)
    assert status == 422 and answer["detail"].startswith(problem), answer


def test_eval_without_judgments_is_a_400_saying_so(client, docs):
    status, answer = call(client, "POST", "/collections/docs/eval", "reader", {})
    assert status == 400 and "no judgments" in answer["detail"]
    docs.judge("green tea picking", "coffee", 0)
    status, answer = call(client, "POST", "/collections/docs/eval", "reader", {})
    assert status == 400 and "grade 1 or more" in answer["detail"]


def test_a_blank_selection_is_a_400_naming_it(client, docs):
    status, answer = call(client, "GET", "/collections/docs/judgments", "reader", params={"query": " "})
    assert status == 400 and "query" in answer["detail"]
    status, answer = call(client, "DELETE", "/collections/docs/judgments", "writer", params={"id": ""})
    assert status == 400 and "id" in answer["detail"]


def test_one_collection_at_the_root_without_keys_judges_as_anonymous(tmp_path, tiny_model_dir):
    with Collection.create(tmp_path / "col", tiny_model_dir) as col:
        col.upsert(DOCS)
    with TestClient(create_app(tmp_path / "col", warm_up=False), base_url="http://127.0.0.1") as client:
        response = client.post("/judgments", json={"judgments": [{"query": "green tea", "id": "tea"}]})
        assert response.status_code == 200 and response.json()["stored"] == 1
        listed = client.get("/judgments").json()["judgments"]
        assert [(j["query"], j["id"], j["grade"], j["who"]) for j in listed] == [("green tea", "tea", 1, "anonymous")]
        assert client.post("/eval", json={}).json()["queries"] == 1
        assert {"/judgments", "/eval"} <= set(client.get("/openapi.json").json()["paths"])


any_value = st.one_of(json_like, hostile_text, hostile_int, hostile_float)
judgment_row = st.fixed_dictionaries(
    {},
    optional={
        "query": st.one_of(hostile_text, st.just("green tea")),
        "id": st.one_of(hostile_text, st.sampled_from(["tea", "coffee"])),
        "grade": st.one_of(st.integers(-2, 5), any_value),
        "who": any_value,
    },
)
judgment_rows = st.one_of(st.lists(judgment_row, max_size=4), any_value)
hostile_requests = st.one_of(
    st.tuples(
        st.just("POST"),
        st.just(""),
        st.fixed_dictionaries({"judgments": judgment_rows}, optional={"dry_run": any_value}),
    ),
    st.tuples(
        st.just("POST"),
        st.just("eval"),
        st.fixed_dictionaries(
            {},
            optional={
                "judgments": judgment_rows,
                "mode": st.one_of(st.sampled_from(Collection.SEARCH_MODES), any_value),
                "fusion": st.one_of(st.sampled_from(["rrf", "convex"]), any_value),
                "alpha": any_value,
                "feedback": any_value,
                "per_query": any_value,
            },
        ),
    ),
    st.tuples(
        st.sampled_from(["GET", "DELETE"]),
        st.dictionaries(st.sampled_from(["query", "id", "all"]), hostile_text, max_size=3),
        st.none(),
    ),
)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=hostile_requests)
def test_hostile_requests_get_2xx_or_a_4xx_naming_the_cause(client, docs, request):
    method, where, body = request
    if isinstance(where, dict):  # GET or DELETE /judgments?...
        query = "&".join(
            f"{name}={urllib.parse.quote(value.encode('utf-8', 'surrogatepass'), safe='')}"
            for name, value in where.items()
        )
        path = "/collections/docs/judgments" + ("?" + query if query else "")
    else:
        path = "/collections/docs/" + (where or "judgments")
    content = None if body is None else json.dumps(body, ensure_ascii=True).encode()
    headers = {"Authorization": f"Bearer {TOKENS['writer']}", "Content-Type": "application/json"}
    response = client.request(method, path, content=content, headers=headers)
    assert response.status_code < 500, (request, response.text)
    if response.status_code >= 400:
        assert isinstance(response.json()["detail"], str) and response.json()["detail"], (request, response.text)
