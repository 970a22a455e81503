"""The HTTP API of `sentune serve` (FastAPI on uvicorn): /search, /v1/embeddings (OpenAI's shapes), /health and the
search page at /. Requests are checked here (sentune.serve.protocol), batched (sentune.serve.batching) and computed by
the process's Engine (sentune.serve.engine) in one worker thread; the event loop only parses, waits and answers. The
routes (sentune.serve.routes) are given the Service (sentune.serve.service) that holds the engine and its batchers.

Safety: a body over --max-body-mb is refused (413) before it is read; with an API key every request except /health and
the page itself (static, no data: its searches send the key) must carry `Authorization: Bearer KEY` (401). Limits
(sentune.serve.admission): a request whose head or body is slower than --read-timeout-s gets 408 and its connection is
closed; one that finds --max-queue requests being answered gets 503 with Retry-After at once; one not answered within --timeout-s
gets 503 with Retry-After, and one whose client leaves is dropped: their texts not yet computed are never computed, and
the chunk running when they were answered is the last of theirs (sentune.serve.batching).

Operators: GET /metrics (Prometheus, sentune.serve.metrics); SIGTERM finishes the requests in flight, then stops;
POST /admin/reload swaps in the index now in the served folder (a symlink switched to a fresh build) without a
restart: for the requests that arrive after it, while those already checked finish on the previous index; one
encoded with another model, dimension or served name is refused (409) and the previous one goes on serving.

Why a route first for the swap: it answers, so the operator (or the deploy script) learns whether the rebuilt index
loaded, and if not why, while the previous one goes on serving; a signal has no answer. SIGHUP does the same in one
process (its outcome in the log), and under `--workers N` uvicorn's supervisor takes SIGHUP to replace the workers one
by one, each loading the folder anew: the way to swap there, since a route reaches one worker only. The route sits
behind the API key like every route that reads data, and takes no path: it re-reads only the folder the server was
started on (point it at a symlink and switch the symlink to publish a new build)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from sentune.serve.admission import BodyTooSlow, ReadLimit, read_limit
from sentune.serve.batching import QueueFull
from sentune.serve.http_layer import add_http_layer, refusals_for
from sentune.serve.metrics import Metrics
from sentune.serve.protocol import ApiError, error_body
from sentune.serve.rerank import include_reranker
from sentune.serve.routes import admin_router, embeddings_router, page_router, search_router
from sentune.serve.service import Service
from sentune.serve.settings import ServeSettings
from sentune.serve.shedding import REFUSALS_STATE, RETRY_AFTER, busy


def create_app(settings: ServeSettings, engine=None, *, model: Any = None) -> FastAPI:
    """The application; `engine`: one already loaded (one process), else each worker loads its own on start-up;
    `model`: a SentenceTransformer the caller holds, served instead of loading settings.model."""
    metrics = Metrics()
    service = Service(settings, metrics, engine, model)
    refusals = refusals_for(settings, service.queue_of, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state = await service.start(app)
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError, AttributeError):  # not the main thread; Windows
            # one process: SIGHUP reloads the index in place (under --workers uvicorn's supervisor takes it and replaces them)
            loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(state.reload_logged()))
        try:
            yield {REFUSALS_STATE: refusals}  # the server's HTTP protocol answers a full queue's 503 itself (sentune.serve.shedding)
        finally:  # uvicorn comes here once the requests in flight are answered (or its graceful limit passed)
            await service.stop()

    app = FastAPI(title="sentune serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    service.app = app
    app.state.service = service  # for whoever holds the app (tests, an operator's shell); the routes are given it
    add_error_answers(app, settings)
    for router in (search_router, embeddings_router, admin_router, page_router):
        app.include_router(router(service))
    include_reranker(app, service)  # POST /rerank (sentune.serve.rerank)
    add_http_layer(app, settings, metrics, refusals)  # the middleware and the OpenAPI schema (sentune.serve.http_layer)
    return app


def add_error_answers(app: FastAPI, settings: ServeSettings) -> None:
    """Every error as one JSON body in OpenAI's shape; a 500 without the exception's text."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        # a 503 (the time limit passed): come back after a second, when the request ahead has been answered or dropped
        headers = {"retry-after": RETRY_AFTER} if exc.status == 503 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        message = f"{request.method} {request.url.path}: {exc.detail}" if exc.status_code in (404, 405) else str(exc.detail)
        return JSONResponse(error_body(message, kind), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, exc: QueueFull):
        return busy(exc)

    @app.exception_handler(BodyTooSlow)
    async def body_too_slow(request: Request, exc: BodyTooSlow):
        return ReadLimit.answer(read_limit(settings))

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception):  # Starlette logs the traceback after this answer
        return JSONResponse(
            error_body("internal error; its traceback is in the server's log", "server_error"), status_code=500
        )  # no text of it: it may hold paths or data
