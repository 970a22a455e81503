"""The OpenAPI schema of `sentune serve`, at GET /openapi.json: FastAPI's, with the request and answer bodies that its
routes read and write themselves (they parse their bodies in sentune.serve.protocol, so that a refusal is one message
naming the field, which leaves FastAPI nothing to describe): the request models of sentune.serve.protocol and
sentune.serve.rerank, the answers' shapes below, and every refusal's OpenAI-shaped error."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema

from sentune.serve.protocol import EmbeddingsRequest, SearchRequest

REF = "#/components/schemas/{model}"


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: ErrorDetail


class Hit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    score: float
    rank: int
    text: str


class QueryResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str
    hits: list[Hit]
    truncated: bool  # the query was longer than the model reads


class SearchAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    results: list[QueryResult]
    system: Literal["hybrid", "dense", "bm25"]
    fusion: str | None
    reranker: str | None
    took_ms: float


class Embedding(BaseModel):
    model_config = ConfigDict(extra="forbid")
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str  # str: encoding_format "base64"


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt_tokens: int
    total_tokens: int


class EmbeddingsAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: Usage
    truncated: list[int] | None = None  # the inputs longer than the model reads; absent when none was


class Ranked(BaseModel):
    model_config = ConfigDict(extra="forbid")
    relevance_score: float
    index: int
    document: str | None


class RerankAnswer(BaseModel):
    """infinity's and Cohere's shape (a request with `documents`)."""

    model_config = ConfigDict(extra="forbid")
    object: Literal["rerank"]
    results: list[Ranked]
    model: str
    usage: Usage
    id: str
    created: int
    truncated: list[int] | None = None


class TeiRank(BaseModel):
    """text-embeddings-inference's shape (a request with `texts`): a list of these."""

    model_config = ConfigDict(extra="forbid")
    index: int
    score: float
    text: str | None = None


class Health(BaseModel):
    model_config = ConfigDict(extra="allow")  # the engine's and the reranker's accounts, which grow with them
    status: Literal["ok"]
    auth: bool
    uptime_s: float


class Reloaded(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["reloaded"]
    index: dict[str, Any] | None
    took_s: float


# the errors every route may answer (the HTTP layer's), and each route's own; 408 and 431 come as text when the HTTP
# protocol writes them (a head too slow or too large), as JSON when the app does
LAYER_ERRORS = {
    "400": "a malformed request, a Host header missing, repeated or not allowed",
    "401": "no API key, or a wrong one",
    "408": "the head or the body did not arrive within --read-timeout-s",
    "413": "the body is over --max-body-mb",
    "415": "the body is not declared JSON",
    "431": "the head is over --max-head-kb",
}
BATCHED_ERRORS = {"404": "not served here (an index's route on a model)", "499": "the client left", "503": "the queue is full, or --timeout-s passed"}
ROUTES: dict[tuple[str, str], tuple[type[BaseModel] | None, type[BaseModel] | None, str]] = {
    ("/search", "post"): (SearchRequest, SearchAnswer, "the documents ranked for each query"),
    ("/v1/embeddings", "post"): (EmbeddingsRequest, EmbeddingsAnswer, "one vector a text, in OpenAI's shape"),
    ("/health", "get"): (None, Health, "the model, the index and the batchers"),
    ("/admin/reload", "post"): (None, Reloaded, "the rebuilt index swapped in"),
}


def rerank_route() -> tuple[type[BaseModel], type[BaseModel], str]:
    from sentune.serve.rerank import RerankRequest

    return RerankRequest, RerankAnswer, "the documents in the reranker's order"


def build_schema(app: FastAPI) -> dict[str, Any]:
    spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    routes = dict(ROUTES)
    if "/rerank" in spec.get("paths", {}):
        routes[("/rerank", "post")] = rerank_route()
    models: list[type[BaseModel]] = [ErrorAnswer, TeiRank]
    for request, answer, _ in routes.values():
        models += [model for model in (request, answer) if model is not None]
    _, defs = models_json_schema([(model, "validation") for model in dict.fromkeys(models)], ref_template=REF)
    spec.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))

    def ref(model: type[BaseModel]) -> dict:
        return {"$ref": REF.format(model=model.__name__)}

    def error(description: str) -> dict:
        return {"description": description, "content": {"application/json": {"schema": ref(ErrorAnswer)}, "text/plain": {"schema": {"type": "string"}}}}

    for (path, method), (request, answer, description) in routes.items():
        operation = spec["paths"].get(path, {}).get(method)
        if operation is None:
            continue
        if request is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(request)}}}
        ok: dict[str, Any] = {"schema": ref(answer)} if answer is not None else {}
        if path == "/rerank":  # with `texts`, text-embeddings-inference's list
            ok = {"schema": {"anyOf": [ref(RerankAnswer), {"type": "array", "items": ref(TeiRank)}]}}
        errors = LAYER_ERRORS | (BATCHED_ERRORS if request is not None else {})
        operation["responses"] = {"200": {"description": description, "content": {"application/json": ok}}} | {
            status: error(text) for status, text in errors.items()
        }
    for path in spec["paths"]:  # every route's own statuses are here: FastAPI's 422 is never answered (no parameter is parsed)
        for operation in spec["paths"][path].values():
            operation.get("responses", {}).pop("422", None)
    spec["components"]["schemas"].pop("HTTPValidationError", None)
    spec["components"]["schemas"].pop("ValidationError", None)
    return spec


def describe(app: FastAPI) -> None:
    """`app.openapi` (what FastAPI serves at its openapi_url) answers build_schema's, built once."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_schema(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend its schema
