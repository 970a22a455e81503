"""The HTTP API of `sentune serve` (FastAPI on uvicorn): /search, /v1/embeddings (OpenAI's shapes), /health and the
search page at /. Requests are checked here (sentune.serve.protocol), batched (sentune.serve.batching) and computed by
the process's Engine (sentune.serve.engine) in one worker thread; the event loop only parses, waits and answers.

Safety: a body over --max-body-mb is refused (413) before it is read; with an API key every request except /health and
the page itself (static, no data: its searches send the key) must carry `Authorization: Bearer KEY` (401). Limits
(sentune.serve.admission): a request whose head or body is slower than --read-timeout-s gets 408 and its connection is
closed; one that finds --max-queue requests being answered gets 503 with Retry-After at once; one not answered within --timeout-s
gets 503, and one whose client leaves is dropped: their texts not yet computed are never computed
(sentune.serve.batching).

Operators: GET /metrics (Prometheus, sentune.serve.metrics); SIGTERM finishes the requests in flight, then stops;
POST /admin/reload swaps in the index rebuilt in the served folder without a restart.

Why a route first for the swap: it answers, so the operator (or the deploy script) learns whether the rebuilt index
loaded, and if not why, while the previous one goes on serving; a signal has no answer. SIGHUP does the same in one
process (its outcome in the log), and under `--workers N` uvicorn's supervisor takes SIGHUP to replace the workers one
by one, each loading the folder anew: the way to swap there, since a route reaches one worker only. The route sits
behind the API key like every route that reads data, and takes no path: it re-reads only the folder the server was
started on (point it at a symlink and switch the symlink to publish a new build)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from sentune.serve.admission import BodyTooSlow, ReadLimit, read_limit, within_limit
from sentune.serve.batching import MicroBatcher, QueueFull
from sentune.serve.http_layer import add_http_layer, refusals_for
from sentune.serve.metrics import Metrics
from sentune.serve.protocol import (
    ApiError,
    EmbeddingsRequest,
    SearchRequest,
    embedding_texts,
    embeddings_answer,
    error_body,
    parse_body,
    search_answer,
    search_texts,
)
from sentune.serve.rerank import include_reranker, reranker_health, reranker_name, search_ranked
from sentune.serve.settings import ServeSettings
from sentune.serve.shedding import REFUSALS_STATE, busy

LOG = logging.getLogger("uvicorn.error")  # where uvicorn's own messages go
BATCHED = {"/v1/embeddings": "embeddings", "/search": "search", "/rerank": "rerank"}  # route -> its batcher (rerank: sentune.serve.rerank)


class State:
    """The process's engine and its two batchers (embeddings, search), sharing one worker thread. The batchers call
    the engine held now: a reload swaps it between two batches."""

    def __init__(self, settings: ServeSettings, engine, metrics: Metrics) -> None:
        self.settings, self.engine = settings, engine
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="sentune-model")
        self.batchers: dict[str, MicroBatcher] = {}
        for name, method in (("embeddings", "embed"), ("search", "search")):
            batcher = MicroBatcher(
                partial(self.run, method),
                self.executor,
                max_batch=settings.max_batch,
                wait_s=settings.batch_wait_ms / 1000,
                max_queue=settings.max_queue,
                on_batch=metrics.batch_observer(name),
            )
            metrics.watch_queue(name, batcher.waiting)
            self.batchers[name] = batcher
        self.embed, self.search = self.batchers["embeddings"], self.batchers["search"]
        self.reloading = asyncio.Lock()
        self.started = time.time()

    async def reload(self) -> dict:
        """The served folder's index loaded anew and swapped in between two batches; ApiError when it does not load."""
        if not self.settings.index:
            raise ApiError(400, f"this server serves a model ({self.engine.name}), not an index: there is no index to reload", "invalid_request_error")
        from sentune.serve.engine import Engine

        async with self.reloading:  # one reload at a time; requests go on meanwhile, on the engine held now
            began = time.perf_counter()
            try:  # not in the model's thread: loading a few seconds must not stop the answers
                fresh = await asyncio.get_running_loop().run_in_executor(None, Engine, self.settings)
            except Exception as exc:
                message = f"{self.settings.index}: the rebuilt index did not load ({type(exc).__name__}: {exc}); the previous one is still served"
                raise ApiError(409, message, "invalid_request_error", code="reload_failed") from None
            self.engine = fresh
        return {"status": "reloaded", "index": fresh.health()["index"], "took_s": round(time.perf_counter() - began, 3)}

    async def reload_logged(self) -> None:
        """SIGHUP's reload: its outcome goes to the log, there being no one to answer."""
        try:
            done = await self.reload()
            LOG.warning("SIGHUP: %s reloaded in %.1f s (%s documents)", self.settings.index, done["took_s"], (done["index"] or {}).get("documents"))
        except ApiError as exc:
            LOG.error("SIGHUP: %s", exc.message)

    def run(self, method: str, items: list):
        return getattr(self.engine, method)(items)


def create_app(settings: ServeSettings, engine=None) -> FastAPI:
    """The application; `engine`: one already loaded (one process), else each worker loads its own on start-up."""
    metrics = Metrics()

    def queue_of(path: str) -> MicroBatcher | None:
        state: State | None = getattr(app.state, "serving", None)
        return None if state is None else state.batchers.get(BATCHED.get(path, ""))

    refusals = refusals_for(settings, queue_of, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loaded = engine
        if loaded is None:
            from sentune.serve.engine import Engine

            loaded = await asyncio.get_running_loop().run_in_executor(None, Engine, settings)
        state = State(settings, loaded, metrics)
        for batcher in state.batchers.values():
            batcher.start()
        app.state.serving = state
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError, AttributeError):  # not the main thread; Windows
            # one process: SIGHUP reloads the index in place (under --workers uvicorn's supervisor takes it and replaces them)
            loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(state.reload_logged()))
        try:
            yield {REFUSALS_STATE: refusals}  # the server's HTTP protocol answers a full queue's 503 itself (sentune.serve.shedding)
        finally:  # uvicorn comes here once the requests in flight are answered (or its graceful limit passed)
            for batcher in state.batchers.values():
                await batcher.stop()
            state.executor.shutdown(wait=False)

    app = FastAPI(title="sentune serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url="/openapi.json")

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return JSONResponse(exc.body(), status_code=exc.status)

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

    @app.get("/health")
    async def health(request: Request):
        state: State = request.app.state.serving
        return {
            "status": "ok",
            **state.engine.health(),
            "auth": settings.api_key is not None,
            "reranker": reranker_health(request.app),  # None without --reranker
            "uptime_s": round(time.time() - state.started, 1),
            "batching": {
                "embeddings": {"requests": state.embed.requests, "forward_passes": state.embed.forward_passes},
                "search": {"requests": state.search.requests, "forward_passes": state.search.forward_passes},
                "max_batch": settings.max_batch,
                "wait_ms": settings.batch_wait_ms,
                "max_queue": settings.max_queue,
                "refused": state.embed.refused + state.search.refused,
            },
        }

    @app.get("/metrics")
    async def metrics_page():
        page, kind = metrics.page()
        return Response(page, media_type=kind)

    @app.post("/admin/reload")
    async def reload(request: Request):
        return await request.app.state.serving.reload()

    page_html = resources.files("sentune.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(page_html)

    @app.post("/search")
    async def search(request: Request):
        state: State = request.app.state.serving
        began = time.perf_counter()
        if not state.engine.views:
            raise ApiError(
                404,
                f"this server serves a model ({state.engine.name}), not an index: /search needs `sentune serve INDEX` "
                "(an index from `sentune index` or an adapt run's folder); /v1/embeddings works",
                "not_found_error",
            )
        body = parse_body(await request.body(), SearchRequest)
        texts = search_texts(body, settings)
        system = body.system or state.engine.default_system
        if system not in state.engine.views:
            raise ApiError(
                400,
                f"system {system}: this index holds no fusion weight; serve an index built with `sentune index --fusion convex:ALPHA` "
                f"(or an adapt run's), or ask for {' or '.join(state.engine.views)}",
                "invalid_request_error",
            )
        ranked = await within_limit(
            search_ranked(request.app, state.search, texts, system, body.top_k), request, settings.timeout_s
        )  # reranked with --reranker
        fusion = state.engine.index.fusion.label if state.engine.index.fusion else None
        took_ms = (time.perf_counter() - began) * 1000
        return search_answer(texts, ranked, system, fusion, reranker_name(request.app), body.full_text, took_ms)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        state: State = request.app.state.serving
        body = parse_body(await request.body(), EmbeddingsRequest)
        texts = embedding_texts(body, settings, state.engine.dimension)
        embedded = await within_limit(state.embed.submit(texts), request, settings.timeout_s)
        answer = embeddings_answer(embedded, state.engine.name, body.encoding_format)
        headers = {"x-sentune-truncated": ",".join(map(str, answer["truncated"]))} if "truncated" in answer else None
        return JSONResponse(answer, headers=headers)

    include_reranker(app, settings, metrics)  # POST /rerank (sentune.serve.rerank)
    add_http_layer(app, settings, metrics, refusals)  # the middleware and the OpenAPI schema (sentune.serve.http_layer)
    return app
