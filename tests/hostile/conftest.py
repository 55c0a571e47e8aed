"""The hostile-input suite: Hypothesis profiles, shared fixtures and the case counts.

``make test`` runs the bounded profile (a few hundred cases, under a minute and
a half on a quiet machine); ``make fuzz`` sets ``HYPOTHESIS_PROFILE=fuzz`` and
runs each property ``FUZZ_SCALE`` times as many cases. Either way the summary
ends with the number of hostile inputs tried, by entry point, and the slowest
answer (reported, not asserted: timings on a shared machine are not facts).
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "bounded")
FUZZ_SCALE = 20
_common = dict(
    deadline=None,
    database=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
settings.register_profile("bounded", max_examples=100, **_common)
settings.register_profile("fuzz", max_examples=100 * FUZZ_SCALE, **_common)
settings.load_profile(PROFILE if PROFILE in ("bounded", "fuzz") else "bounded")

CASES: Counter = Counter()
SLOW_S = 5.0
TIMES = {"slowest": 0.0, "over": 0}

DOCS = [
    {
        "id": "tea",
        "title": "Green tea",
        "text": "Green tea is steamed right after picking.",
        "metadata": {"lang": "en", "year": 2021, "tags": ["drink", "leaf"], "reviewed": True, "a": {"b": 1}},
    },
    {
        "id": "coffee",
        "title": "Coffee",
        "text": "Coffee beans are roasted at high temperature.",
        "metadata": {"lang": "en", "year": 2019, "tags": ["drink"], "reviewed": False},
    },
    {
        "id": "kaffee",
        "title": "Kaffee",
        "text": "Kaffee wird geröstet, heiß und stark.",
        "metadata": {"lang": "de", "year": 2020, "größe": 3},
    },
    {
        "id": "rivers",
        "title": "Rivers",
        "text": "Rivers flow into the sea through deltas.",
        "metadata": {"lang": "en", "year": 2018, "score": 0.5},
    },
    {
        "id": "/notes/mountains.md",
        "title": "Mountains",
        "text": "Mountains rise above the clouds; snow in winter.",
        "metadata": {"source": "/notes/mountains.md"},
    },
]


def examples(n: int) -> int:
    """``n`` cases in the bounded profile, ``FUZZ_SCALE`` times as many under ``make fuzz``."""
    return n * FUZZ_SCALE if PROFILE == "fuzz" else n


@contextmanager
def case(kind: str):
    """Count one generated case of ``kind`` and note how long it took."""
    started = time.perf_counter()
    try:
        yield
    finally:
        took = time.perf_counter() - started
        CASES[kind] += 1
        TIMES["slowest"] = max(TIMES["slowest"], took)
        TIMES["over"] += took > SLOW_S


def fingerprint(col) -> tuple:
    """What a refused write must leave as it was: count, generation and the top hits of a fixed query."""
    hits = [(h.id, round(h.score, 5)) for h in col.search("green tea rivers coffee", k=5)]
    return len(col), col.catalog.state().generation, tuple(hits)


@pytest.fixture(scope="session")
def hostile_collection(tmp_path_factory, tiny_model_dir) -> Path:
    """A tiny-model collection holding ``DOCS`` (a template: tests copy it before writing)."""
    from retriever import Collection

    path = tmp_path_factory.mktemp("hostile") / "col"
    with Collection.create(path, tiny_model_dir) as col:
        col.upsert(DOCS)
    return path


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not CASES:
        return
    total = sum(CASES.values())
    parts = ", ".join(f"{kind} {n:,}" for kind, n in sorted(CASES.items()))
    terminalreporter.write_sep("-", f"hostile inputs ({PROFILE} profile)")
    terminalreporter.write_line(f"{total:,} generated hostile inputs: {parts}")
    terminalreporter.write_line(
        f"slowest case {TIMES['slowest']:.2f} s; {TIMES['over']} case(s) over {SLOW_S:g} s "
        "(wall time on this machine, which may be shared)"
    )
    terminalreporter.write_line("every case asserted: no 5xx, no bare exception, refused writes change nothing")


@pytest.fixture(scope="module")
def col(hostile_collection, tmp_path_factory):
    """This module's own copy of the hostile collection, open (writes stay in the module)."""
    from retriever import Collection

    path = tmp_path_factory.mktemp("copy") / "col"
    shutil.copytree(hostile_collection, path)
    with Collection.open(path) as opened:
        yield opened
