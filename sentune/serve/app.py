"""The HTTP API of `sentune serve` (FastAPI on uvicorn): /search, /v1/embeddings (OpenAI's shapes), /health and the
search page at /. Requests are checked here (sentune.serve.protocol), batched (sentune.serve.batching) and computed by
the process's Engine (sentune.serve.engine) in one worker thread; the event loop only parses, waits and answers.

Safety: a body over --max-body-mb is refused (413) before it is read; with an API key every request except /health and
the page itself (static, no data: its searches send the key) must carry `Authorization: Bearer KEY` (401); a request
that has not been answered within --timeout-s gets 503 (its batch, if it started, still finishes)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from sentune.serve.batching import MicroBatcher
from sentune.serve.guard import Guard
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
from sentune.serve.settings import ServeSettings


class State:
    """The process's engine and its two batchers (embeddings, search), sharing one worker thread."""

    def __init__(self, settings: ServeSettings, engine) -> None:
        self.settings, self.engine = settings, engine
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="sentune-model")
        wait = settings.batch_wait_ms / 1000
        self.embed = MicroBatcher(engine.embed, self.executor, max_batch=settings.max_batch, wait_s=wait)
        self.search = MicroBatcher(engine.search, self.executor, max_batch=settings.max_batch, wait_s=wait)
        self.started = time.time()


def create_app(settings: ServeSettings, engine=None) -> FastAPI:
    """The application; `engine`: one already loaded (one process), else each worker loads its own on start-up."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        loaded = engine
        if loaded is None:
            from sentune.serve.engine import Engine

            loaded = await asyncio.get_running_loop().run_in_executor(None, Engine, settings)
        state = State(settings, loaded)
        state.embed.start()
        state.search.start()
        app.state.serving = state
        try:
            yield
        finally:
            await state.embed.stop()
            await state.search.stop()
            state.executor.shutdown(wait=False)

    app = FastAPI(title="sentune serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        message = f"{request.method} {request.url.path}: {exc.detail}" if exc.status_code in (404, 405) else str(exc.detail)
        return JSONResponse(error_body(message, kind), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception):  # Starlette logs the traceback after this answer
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}: {exc}", "server_error"), status_code=500)

    async def within_limit(awaitable):
        try:
            return await asyncio.wait_for(awaitable, settings.timeout_s)
        except TimeoutError:
            raise ApiError(503, f"not answered within {settings.timeout_s:g} s (--timeout-s): the server is busy; try again", "server_busy") from None

    @app.get("/health")
    async def health(request: Request):
        state: State = request.app.state.serving
        return {
            "status": "ok",
            **state.engine.health(),
            "auth": settings.api_key is not None,
            "uptime_s": round(time.time() - state.started, 1),
            "batching": {
                "embeddings": {"requests": state.embed.requests, "forward_passes": state.embed.forward_passes},
                "search": {"requests": state.search.requests, "forward_passes": state.search.forward_passes},
                "max_batch": settings.max_batch,
                "wait_ms": settings.batch_wait_ms,
            },
        }

    page_html = resources.files("sentune.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(page_html)

    @app.post("/search")
    async def search(request: Request):
        from sentune.serve.engine import SearchItem

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
        ranked = await within_limit(state.search.submit([SearchItem(text, system, body.top_k) for text in texts]))
        fusion = state.engine.index.fusion.label if state.engine.index.fusion else None
        return search_answer(texts, ranked, system, fusion, body.full_text, (time.perf_counter() - began) * 1000)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        state: State = request.app.state.serving
        body = parse_body(await request.body(), EmbeddingsRequest)
        texts = embedding_texts(body, settings, state.engine.dimension)
        embedded = await within_limit(state.embed.submit(texts))
        answer = embeddings_answer(embedded, state.engine.name, body.encoding_format)
        headers = {"x-sentune-truncated": ",".join(map(str, answer["truncated"]))} if "truncated" in answer else None
        return JSONResponse(answer, headers=headers)

    app.add_middleware(Guard, settings=settings)
    return app
