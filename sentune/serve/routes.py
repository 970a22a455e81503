"""The routes of `sentune serve`, one router a concern, each given the Service (sentune.serve.service) it answers from:
its state comes in through the `serving` dependency, never from `app.state`.

Each request route takes the engine held when it is checked (`engine = state.engine`) and uses that one to its answer:
a reload in between changes the next requests' engine, not this one's."""

import time  # no `from __future__ import annotations`: FastAPI reads the Annotated dependencies as they are defined
from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from sentune.serve.admission import within_limit
from sentune.serve.protocol import ApiError, EmbeddingsRequest, SearchRequest, embedding_texts, embeddings_answer, parse_body, search_answer, search_texts
from sentune.serve.rerank import reranker_health, reranker_name, search_ranked
from sentune.serve.service import Service, State


def search_router(service: Service) -> APIRouter:
    router = APIRouter()
    settings = service.settings

    @router.post("/search")
    async def search(request: Request, state: Annotated[State, Depends(service.serving)]):
        began = time.perf_counter()
        engine = state.engine  # this request's index, from its checks to its answer
        if not engine.views:
            raise ApiError(
                404,
                f"this server serves a model ({engine.name}), not an index: /search needs `sentune serve INDEX` "
                "(an index from `sentune index` or an adapt run's folder); /v1/embeddings works",
                "not_found_error",
            )
        body = parse_body(await request.body(), SearchRequest)
        texts = search_texts(body, settings)
        system = body.system or engine.default_system
        if system not in engine.views:
            raise ApiError(
                400,
                f"system {system}: this index holds no fusion weight; serve an index built with `sentune index --fusion convex:ALPHA` "
                f"(or an adapt run's), or ask for {' or '.join(engine.views)}",
                "invalid_request_error",
            )
        ranked = await within_limit(
            search_ranked(service.reranking, state.searcher(engine), texts, system, body.top_k), request, settings.timeout_s
        )  # reranked with --reranker
        fusion = engine.index.fusion.label if engine.index.fusion else None
        took_ms = (time.perf_counter() - began) * 1000
        return search_answer(texts, ranked, system, fusion, reranker_name(service.reranking), body.full_text, took_ms)

    return router


def embeddings_router(service: Service) -> APIRouter:
    router = APIRouter()
    settings = service.settings

    @router.post("/v1/embeddings")
    async def embeddings(request: Request, state: Annotated[State, Depends(service.serving)]):
        engine = state.engine  # this request's model: its dimension checked, its vectors and its name answered
        body = parse_body(await request.body(), EmbeddingsRequest)
        texts = embedding_texts(body, settings, engine.dimension)
        embedded = await within_limit(state.embeddings(engine, texts, body.input_type), request, settings.timeout_s)
        answer = embeddings_answer(embedded, engine.name, body.encoding_format)
        headers = {"x-sentune-truncated": ",".join(map(str, answer["truncated"]))} if "truncated" in answer else None
        return JSONResponse(answer, headers=headers)

    return router


def admin_router(service: Service) -> APIRouter:
    router = APIRouter()

    @router.post("/admin/reload")
    async def reload(state: Annotated[State, Depends(service.serving)]):
        return await state.reload()

    return router


def page_router(service: Service) -> APIRouter:
    """The search page, /health and /metrics."""
    router = APIRouter()
    settings = service.settings
    page_html = resources.files("sentune.serve").joinpath("page.html").read_text(encoding="utf-8")

    @router.get("/", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(page_html)

    @router.get("/health")
    async def health(request: Request, state: Annotated[State, Depends(service.serving)]):
        return {
            "status": "ok",
            **state.engine.health(),
            "auth": settings.api_key is not None,
            "reranker": reranker_health(service.reranking),  # None without --reranker
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

    @router.get("/metrics")
    async def metrics_page():
        page, kind = service.metrics.page()
        return Response(page, media_type=kind)

    return router
