"""The requests and answers of the HTTP API, and every refusal as one JSON message in OpenAI's error shape:
{"error": {"message": ..., "type": ..., "param": ..., "code": ...}}.

The body is read and checked here rather than by FastAPI's parameter parsing, so that a malformed body, a missing field
or a limit of this server is one message naming the field (a body not declared JSON is refused before: sentune.serve.guard).
Every text reads as sentune's readers read files: a lone surrogate (a valid JSON escape, no text) becomes U+FFFD."""

from __future__ import annotations

import base64
import json
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sentune.data.text_files import json_problem, json_without_lone_surrogates
from sentune.serve.settings import ServeSettings

SNIPPET_CHARS = 300  # a hit's text in a /search answer, unless "full_text" is asked for
# JSON nested deeper than this is refused (400): no request of this API nests past 3, and Python's parser (and every
# recursive walk of what it returns) runs out of stack near 1,000 levels, which a body of 2 kB reaches
MAX_JSON_DEPTH = 32


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code

    def body(self) -> dict:
        return error_body(self.message, self.kind, self.param, self.code)


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class SearchRequest(BaseModel):
    # a misspelt field ("top": 5) is refused, not ignored; strict: `"top_k": true` or `"3"` is refused, not read as 1 or 3
    model_config = ConfigDict(extra="forbid", strict=True)

    query: str | None = None
    queries: list[str] | None = None
    top_k: int = Field(10, ge=1, le=1000)
    system: Literal["hybrid", "dense", "bm25"] | None = None
    full_text: bool = False  # each hit's whole text instead of a snippet


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)  # OpenAI's `user` and whatever else clients add

    input: Any = None
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    # an asymmetric model's route (a sentence-transformers Router, as `sentune adapt`'s query-side candidate ships):
    # "query" or "document", as Voyage's API names it; left out, the model's default route. A one-route model ignores it
    input_type: Literal["query", "document"] | None = None


def parse_body(raw: bytes, schema: type[BaseModel]) -> Any:
    too_deep = ApiError(400, f"the request body nests JSON more than {MAX_JSON_DEPTH} levels deep (arrays and objects in one another)")
    try:
        data = json.loads(raw)
    except RecursionError:
        raise too_deep from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"the request body is not valid JSON ({json_problem(exc)})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc})") from None
    if nesting(data) > MAX_JSON_DEPTH:
        raise too_deep
    if b"\\u" in raw:  # a lone surrogate ("\\ud800") reads as JSON but is no text: U+FFFD, as every input of sentune
        data = json_without_lone_surrogates(data)
    if not isinstance(data, dict):
        raise ApiError(400, f"the request body must be a JSON object, not {type(data).__name__}")
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ApiError(400, f"{where}: {first['msg']}", param=where) from None


def nesting(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def check_text(text: Any, where: str, settings: ServeSettings) -> str:
    if not isinstance(text, str):
        raise ApiError(400, f"{where}: a string, not {type(text).__name__}", param=where)
    if not text.strip():
        raise ApiError(400, f"{where}: empty", param=where)
    if len(text) > settings.max_input_chars:
        raise ApiError(
            400,
            f"{where}: {len(text):,} characters; at most {settings.max_input_chars:,} (--max-input-chars; the model reads only its first tokens anyway)",
            param=where,
        )
    return text


def check_count(count: int, where: str, settings: ServeSettings) -> None:
    if count == 0:
        raise ApiError(400, f"{where}: an empty list", param=where)
    if count > settings.max_batch_inputs:
        raise ApiError(400, f"{where}: {count} texts; at most {settings.max_batch_inputs} a request (--max-batch-inputs)", param=where)


def search_texts(request: SearchRequest, settings: ServeSettings) -> list[str]:
    if (request.query is None) == (request.queries is None):
        raise ApiError(400, "give either query (one text) or queries (a list of texts)", param="query")
    if request.query is not None:
        return [check_text(request.query, "query", settings)]
    assert request.queries is not None
    check_count(len(request.queries), "queries", settings)
    return [check_text(text, f"queries[{i}]", settings) for i, text in enumerate(request.queries)]


def embedding_texts(request: EmbeddingsRequest, settings: ServeSettings, dimension: int) -> list[str]:
    if request.dimensions is not None and request.dimensions != dimension:
        raise ApiError(400, f"dimensions {request.dimensions}: this model's vectors have {dimension} (leave it out)", param="dimensions")
    value = request.input
    if value is None:
        raise ApiError(400, "input: required (a string or a list of strings)", param="input")
    if isinstance(value, str):
        return [check_text(value, "input", settings)]
    if not isinstance(value, list):
        raise ApiError(400, f"input: a string or a list of strings, not {type(value).__name__}", param="input")
    check_count(len(value), "input", settings)
    if any(isinstance(v, int) or isinstance(v, list) for v in value):
        raise ApiError(
            400, "input: token ids are not taken here, send the texts (LangChain's OpenAIEmbeddings: check_embedding_ctx_length=False)", param="input"
        )
    return [check_text(text, f"input[{i}]", settings) for i, text in enumerate(value)]


def snippet(text: str, full: bool) -> str:
    return text if full or len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"


def search_answer(texts: list[str], ranked: list, system: str, fusion: str | None, reranker: str | None, full_text: bool, took_ms: float) -> dict:
    """`reranker`: the cross-encoder whose order and scores the hits are in (None: the system's own), so a client
    knows which scale it reads."""
    results = [
        {
            "query": text,
            "hits": [
                {"id": hit.doc_id, "score": hit.score, "rank": rank, "text": snippet(hit.text, full_text)} for rank, hit in enumerate(result.hits, start=1)
            ],
            "truncated": result.truncated,
        }
        for text, result in zip(texts, ranked, strict=True)
    ]
    return {"results": results, "system": system, "fusion": fusion if system == "hybrid" else None, "reranker": reranker, "took_ms": round(took_ms, 3)}


def embeddings_answer(embedded: list, model: str, encoding_format: str) -> dict:
    def vector(v: np.ndarray) -> list[float] | str:
        if encoding_format == "base64":  # OpenAI's: the float32 values' little-endian bytes
            return base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")
        return np.asarray(v).tolist()  # Python floats, each exactly the float32 value, as float(x) gives

    tokens = sum(e.tokens for e in embedded)
    answer: dict[str, Any] = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": vector(e.vector)} for i, e in enumerate(embedded)],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    truncated = [i for i, e in enumerate(embedded) if e.truncated]
    if truncated:  # beside OpenAI's fields, which clients read as they are
        answer["truncated"] = truncated
    return answer
