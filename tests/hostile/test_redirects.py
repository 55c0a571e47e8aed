"""Generated redirecting servers against ``RemoteCollection``: the key never reaches another origin.

A server on loopback (``home``) answers a client's request with a generated
redirect: a status of 301, 302, 303, 307 or 308 and a ``Location`` pointing at
another port (a second server, ``elsewhere``), another scheme, another name of
the same server, a relative or protocol-relative path, a URL with a user and
password or an ``@`` trick, or garbage. Paths under ``/v2`` answer as a
semsearch server would. Every case must end in a semsearch error of one line
that is not "unreachable" (nothing unreachable is ever asked), or in the
right answer from ``home``; the other server is never asked, and every
request carrying the key is one to ``home`` under its own name.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retriever.errors import SemsearchError, ServerUnreachableError
from retriever.remote import RemoteCollection
from tests.hostile.conftest import case, examples
from tests.processes import answer_json

KEY = "redirect-test-key"
HIT = {
    "id": "tea",
    "score": 0.5,
    "text": "Green tea.",
    "start": 0,
    "end": 10,
    "title": "Tea",
    "metadata": {},
    "evidence": [],
}
DOCUMENT = {"id": "tea", "text": "Green tea.", "title": "Tea", "metadata": {}}


def locations() -> st.SearchStrategy:
    """``Location`` values, as templates of ``{home}`` (the port redirecting), ``{other}`` (another server's port)
    and ``{path}`` (the request's path); None: no ``Location`` at all."""
    crafted = st.sampled_from(
        [
            "http://127.0.0.1:{other}{path}",
            "http://127.0.0.1:{other}/v2{path}",
            "//127.0.0.1:{other}/v2{path}",
            "https://127.0.0.1:{home}/v2{path}",
            "https://127.0.0.1:{other}/v2{path}",
            "ftp://127.0.0.1:{home}/",
            "http://localhost:{home}/v2{path}",
            "//localhost:{home}/v2{path}",
            "http://[::1]:{home}/v2{path}",
            "http://127.1:{home}/v2{path}",
            "http://2130706433:{home}/v2{path}",
            "http://127.0.0.2:{home}/v2{path}",
            "http://127.0.0.1:{home}@127.0.0.1:{other}/v2{path}",
            "http://user:pw@127.0.0.1:{home}/v2{path}",
            "http://127.0.0.1:{home}\\@127.0.0.1:{other}/v2{path}",
            "http://127.0.0.1:{home}#@127.0.0.1:{other}/",
            "http://127.0.0.1:{other}?@127.0.0.1:{home}/v2{path}",
            "http:\\\\127.0.0.1:{other}\\v2{path}",
            " http://127.0.0.1:{other}/v2{path}",
            "\thttp://127.0.0.1:{other}/v2{path}",
            "http:/127.0.0.1:{other}/v2",
            "/v2{path}",
            "v2/x",
            "../v2{path}",
            "//127.0.0.1:{home}/v2{path}",
            "HTTP://127.0.0.1:{home}/v2{path}",
            "http://127.0.0.1:{home}/v2{path}",
            "http://127.0.0.1:{home}",
            "{path}",
            "?again=1",
            "",
            "#frag",
            "http://[::1",
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:x/",
            "javascript:alert(1)",
            "data:,x",
            "file:///etc/passwd",
            "http://%31%32%37.0.0.1:{other}/v2{path}",
            "http://evil.example/v2{path}",
            "//evil.example",
            "///evil.example/v2",
            "http://127.0.0.1:{home}.evil.example/v2{path}",
        ]
    )
    garbage = st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=40).map(
        lambda text: text.replace("{", "(").replace("}", ")")
    )
    return st.one_of(crafted, garbage, st.none())


class Origin(http.server.BaseHTTPRequestHandler):
    """Records ``(method, path, Host, Authorization)`` in ``seen``; answers paths under ``/v2`` as a semsearch
    server would, and any other with ``redirect`` (``(status, Location or None)``)."""

    seen: list
    redirect: tuple[int, str | None] = (302, None)

    def do_GET(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, self.headers.get("Host"), self.headers.get("Authorization")))
        if self.path.startswith("/v2/"):
            status, location = 200, None
            body = json.dumps({"hits": [HIT]} if "/search" in self.path else DOCUMENT).encode()
        else:
            (status, location), body = type(self).redirect, b"{}"
        answer_json(self, status, body, {} if location is None else {"Location": location})

    do_POST = do_DELETE = do_GET

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(host: str) -> Iterator[type[Origin]]:
    handler: Any = type("OriginHandler", (Origin,), {"seen": []})
    server = http.server.ThreadingHTTPServer((host, 0), handler)
    handler.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[type[Origin], list[type[Origin]]]]:
    """``(home, [servers that are other origins])``: another port of 127.0.0.1, and 127.0.0.2 on home's port."""
    with serving("127.0.0.1") as home, serving("127.0.0.1") as elsewhere, contextlib.ExitStack() as more:
        others = [elsewhere]
        with contextlib.suppress(OSError):  # the same port on another loopback address, when it is free
            twin: Any = type("TwinHandler", (Origin,), {"seen": []})
            server = http.server.ThreadingHTTPServer(("127.0.0.2", home.port), twin)
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            more.callback(server.server_close)
            more.callback(server.shutdown)
            others.append(twin)
        yield home, others


@settings(max_examples=examples(100))
@given(
    status=st.sampled_from([301, 302, 303, 307, 308]),
    location=locations(),
    verb=st.sampled_from(["get", "search", "delete"]),
)
def test_a_redirect_ends_in_a_clear_error_or_the_right_answer_and_the_key_stays_home(servers, status, location, verb):
    home, others = servers
    for server in (home, *others):
        server.seen.clear()
    target = (
        location
        if location is None
        else location.format(
            home=home.port, other=others[0].port, path="/search" if verb == "search" else "/documents/tea"
        )
    )
    home.redirect = (status, target)
    remote = RemoteCollection(f"http://127.0.0.1:{home.port}", api_key=KEY, timeout=10)
    with case("redirect"):
        try:
            answer = {
                "get": lambda: remote.get("tea"),
                "search": lambda: remote.search("tea", k=1),
                "delete": lambda: remote.delete(["tea"]),
            }[verb]()
        except SemsearchError as exc:
            assert not isinstance(exc, ServerUnreachableError), (target, str(exc))  # it asked somewhere else
            assert str(exc) and "\n" not in str(exc), (target, str(exc))
        else:
            assert home.seen[-1][1].startswith("/v2/"), (target, home.seen)  # answered at home, after the redirect
            if verb == "get":
                assert answer.text == DOCUMENT["text"], target
            elif verb == "search":
                assert [hit.id for hit in answer] == ["tea"], target
            else:
                assert answer.deleted == ["tea"], target
        assert all(not other.seen for other in others), (target, [other.seen for other in others])
        assert all(host == f"127.0.0.1:{home.port}" for _, _, host, _ in home.seen), (target, home.seen)
        assert all(key == f"Bearer {KEY}" for _, _, _, key in home.seen), (target, home.seen)
