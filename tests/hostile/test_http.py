"""Generated HTTP requests against the real app: 2xx or a 4xx whose detail names the field; never 5xx."""

from __future__ import annotations

import json
import shutil
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hostile.conftest import case, examples, fingerprint
from tests.hostile.strategies import filters, host_headers, hostile_float, hostile_int, hostile_text, json_like, nested

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

KEY = "hostile-key"
FIELDS = (
    "body",
    "query",
    "vector",
    "exact",
    "where",
    "k",
    "mode",
    "texts",
    "truncate",
    "documents",
    "upsert",
    "doc_id",
    "path",
    "method",
    "id",
    "text",
    "title",
    "metadata",
    "API key",
    "limit",
)

any_value = st.one_of(json_like, hostile_text, hostile_int, hostile_float)
search_body = st.tuples(
    st.fixed_dictionaries(
        {},
        optional={
            "query": st.one_of(hostile_text, st.just("green tea")),
            "k": st.one_of(hostile_int, any_value),
            "mode": st.one_of(st.sampled_from(["dense", "bm25", "hybrid"]), any_value),
            "where": st.one_of(filters, nested(60)),
        },
    ),
    st.dictionaries(hostile_text, any_value, max_size=2),  # unknown fields
).map(lambda parts: parts[1] | parts[0])
embed_body = st.fixed_dictionaries(
    {"texts": st.one_of(st.lists(hostile_text, max_size=4), any_value)},
    optional={"truncate": st.one_of(st.booleans(), any_value)},
)
doc = st.fixed_dictionaries(
    {
        "id": st.one_of(hostile_text.map(lambda s: "h-" + s), hostile_text, any_value),
        "text": st.one_of(hostile_text, st.just("hostile text about tea"), any_value),
    },
    optional={
        "title": st.one_of(hostile_text, any_value),
        "metadata": st.one_of(json_like, nested(60)),
        "lang": any_value,
    },
)
documents_body = st.fixed_dictionaries(
    {"documents": st.one_of(st.lists(doc, max_size=3), any_value)}, optional={"upsert": any_value}
)


def _path_id(text: str) -> str:
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"), safe="")


requests = st.one_of(
    st.tuples(st.just("POST"), st.just("/search"), st.one_of(search_body, any_value)),
    st.tuples(st.just("POST"), st.just("/embed"), st.one_of(embed_body, any_value)),
    st.tuples(st.just("POST"), st.just("/documents"), st.one_of(documents_body, any_value)),
    st.tuples(
        st.sampled_from(["GET", "DELETE"]),
        st.one_of(hostile_text, st.sampled_from(["tea", "nope"])).map(lambda i: "/documents/" + _path_id(i)),
        st.none(),
    ),
    st.tuples(
        st.sampled_from(["GET", "POST", "PUT"]),
        st.sampled_from(["/stats", "/health", "/docs", "/redoc", "/openapi.json", "/nowhere", "/search"]),
        st.none(),
    ),
    st.tuples(
        st.just("POST"),
        st.sampled_from(["/search", "/documents", "/embed"]),
        st.one_of(
            st.binary(max_size=64),
            st.integers(1, 20000).map(lambda n: b"[" * n + b"]" * n),
            st.integers(1, 6000).map(lambda n: b'{"query": "x", "k": ' + b"9" * n + b"}"),
        ),
    ),
)
auth = st.sampled_from(
    [{"Authorization": f"Bearer {KEY}"}] * 6
    + [{"X-API-Key": KEY}, {}, {"X-API-Key": "no"}, {"Authorization": "Basic x"}]
)


@pytest.fixture(scope="module")
def client(hostile_collection, tmp_path_factory):
    from app.server import create_app

    path = tmp_path_factory.mktemp("http") / "col"
    shutil.copytree(hostile_collection, path)
    # A generous deadline: a busy test machine must not turn a slow answer into a 503 here.
    # The deadline itself is tested on its own, below.
    app = create_app(path, api_key=KEY, warm_up=False, deadline_s=60)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _send(client, method, path, body, headers):
    if isinstance(body, bytes):
        content = body
    elif body is None:
        content = None
    else:
        content = json.dumps(body, ensure_ascii=True).encode()  # lone surrogates travel as \ud800 escapes
    return client.request(method, path, content=content, headers={"Content-Type": "application/json"} | headers)


@settings(max_examples=examples(200))
@given(request=requests, headers=auth)
def test_a_request_gets_2xx_or_a_4xx_naming_the_field(client, request, headers):
    method, path, body = request
    col = client.app.state.collection
    with case("http"):
        write = method in ("POST", "DELETE") and path.startswith("/documents")
        before = fingerprint(col) if write else None
        response = _send(client, method, path, body, headers)
        assert response.status_code < 500, (request, response.text)
        if response.status_code >= 400:
            detail = response.json()["detail"]
            unknown = [f"{key}:" for key in body] if isinstance(body, dict) else []  # an extra key names itself
            assert isinstance(detail, str) and any(name in detail for name in (*FIELDS, *unknown)), (request, detail)
            if write:
                assert fingerprint(col) == before, (request, response.text)


def test_docs_need_the_key_and_show_no_absolute_path(client, hostile_collection):
    for route in ("/docs", "/redoc", "/openapi.json"):
        assert client.get(route).status_code == 401
    schema = client.get("/openapi.json", headers={"X-API-Key": KEY})
    assert schema.status_code == 200 and str(hostile_collection.parent) not in schema.text


def test_every_request_past_its_deadline_is_503_and_writes_nothing(hostile_collection, tmp_path):
    from app.server import create_app

    path = tmp_path / "col"
    shutil.copytree(hostile_collection, path)
    with TestClient(
        create_app(path, deadline_s=0, warm_up=False), base_url="http://127.0.0.1", raise_server_exceptions=False
    ) as client:
        col = client.app.state.collection
        before = fingerprint(col)
        for method, route, body in [
            ("POST", "/search", {"query": "tea"}),
            ("POST", "/embed", {"texts": ["a"]}),
            ("POST", "/documents", {"documents": [{"id": "late", "text": "late text"}]}),
            ("DELETE", "/documents/tea", None),
            ("GET", "/stats", None),
        ]:
            response = client.request(method, route, json=body)
            assert response.status_code == 503 and "deadline" in response.json()["detail"], route
        assert fingerprint(col) == before
        assert client.get("/health").status_code == 200


@pytest.fixture(scope="module")
def open_client(hostile_collection, tmp_path_factory):
    """The API without a key, as ``semsearch serve`` on loopback runs it."""
    from app.server import create_app

    path = tmp_path_factory.mktemp("open") / "col"
    shutil.copytree(hostile_collection, path)
    with TestClient(
        create_app(path, warm_up=False, deadline_s=60), base_url="http://127.0.0.1", raise_server_exceptions=False
    ) as client:
        yield client


@settings(max_examples=examples(100))
@given(
    host=host_headers(),
    route=st.sampled_from([("GET", "/stats"), ("GET", "/documents/tea"), ("DELETE", "/documents/nope")]),
)
def test_without_a_key_only_loopback_host_headers_are_answered(open_client, host, route):
    header, loopback = host
    with case("host header"):
        try:
            response = open_client.request(route[0], route[1], headers={"Host": header})
        except UnicodeEncodeError:  # the client cannot send it: nor can a browser
            return
        assert response.status_code < 500, (header, response.text)
        if loopback is True:
            assert response.status_code != 403, header
        elif loopback is False:
            assert response.status_code == 403 and "host" in response.json()["detail"], header
