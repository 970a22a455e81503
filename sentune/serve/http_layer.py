"""The HTTP layer in front of every route of `sentune serve`: ASGI middleware (Starlette's public middleware API) and
the OpenAPI schema, added in one place so that their order is decided once."""

from __future__ import annotations

from fastapi import FastAPI

from sentune.serve.admission import ReadLimit, read_limit
from sentune.serve.guard import Guard, refusal
from sentune.serve.metrics import Measured, Metrics
from sentune.serve.openapi import describe
from sentune.serve.settings import ServeSettings
from sentune.serve.shedding import Refusals, Shed


def refusals_for(settings: ServeSettings, queue_of, metrics: Metrics) -> Refusals:
    """The full queues' refusals of an app with these settings: counted in `metrics`, and only of a request whose head
    Guard lets through (a client without the key gets its 401, never a 503 that tells the load)."""
    return Refusals(queue_of, metrics.written, lambda head: refusal(settings, head) is None)


def add_http_layer(app: FastAPI, settings: ServeSettings, metrics: Metrics, refusals: Refusals) -> None:
    """From the outermost: Measured counts every answer (401, 408, 413 and 503 included); Guard checks the head (Host,
    key, type, size) and adds the security headers, before a full queue's 503 (Shed) can tell the load; ReadLimit
    times the body the route reads. The OpenAPI schema describes the bodies the routes read themselves."""
    app.add_middleware(ReadLimit, limit_s=read_limit(settings))
    app.add_middleware(Shed, refusals=refusals)
    app.add_middleware(Guard, settings=settings)
    app.add_middleware(Measured, metrics=metrics)
    describe(app)
