"""``GET /metrics``: the service in Prometheus' text format (prometheus-client).

- ``semsearch_requests_total{route, method, status}``: requests answered, by
  route template (``/documents/{doc_id}``, not each id) and status;
- ``semsearch_request_duration_seconds{route}``: their latency until the answer starts (histogram);
- ``semsearch_search_stage_seconds{stage}``: the time of each stage of a
  search: ``encode``, ``dense``, ``bm25``, ``fusion``, ``display`` (histogram);
- ``semsearch_write_seconds{operation}``: each ``commit`` and ``merge``
  (histogram; its ``_count`` is how many there were);
- ``semsearch_deadline_cancellations_total``: requests stopped at their deadline;
- ``semsearch_documents``, ``semsearch_chunks``, ``semsearch_segments``,
  ``semsearch_bytes``: the collection as last committed, read at each scrape.

Behind the API key like every route but ``/health``. With ``serve --workers
N`` every worker writes its counts under ``$PROMETHEUS_MULTIPROC_DIR`` (set
by ``serve``) and whichever worker answers a scrape reports all of them.
"""

from __future__ import annotations

import os
import time
from typing import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from retriever.collection import Collection

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
WRITE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
WRITES = ("commit", "merge")


class ServiceMetrics:
    """The metrics of one app serving ``collection``; listens to the collection's timings."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, collection: Collection) -> None:
        self.registry = CollectorRegistry()
        self.collection = CollectionCollector(collection)
        self.requests = Counter(
            "semsearch_requests",
            "Requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "semsearch_request_duration_seconds",
            "Request latency, by route template.",
            ["route"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.stages = Histogram(
            "semsearch_search_stage_seconds",
            "Time of each stage of a search.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.writes = Histogram(
            "semsearch_write_seconds",
            "Duration of each commit and merge.",
            ["operation"],
            buckets=WRITE_BUCKETS,
            registry=self.registry,
        )
        self.cancellations = Counter(
            "semsearch_deadline_cancellations", "Requests stopped at their deadline.", registry=self.registry
        )
        self.registry.register(self.collection)
        collection.timings.listen(self.timed)

    def timed(self, name: str, seconds: float) -> None:
        """A timing from the collection: a write, or a stage of a search."""
        (self.writes if name in WRITES else self.stages).labels(name).observe(seconds)

    def exposition(self) -> bytes:
        """Every metric in the text format; all workers' counts when they share a directory."""
        if not os.environ.get(MULTIPROCESS_ENV):
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(self.collection)
        return generate_latest(registry)


class CollectionCollector:
    """Documents, chunks, segments and bytes of the collection as last committed, read at scrape time."""

    FIELDS = (
        ("documents", "Documents in the collection."),
        ("chunks", "Chunks (embedded passages)."),
        ("segments", "Segments of the current generation."),
        ("bytes", "Size of the collection on disk."),
    )

    def __init__(self, collection: Collection) -> None:
        self.collection = collection

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = self.collection.info()
        values = {
            "documents": info["documents"],
            "chunks": info["chunks"],
            "segments": len(info["segments"]),
            "bytes": info["size_bytes"],
        }
        for name, help_text in self.FIELDS:
            yield GaugeMetricFamily(f"semsearch_{name}", help_text, value=values[name])


class MetricsMiddleware:
    """Counts and times every HTTP request by the route template it matched (``unmatched`` for none)."""

    def __init__(self, app, metrics: ServiceMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        counted = [False]

        def count(status: int) -> None:
            counted[0] = True
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.requests.labels(route, scope.get("method", ""), str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)

        async def send_status(message):
            if message["type"] == "http.response.start" and not counted[0]:
                count(message["status"])  # before the client can see the answer, so a scrape after it counts it
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            if not counted[0]:
                count(500)
