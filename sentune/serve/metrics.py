"""Prometheus metrics of `sentune serve` at GET /metrics (prometheus-client's text format): requests by route and status,
their latency, the batches' sizes and the queues' depth. Every answer is counted, those the HTTP protocol writes
itself (a full queue's 503, a slow or oversized head's 408 and 431) included.

Each app has its own registry (a test's second app, or a reloaded one, does not collide with the first). With
--workers N each worker counts its own requests and a scrape reaches one of them: scrape each worker, or serve one
process per port behind the balancer (prometheus-client's multiprocess mode would need a shared folder and its cleanup).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

ROUTES = ("/search", "/v1/embeddings", "/rerank", "/health", "/metrics", "/admin/reload", "/", "/openapi.json")  # any other path: "other"
LATENCY_BUCKETS = (0.005, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("sentune_requests", "HTTP requests answered, by route and status", ["route", "status"], registry=self.registry)
        self.latency = Histogram(
            "sentune_request_duration_seconds",
            "time from a request's head to its answer's end, by route and status",
            ["route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch = Histogram("sentune_batch_size", "texts in one forward pass, by batcher", ["batcher"], buckets=BATCH_BUCKETS, registry=self.registry)
        self.queue = Gauge("sentune_queue_depth", "texts waiting for a forward pass, by batcher", ["batcher"], registry=self.registry)
        self.in_flight = Gauge("sentune_requests_in_flight", "requests being answered", registry=self.registry)

    def watch_queue(self, batcher: str, depth: Callable[[], float]) -> None:
        self.queue.labels(batcher).set_function(depth)

    def batch_observer(self, batcher: str) -> Callable[[int], None]:
        return self.batch.labels(batcher).observe

    def written(self, path: str, status: int, seconds: float) -> None:
        """An answer written by the HTTP protocol, which no middleware sees: a full queue's 503 (sentune.serve.shedding),
        a head's 408 or 431 (sentune.serve.admission; path "", no head having been parsed: route "other")."""
        route = path if path in ROUTES else "other"
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route, str(status)).observe(seconds)

    def page(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Measured:
    """ASGI middleware recording each HTTP request's route, status and duration into `metrics`."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        began = time.perf_counter()
        status = 500  # what the client gets when the app fails before answering (uvicorn's own 500)

        async def noting_send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, noting_send)
        finally:
            self.metrics.in_flight.dec()
            route = scope["path"] if scope["path"] in ROUTES else "other"
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.latency.labels(route, str(status)).observe(time.perf_counter() - began)
