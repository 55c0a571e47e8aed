"""End to end: ``semsearch ui`` in a real process, a search link opened in headless Chromium.

Chromium is Debian's ``chromium`` package; the fixture installs it with
apt-get when it is missing and we are root, else the test is skipped with the
reason. The browser is driven over the DevTools protocol (a websocket), so the
test waits for Streamlit's client-side rendering instead of guessing a delay.
The screenshot is kept in ``runs/ui-e2e/screenshot.png``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.processes import stop

pytest.importorskip("streamlit")
ws_client = pytest.importorskip("websockets.sync.client")

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "runs" / "ui-e2e" / "screenshot.png"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,1500",
    "--hide-scrollbars",
    "--mute-audio",
]
TITLE = "Migratory patterns of Arctic terns"
EVIDENCE = "Arctic terns fly from pole to pole every year, the longest migration of any animal."
DOCS = [
    {
        "id": "terns",
        "title": TITLE,
        "text": "They nest on rocky coasts. " + EVIDENCE + " Chicks fledge in a month.",
        "metadata": {"topic": "birds", "year": 2022},
    },  # one chunk of the tiny model's window, whichever ranks it
    {
        "id": "tea",
        "title": "Green tea processing",
        "text": "Green tea is steamed right after picking. " * 5,
        "metadata": {"topic": "food", "year": 2021},
    },
    {
        "id": "rivers",
        "title": "How rivers form deltas",
        "text": "Rivers slow down at the sea and drop sediment.",
        "metadata": {"topic": "geography", "year": 2019},
    },
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found:
        return found
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("needs Debian's chromium package (apt-get install chromium); not root, so not installed here")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.skip(f"could not install chromium ({' '.join(command)}): {done.stderr.strip()[-300:]}")
    found = shutil.which("chromium")
    if not found:
        pytest.skip("apt-get installed chromium, but no chromium command is on PATH")
    return found


@pytest.fixture()
def ui_server(tmp_path, tiny_embedder):
    from retriever import Collection

    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.upsert(DOCS)
    with running_ui(tmp_path / "col", tmp_path) as base:
        yield base


@contextlib.contextmanager
def running_ui(collection: Path, tmp_path: Path):
    """``semsearch ui -c collection`` on a free loopback port until the block ends; yields its base URL."""
    port = free_port()
    log = tmp_path / "ui.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "ui", "-c", str(collection), "--port", str(port)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"semsearch ui exited with {proc.returncode}: {log.read_text()}")
            try:
                with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"semsearch ui did not start within 60 s: {log.read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        stop(proc)


class Browser:
    """Headless Chromium and one page, spoken to over the DevTools protocol."""

    def __init__(self, binary: str, profile: Path):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={self.port}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        targets = None
        deadline = time.monotonic() + 30
        while targets is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=2) as response:
                    targets = json.load(response)
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    pytest.fail("chromium did not open its DevTools port")
                time.sleep(0.2)
        page = next(t for t in targets if t.get("type") == "page")
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(
            ws_client.connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        )
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def close(self) -> None:
        if getattr(self, "stack", None) is not None:
            self.stack.close()
        stop(self.proc, timeout=10)


def test_search_link_renders_results_in_chromium(chromium, ui_server, tmp_path):
    url = f"{ui_server}/?q={urllib.parse.quote(TITLE)}"
    browser = Browser(chromium, tmp_path / "profile")
    try:
        browser.call("Page.enable")
        browser.call("Page.navigate", url=url)
        titles: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            titles = browser.evaluate("[...document.querySelectorAll('.ss-title')].map(e => e.innerText)") or []
            busy = browser.evaluate(
                "!!document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton]')"
            )
            if TITLE in titles and not busy:
                break
            time.sleep(0.25)
        time.sleep(0.5)  # let fonts and the last paint settle for the screenshot
        shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
        page_title = browser.evaluate("document.title")
        query = browser.evaluate("(document.querySelector('input[aria-label=Search]') || {}).value")
        text = browser.evaluate("document.body.innerText") or ""
        marked = browser.evaluate(
            "[...document.querySelectorAll('.ss-passage mark.ss-evidence')].map(e => e.innerText)"
        )
        terms = browser.evaluate(
            "[...document.querySelectorAll('.ss-passage mark.ss-evidence b.ss-term')].map(e => e.innerText)"
        )
        whole = browser.evaluate("document.querySelectorAll('.ss-passage mark:not(.ss-evidence)').length")
    finally:
        browser.close()
    (tmp_path / "screenshot.png").write_bytes(shot)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.write_bytes(shot)
    print(f"screenshot: {SCREENSHOT}")
    assert TITLE in titles, f"rendered titles: {titles}; page text: {text[:500]}"
    assert page_title == "semsearch" and query == TITLE
    assert "Traceback" not in text and "3 results" in text
    assert len(shot) > 10_000
    # the first card highlights the sentence that matched and the query's words in it, not its whole passage
    assert marked and marked[0] == EVIDENCE, marked
    assert terms[:2] == ["Arctic", "terns"], terms
    assert whole == 0


def wait_for(browser: Browser, expression: str, seconds: float = 60):
    """The first truthy value of ``expression`` in the page, polled until ``seconds`` pass (then ``None``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = browser.evaluate(expression)
        if value:
            return value
        time.sleep(0.25)
    return None


def test_a_pdf_hit_shows_its_page_and_opens_the_pdf_there_in_a_new_tab(chromium, tmp_path, tiny_embedder):
    from retriever import Collection
    from tests.app.test_ui_locations import PAGES, located, two_page_pdf

    pdf = two_page_pdf(tmp_path / "report.pdf")
    text, columns = located([({"page": 1}, PAGES[0]), ({"page": 2}, PAGES[1])])
    with Collection.create(tmp_path / "col", tiny_embedder) as col:
        col.upsert(
            [
                {
                    "id": str(pdf),
                    "title": "Report",
                    "text": text,
                    "metadata": {"source": str(pdf), "format": "pdf", "locations": columns},
                }
            ]
        )
    with running_ui(tmp_path / "col", tmp_path) as base:
        browser = Browser(chromium, tmp_path / "profile")
        try:
            browser.call("Page.enable")
            browser.call("Page.navigate", url=f"{base}/?q={urllib.parse.quote(PAGES[1])}&mode=bm25&k=1")
            places = wait_for(browser, "[...document.querySelectorAll('.ss-place')].map(e => e.innerText)")
            pressed = wait_for(
                browser,
                "(() => { const b = [...document.querySelectorAll('button')]"
                ".find(e => e.innerText.includes('Open report.pdf at page 2'));"
                " if (b) b.click(); return !!b; })()",
            )
            link = (
                "(() => { const f = document.querySelector('iframe[title=\"st.iframe\"]');"
                " return f && f.contentDocument && f.contentDocument.querySelector('#open[href]'); })()"
            )
            href = wait_for(browser, f"({link} || {{}}).href")
            size = browser.call(
                "Runtime.evaluate",
                awaitPromise=True,
                returnByValue=True,
                expression=(f"fetch({link}.href).then(r => r.arrayBuffer()).then(b => b.byteLength)"),
            )["result"].get("value")
            x, y = browser.evaluate(
                f"(() => {{ const f = document.querySelector('iframe[title=\"st.iframe\"]')"
                f".getBoundingClientRect(), a = {link}.getBoundingClientRect();"
                " return [f.left + a.left + a.width / 2, f.top + a.top + a.height / 2]; })()"
            )
            for kind in ("mousePressed", "mouseReleased"):  # a person's click: a script's would be a blocked popup
                browser.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
            deadline, tabs = time.monotonic() + 30, []
            while time.monotonic() < deadline and href not in tabs:
                with urllib.request.urlopen(f"http://127.0.0.1:{browser.port}/json/list", timeout=5) as response:
                    tabs = [target["url"] for target in json.load(response)]
                time.sleep(0.25)
        finally:
            browser.close()
    assert places == ["page 2"] and pressed
    assert href.startswith(f"blob:{base}/") and href.endswith("#page=2") and size == pdf.stat().st_size
    assert href in tabs, tabs  # the new tab opened the PDF's bytes at page 2
