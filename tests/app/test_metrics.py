"""``GET /metrics`` of a real ``semsearch serve``, read with prometheus-client's own parser."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.server.deadlines import Deadline
from retriever.errors import DeadlineExceededError
from tests.app.test_server import DOCS, KEY, Api, serving


def scrape(base: str, key: str | None = KEY) -> dict[tuple[str, tuple], float]:
    """Every sample of ``/metrics`` as ``{(name, sorted labels): value}``."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(base + "/metrics", headers=headers), timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_requests_stages_writes_and_the_collection(tmp_path, tiny_model_dir):
    with serving(tmp_path, tiny_model_dir) as (base, _):
        api = Api(base, KEY)
        for _ in range(3):
            assert api.search(query="green tea", k=2)[0] == 200
        assert api.search(query="tea", mode="bm25")[0] == 200
        assert api.call("POST", "/documents", {"documents": [{"id": "ash", "text": "volcanic ash"}]})[0] == 200
        for _ in range(2):
            assert api.call("GET", "/documents/ash")[0] == 200
        assert api.call("GET", "/stats", key=None)[0] == 401
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(base, key=None)
        assert refused.value.code == 401  # behind the key like every route but /health
        samples = scrape(base)

    def value(name, **labels):
        return samples.get((name, tuple(sorted(labels.items()))))

    assert value("semsearch_requests_total", route="/search", method="POST", status="200") == 4
    assert value("semsearch_requests_total", route="/documents/{doc_id:path}", method="GET", status="200") == 2
    assert value("semsearch_requests_total", route="/documents", method="POST", status="200") == 1
    assert value("semsearch_requests_total", route="unmatched", method="GET", status="401") >= 1
    assert value("semsearch_request_duration_seconds_count", route="/search") == 4
    assert value("semsearch_search_stage_seconds_count", stage="encode") == 3  # the bm25 search embeds nothing
    assert value("semsearch_search_stage_seconds_count", stage="dense") == 3
    for stage in ("bm25", "fusion", "display"):
        assert value("semsearch_search_stage_seconds_count", stage=stage) == 4, stage
    assert value("semsearch_search_stage_seconds_sum", stage="display") > 0
    assert value("semsearch_write_seconds_count", operation="commit") == 1
    assert value("semsearch_documents") == len(DOCS) + 1
    assert value("semsearch_chunks") >= len(DOCS) + 1 and value("semsearch_segments") >= 1
    assert value("semsearch_bytes") > 0
    assert value("semsearch_deadline_cancellations_total") == 0


def test_a_request_stopped_at_its_deadline_is_counted():
    limit = Deadline(0.05)
    stopped = []
    limit.on_cancel = lambda: stopped.append(True)
    assert anyio.run(limit.run, lambda: 7) == 7 and stopped == []
    with pytest.raises(DeadlineExceededError):
        anyio.run(limit.run, time.sleep, 1.0)
    assert stopped == [True]
