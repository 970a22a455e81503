"""Reranking with a cross-encoder: `sentune serve --reranker PATH`, as infinity and text-embeddings-inference offer it.

The reranker is a sentence-transformers CrossEncoder (one score a pair), loaded once a process. It serves
- `POST /rerank` in the two shapes their clients send: infinity's (Cohere's) `{"query", "documents", "top_n",
  "return_documents", "raw_scores", "model"}` → `{"object": "rerank", "results": [{"index", "relevance_score",
  "document"}], "model", "usage"}`, and text-embeddings-inference's `{"query", "texts", "return_text", "raw_scores",
  "truncate"}` → `[{"index", "score", "text"}]`; either way best first;
- `/search`: the system's first `--rerank-top` candidates of each query are scored by the cross-encoder and the first
  `top_k` of them answered in its order, its score as each hit's (`search_ranked`).

The (query, text) pairs of all requests go through one batcher (sentune.serve.batching, the same bound on its queue
and on a forward pass as the model's), computed in the process's model thread: never on the event loop, never beside
the embedding model's forward pass. A pair longer than the cross-encoder reads is truncated, as it always does; the
answer says which (`truncated`, and the X-Sentune-Truncated header, as /v1/embeddings).
"""

from __future__ import annotations

import json
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from sentune.errors import UserError
from sentune.serve.admission import within_limit
from sentune.serve.batching import MicroBatcher
from sentune.serve.protocol import ApiError, check_count, check_text, parse_body
from sentune.serve.service import Searcher, Service
from sentune.serve.settings import ServeSettings


@dataclass(frozen=True)
class Scored:
    raw: float  # the cross-encoder's output before its activation (a logit)
    tokens: int  # what it read of the pair, special tokens included, up to its limit
    truncated: bool


class Reranker:
    """A CrossEncoder with one output, loaded once; `score` runs in the model thread."""

    def __init__(self, source: str, *, device: str = "cpu", trust_remote_code: bool = False) -> None:
        import torch
        from sentence_transformers import CrossEncoder
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # as sentune.core.models.load_model: a "Loading weights" bar is noise in a server's log
        try:  # pickle checkpoints read with weights_only, as the served model's
            self.model = CrossEncoder(source, device=device, trust_remote_code=trust_remote_code, model_kwargs={"weights_only": True})
        except OSError as exc:  # a folder without the files a cross-encoder needs, a hub id not reachable
            raise UserError(f"--reranker {source}: could not load it as a cross-encoder ({exc})") from None
        if self.model.num_labels != 1:  # several labels: a classifier, with no one relevance score to sort by
            raise UserError(f"--reranker {source}: a classifier with {self.model.num_labels} labels; a reranker gives one score a pair")
        self.identity = torch.nn.Identity()
        self.max_tokens = int(self.model.max_seq_length or 0)
        self.name = Path(source).resolve().name if Path(source).exists() else source

    def score(self, pairs: list[tuple[str, str]]) -> list[Scored]:
        """The raw scores (one forward pass a `predict` batch, its own length sorting) and what each pair cost."""
        raw = self.model.predict(pairs, activation_fn=self.identity, show_progress_bar=False, convert_to_numpy=True)
        # the pair as its tokenizer reads it, untruncated: what it holds and whether the model saw all of it
        ids = self.model.tokenizer([q for q, _ in pairs], [d for _, d in pairs], truncation=False, verbose=False)["input_ids"]
        limit = self.max_tokens or max(map(len, ids), default=0)
        return [Scored(float(r), min(len(i), limit), len(i) > limit) for r, i in zip(np.atleast_1d(raw), ids, strict=True)]

    def relevance(self, raw: list[float]) -> list[float]:
        """The model's own activation of its raw scores (a sigmoid unless its config names another), as
        CrossEncoder.predict applies it."""
        import torch

        with torch.inference_mode():
            return [float(x) for x in self.model.activation_fn(torch.tensor(raw, dtype=torch.float32)).reshape(-1)]


def check_reranker(name: str) -> str:
    """--reranker, checked before anything loads: a folder or a hub model (sentune.core.models.check_model_name), and
    a cross-encoder by its saved configuration where that can be read without loading it (a bi-encoder would load as
    a cross-encoder with a random head, and rank at random)."""
    from sentune.core.models import check_model_name

    resolved = check_model_name(name, "--reranker")
    saved = _config(resolved, "config_sentence_transformers.json")
    if saved is not None and saved.get("model_type") == "CrossEncoder":
        return resolved
    config = _config(resolved, "config.json")
    architectures = (config or {}).get("architectures") or []
    if config is not None and not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        raise UserError(
            f"--reranker {name}: not a cross-encoder ({', '.join(map(str, architectures)) or 'no architecture'} in its config.json); "
            "give a sentence-transformers CrossEncoder or a ...ForSequenceClassification model with one label"
        )
    return resolved


def _config(resolved: str, file: str) -> dict | None:
    path: Any = Path(resolved) / file
    if Path(resolved).is_dir() and not path.is_file():
        return None
    if not path.is_file():  # a hub id: its file in the hub cache, when there (check_model_name may not have fetched it)
        import huggingface_hub

        path = huggingface_hub.try_to_load_from_cache(resolved, file)
        if not isinstance(path, str):
            return None
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class RerankRequest(BaseModel):
    """Both shapes in one model: `documents` (infinity, Cohere) or `texts` (text-embeddings-inference)."""

    model_config = ConfigDict(extra="ignore", strict=True)  # clients add their own fields (Cohere's max_chunks_per_doc)

    query: Any = None
    documents: list[Any] | None = None
    texts: list[Any] | None = None
    top_n: int | None = Field(None, ge=1)
    return_documents: bool = False
    return_text: bool = False
    raw_scores: bool = False
    truncate: bool | None = None  # TEI's; pairs are always truncated to what the model reads, and the answer says which
    truncation_direction: Literal["Right", "right"] = "Right"  # the tokenizer's side; Left is not offered
    model: str | None = None  # any name: the server has one reranker and answers with its name


@dataclass
class Reranking:
    """What a process with a reranker holds: the model and its batcher (started with the app)."""

    reranker: Reranker
    batcher: MicroBatcher
    depth: int  # /search: candidates scored a query (--rerank-top)
    settings: ServeSettings

    async def scores(self, pairs: list[tuple[str, str]]) -> list[Scored]:
        return await self.batcher.submit(pairs)  # QueueFull (503) when --max-queue requests are being answered


def include_reranker(app: FastAPI, service: Service) -> None:
    """POST /rerank on `app`, and the reranker of --reranker loaded now (before the port opens: a model that will not
    load is one line) and batched once the app has started (its model thread, sentune.serve.service.State), held by
    `service` (`service.reranking`) where the routes read it."""
    settings, metrics = service.settings, service.metrics
    reranker = Reranker(settings.reranker, device=settings.device, trust_remote_code=settings.trust_remote_code) if settings.reranker else None

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # entered after the app's own: its State (the model thread) exists
        if reranker is None:
            yield
            return
        state = service.state
        assert state is not None  # the app's own lifespan, entered first, started it
        batcher = MicroBatcher(
            reranker.score,
            state.executor,
            max_batch=settings.max_batch,
            wait_s=settings.batch_wait_ms / 1000,
            max_queue=settings.max_queue,
            on_batch=metrics.batch_observer("rerank"),
        )
        metrics.watch_queue("rerank", batcher.waiting)
        batcher.start()
        state.batchers["rerank"] = batcher  # beside the model's batchers: where a full queue is looked for
        service.reranking = Reranking(reranker, batcher, settings.rerank_top, settings)
        try:
            yield
        finally:
            service.reranking = None
            await batcher.stop()

    router = APIRouter(lifespan=lifespan)

    @router.post("/rerank", dependencies=[Depends(service.serving)])  # the app started (mounted without its lifespan)
    async def rerank_route(request: Request):
        return await rerank(request, service.reranking)

    app.include_router(router)


async def rerank(request: Request, reranking: Reranking | None):
    if reranking is None:
        raise ApiError(404, "this server has no reranker: start it with --reranker PATH (a sentence-transformers CrossEncoder)", "not_found_error")
    body = parse_body(await request.body(), RerankRequest)
    tei = body.texts is not None
    if tei == (body.documents is not None):
        raise ApiError(
            400, "give documents (a list of texts; infinity's and Cohere's shape) or texts (text-embeddings-inference's), not both", param="documents"
        )
    where = "texts" if tei else "documents"
    settings = reranking.settings
    if body.query is None:
        raise ApiError(400, "query: required (the text the documents are ranked for)", param="query")
    query = check_text(body.query, "query", settings)
    given: list[Any] = (body.texts if tei else body.documents) or []
    check_count(len(given), where, settings)
    documents = [check_text(text, f"{where}[{i}]", settings) for i, text in enumerate(given)]
    # as the model's routes: 503 past --timeout-s, 499 when the client left; either way its pairs not yet scored are dropped
    scored = await within_limit(reranking.scores([(query, d) for d in documents]), request, settings.timeout_s)
    raw = [s.raw for s in scored]
    values = raw if body.raw_scores else reranking.reranker.relevance(raw)
    order = sorted(range(len(documents)), key=lambda i: -values[i])  # best first; ties in the order given
    truncated = [i for i, s in enumerate(scored) if s.truncated]
    headers = {"x-sentune-truncated": ",".join(map(str, truncated))} if truncated else None
    if tei:
        ranks = [{"index": i, "score": values[i], **({"text": documents[i]} if body.return_text else {})} for i in order]
        return JSONResponse(ranks, headers=headers)
    tokens = sum(s.tokens for s in scored)
    answer: dict[str, Any] = {
        "object": "rerank",
        "results": [{"relevance_score": values[i], "index": i, "document": documents[i] if body.return_documents else None} for i in order[: body.top_n]],
        "model": reranking.reranker.name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "id": f"sentune-{uuid.uuid4()}",
        "created": int(time.time()),
    }
    if truncated:
        answer["truncated"] = truncated
    return JSONResponse(answer, headers=headers)


def reranker_name(reranking: Reranking | None) -> str | None:
    """The name of the reranker /search answers with (None: the server has none)."""
    return None if reranking is None else reranking.reranker.name


def reranker_health(reranking: Reranking | None) -> dict | None:
    """/health's account of the reranker (None: the server has none)."""
    if reranking is None:
        return None
    batcher = reranking.batcher
    return {
        "model": reranking.reranker.name,
        "max_tokens": reranking.reranker.max_tokens,
        "rerank_top": reranking.depth,
        "batching": {"requests": batcher.requests, "forward_passes": batcher.forward_passes, "refused": batcher.refused},
    }


async def search_ranked(reranking: Reranking | None, search: Searcher, texts: list[str], system: str, top_k: int) -> list:
    """/search's rankings: the system's own, or with a reranker its first --rerank-top candidates in the cross-encoder's
    order (ties in the system's), their scores the cross-encoder's, the first top_k of them."""
    from sentune.serve.engine import Ranked, SearchItem

    if reranking is None:
        return await search.submit([SearchItem(text, system, top_k) for text in texts])
    if top_k > reranking.depth:
        raise ApiError(
            400,
            f"top_k {top_k}: at most {reranking.depth} here: this server reranks the first {reranking.depth} candidates (--rerank-top)",
            param="top_k",
        )
    ranked = await search.submit([SearchItem(text, system, reranking.depth) for text in texts])
    pairs = [(text, hit.text) for text, result in zip(texts, ranked, strict=True) for hit in result.hits]
    scores = reranking.reranker.relevance([s.raw for s in await reranking.scores(pairs)]) if pairs else []
    out, start = [], 0
    for result in ranked:
        own = scores[start : start + len(result.hits)]
        order = sorted(range(len(own)), key=lambda i: -own[i])
        out.append(Ranked([replace(result.hits[i], score=own[i]) for i in order[:top_k]], result.truncated))
        start += len(own)
    return out
