"""What the routes of `sentune serve` are given (sentune.serve.routes): the process's engine, its batchers and its one
model thread (`State`), started by the app's lifespan, or by the first request when the app is mounted in another one
without it (`Service.serving`).

A request runs wholly on the engine it was checked against: a route takes `state.engine` once, checks the request
against it (a system it holds, its dimension) and hands its texts to the batchers pinned to that engine (`Pinned`).
A reload swaps `state.engine` for the requests that arrive after it; the batches already admitted finish on the engine
they were checked against, which is released once its last request is answered. A reload that would change what a
client reads under the same name (another model, another dimension, another served name) is refused (409): the
clients' stored vectors would no longer compare with new ones; a server restarted on the new index is the honest way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import FastAPI

from sentune.serve.batching import MicroBatcher
from sentune.serve.metrics import Metrics
from sentune.serve.protocol import ApiError
from sentune.serve.settings import ServeSettings

LOG = logging.getLogger("uvicorn.error")  # where uvicorn's own messages go
# A running batch is computed in chunks of at most CHUNK_CHARS characters (a text counts what a model reads of it, at
# most TEXT_CHARS): between chunks the texts of a request answered meanwhile (timed out, left) are skipped. A chunk of
# 8 texts of 512 tokens, or of 64 short queries: a query batch under load stays one forward pass.
CHUNK_CHARS = 16_384
TEXT_CHARS = 2_048


@dataclass(frozen=True)
class Pinned:
    """An item of a request with the engine the request was checked against."""

    engine: Any
    item: Any  # a sentune.serve.engine.EmbedItem or SearchItem


def text_cost(pinned: Pinned) -> int:
    text = pinned.item.text
    return max(1, min(len(text), TEXT_CHARS))


class Searcher:
    """The search batcher for one engine: what sentune.serve.rerank.search_ranked submits to."""

    def __init__(self, batcher: MicroBatcher, engine: Any) -> None:
        self.batcher, self.engine = batcher, engine

    async def submit(self, items: list) -> list:
        return await self.batcher.submit([Pinned(self.engine, item) for item in items])


class State:
    """The engine held now and the two batchers (embeddings, search), sharing one worker thread."""

    def __init__(self, settings: ServeSettings, engine: Any, metrics: Metrics) -> None:
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
                cost=text_cost,
                chunk_cost=CHUNK_CHARS,
            )
            metrics.watch_queue(name, batcher.waiting)
            self.batchers[name] = batcher
        self.embed, self.search = self.batchers["embeddings"], self.batchers["search"]
        self.reloading = asyncio.Lock()
        self.started = time.time()

    async def embeddings(self, engine: Any, texts: list[str], route: str | None = None) -> list:
        from sentune.serve.engine import EmbedItem

        return await self.embed.submit([Pinned(engine, EmbedItem(text, route)) for text in texts])

    def searcher(self, engine: Any) -> Searcher:
        return Searcher(self.search, engine)

    @staticmethod
    def run(method: str, pinned: list[Pinned]) -> list:
        """In the model thread: each engine's items in one call of it (a batch spans a reload: old and new engines)."""
        out: list = [None] * len(pinned)
        for engine in {id(p.engine): p.engine for p in pinned}.values():
            rows = [i for i, p in enumerate(pinned) if p.engine is engine]
            for i, result in zip(rows, getattr(engine, method)([pinned[i].item for i in rows]), strict=True):
                out[i] = result
        return out

    async def reload(self) -> dict:
        """The served folder's index loaded anew and swapped in for the requests that come after; ApiError (409) when it
        does not load or would serve another model, dimension or name."""
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
            conflict = reload_conflict(self.engine, fresh)
            if conflict is not None:
                message = f"{self.settings.index}: {conflict}; the previous one is still served (restart the server to serve this index)"
                raise ApiError(409, message, "invalid_request_error", code="reload_refused")
            self.engine = fresh
        return {"status": "reloaded", "index": fresh.health()["index"], "took_s": round(time.perf_counter() - began, 3)}

    async def reload_logged(self) -> None:
        """SIGHUP's reload: its outcome goes to the log, there being no one to answer."""
        try:
            done = await self.reload()
            LOG.warning("SIGHUP: %s reloaded in %.1f s (%s documents)", self.settings.index, done["took_s"], (done["index"] or {}).get("documents"))
        except ApiError as exc:
            LOG.error("SIGHUP: %s", exc.message)


def reload_conflict(served: Any, fresh: Any) -> str | None:
    """Why `fresh` may not replace `served` under a live server (None: it may): /v1/embeddings must go on answering
    vectors that compare with those it answered, under the name it answered them with."""
    if fresh.dimension != served.dimension:
        return f"the rebuilt index's model gives {fresh.dimension}-dimensional vectors, the served one {served.dimension}"
    if fresh.model_identity != served.model_identity:
        return f"the rebuilt index was encoded with another model ({fresh.name}, weights {str(fresh.model_identity)[:12]}; served: {served.name}, weights {str(served.model_identity)[:12]})"
    if fresh.name != served.name:
        return f"the rebuilt index's model would be served as {fresh.name!r}, not {served.name!r} (--model-name names it)"
    return None


class Service:
    """The settings, the metrics and, once started, the State: what every router is given. `serving` is the routes'
    dependency: it starts the app when no lifespan did (mounted in another app without it)."""

    def __init__(self, settings: ServeSettings, metrics: Metrics, engine: Any = None, held: Any = None) -> None:
        self.settings, self.metrics = settings, metrics
        self.engine, self.held = engine, held  # an engine loaded already; a model the caller holds (sentune.serve_app)
        self.state: State | None = None
        self.reranking: Any = None  # sentune.serve.rerank.Reranking, with --reranker once started
        self.app: FastAPI | None = None
        self._starting = asyncio.Lock()
        self._lazy: contextlib.AsyncExitStack | None = None

    async def start(self, app: FastAPI) -> State:
        loaded = self.engine
        if loaded is None:
            from sentune.serve.engine import Engine

            loaded = await asyncio.get_running_loop().run_in_executor(None, partial(Engine, self.settings, self.held))
        state = State(self.settings, loaded, self.metrics)
        for batcher in state.batchers.values():
            batcher.start()
        self.state = state
        return state

    async def stop(self) -> None:
        state, self.state = self.state, None
        if state is not None:
            for batcher in state.batchers.values():
                await batcher.stop()
            state.executor.shutdown(wait=False)

    async def serving(self) -> State:
        """The State; started now, the app's whole lifespan entered (the reranker's too), when no lifespan ran: the app
        is mounted in one that does not run it. It then lives as long as the process."""
        if self.state is not None:
            return self.state
        async with self._starting:
            if self.state is None:
                assert self.app is not None
                LOG.warning("sentune: the app's lifespan did not run (mounted in another app?): loading %s on its first request", self.settings.target)
                self._lazy = contextlib.AsyncExitStack()
                await self._lazy.enter_async_context(self.app.router.lifespan_context(self.app))
        assert self.state is not None
        return self.state

    def queue_of(self, route: str) -> MicroBatcher | None:
        """A batched route's batcher (None: another route, or not started): where sentune.serve.shedding looks."""
        return None if self.state is None else self.state.batchers.get(BATCHED.get(route, ""))


BATCHED = {"/v1/embeddings": "embeddings", "/search": "search", "/rerank": "rerank"}  # route -> its batcher (rerank: sentune.serve.rerank)
