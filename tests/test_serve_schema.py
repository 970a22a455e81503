"""A property of the whole HTTP API, over requests generated from its request models (sentune.serve.protocol's
SearchRequest, EmbeddingsRequest and sentune.serve.rerank's RerankRequest: each field a value of its declared type or any JSON value, fields left out or added,
lone surrogates and control characters in the texts, bodies that are not JSON objects, other content types): no
request gets a 5xx, every refusal is one JSON error, and a valid request sent at the same moment (batched with it) gets
its 200 and the same answer as alone. The app is the one `sentune serve` runs, with the tiny model and the toy index of
tests/test_serve.py and the tiny cross-encoder of tests/test_serve_rerank.py, in this process; every answer, a refusal or
not, is held to the OpenAPI schema the server publishes at /openapi.json (whose request bodies are those models'). Bounded examples (derandomized: the same in every run of CI); SENTUNE_SCHEMA_EXAMPLES
sets how many, SENTUNE_SCHEMA_SEED a random search instead."""

from __future__ import annotations

import json
import os
import types
import typing
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from openapi_check import answer_problems, problems
from test_serve import served_model, toy_index  # noqa: F401 (fixtures)
from test_serve_rerank import cross_encoder  # noqa: F401 (fixture)
from test_serve_safety import PORT, cli_settings

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("fastapi")
pytest.importorskip("bm25s")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sentune.serve.protocol import EmbeddingsRequest, SearchRequest  # noqa: E402
from sentune.serve.rerank import RerankRequest  # noqa: E402

EXAMPLES = int(os.environ.get("SENTUNE_SCHEMA_EXAMPLES", "60"))
VALID = {
    "/search": {"queries": ["a man plays", "the dog runs"], "top_k": 3},
    "/v1/embeddings": {"input": ["a man plays the guitar", "the dog runs"]},
    "/rerank": {"query": "a man plays", "documents": ["the dog runs in the park", "a man plays the guitar"]},
}
MODELS = {"/search": SearchRequest, "/v1/embeddings": EmbeddingsRequest, "/rerank": RerankRequest}

# texts as clients send them, and as they should not: lone surrogates (valid JSON escapes), control and format characters
# (st.characters never draws a surrogate, whatever its categories: they are put in here)
surrogated = st.tuples(st.text(max_size=6), st.integers(0xD800, 0xDFFF), st.text(max_size=6)).map(lambda p: p[0] + chr(p[1]) + p[2])
texts = st.text(max_size=12) | surrogated | st.sampled_from(["a man", "", " ", "a\tman", "\x1b[2J\u202e", "x" * 300])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=10,
)


def typed(annotation) -> st.SearchStrategy:
    """A value of a field's declared type, its texts drawn from `texts` (st.from_type's own leave surrogates out)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is str:
        return texts
    if annotation is typing.Any:  # EmbeddingsRequest.input: a text, a list of them, token ids, anything
        return texts | st.lists(texts, max_size=5) | st.lists(st.integers(0, 3000), max_size=3) | json_values
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(typed(arg) for arg in args))
    if origin is list:
        return st.lists(typed(args[0]), max_size=5)
    return st.from_type(annotation)  # int, bool, None, Literal


def field_values(annotation) -> st.SearchStrategy:
    """A value of the field's declared type (more often), or any JSON value in its place."""
    return st.one_of(typed(annotation), typed(annotation), json_values)


def bodies(model) -> st.SearchStrategy:
    fields = {name: field_values(info.annotation) for name, info in model.model_fields.items()}
    objects = st.fixed_dictionaries({}, optional=fields) | st.fixed_dictionaries({}, optional=fields | {"stray": json_values})
    encoded = objects.map(lambda body: json.dumps(body).encode())  # ensure_ascii: a lone surrogate travels as \udXXX
    return encoded | json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=40)


requests = st.sampled_from(sorted(MODELS)).flatmap(
    lambda path: st.tuples(
        st.just(path),
        bodies(MODELS[path]),
        st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", None]),
        st.sampled_from(sorted(VALID)),
    )
)


@pytest.fixture(scope="module")
def served(toy_index, cross_encoder):  # noqa: F811
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine

    # a queue long enough for the two requests of an example: shedding (503, tests/test_serve_admission.py) is not this property
    config = cli_settings(str(toy_index[0]), "--batch-wait-ms", "20", "--reranker", str(cross_encoder), "--max-queue", "100000")
    with TestClient(create_app(config, Engine(config)), base_url=f"http://127.0.0.1:{PORT}", raise_server_exceptions=False) as client:
        alone = {path: client.post(path, json=body).json() for path, body in VALID.items()}
        SCHEMA.update(client.get("/openapi.json").json())
        yield client, alone


SCHEMA: dict = {}  # the served /openapi.json, read by the fixture


def same_answer(path: str, got: dict, alone: dict) -> bool:
    if path == "/rerank":
        return [r["index"] for r in got["results"]] == [r["index"] for r in alone["results"]]
    if path == "/search":
        return [[h["id"] for h in r["hits"]] for r in got["results"]] == [[h["id"] for h in r["hits"]] for r in alone["results"]]
    return all(np.allclose(a["embedding"], b["embedding"], atol=1e-5) for a, b in zip(got["data"], alone["data"], strict=True))


def check(client, alone, request) -> None:
    path, body, content_type, valid_path = request
    headers = {"content-type": content_type} if content_type else {}
    with ThreadPoolExecutor(2) as pool:  # at the same moment: the batcher puts both in one forward pass when both are valid
        generated = pool.submit(client.post, path, content=body, headers=headers)
        valid = pool.submit(client.post, valid_path, json=VALID[valid_path])
        answer, good = generated.result(), valid.result()
    assert answer.status_code < 500, (path, body[:200], content_type, answer.status_code, answer.text[:300])
    assert not answer_problems(SCHEMA, path, "post", answer.status_code, answer.json()), (path, body[:200], answer.text[:300])
    if answer.status_code >= 400:
        error = answer.json()["error"]
        assert set(answer.json()) == {"error"} and isinstance(error["message"], str) and len(error["message"]) < 400, answer.text[:300]
    assert good.status_code == 200, (path, body[:200], good.text[:300])
    assert same_answer(valid_path, good.json(), alone[valid_path])


def test_no_generated_request_gets_a_5xx_nor_harms_a_valid_one_beside_it(served):
    client, alone = served
    search = settings(
        max_examples=EXAMPLES, deadline=None, database=None, derandomize="SENTUNE_SCHEMA_SEED" not in os.environ, suppress_health_check=list(HealthCheck)
    )(given(requests)(lambda request: check(client, alone, request)))
    if "SENTUNE_SCHEMA_SEED" in os.environ:
        search = seed(int(os.environ["SENTUNE_SCHEMA_SEED"]))(search)
    search()


def test_the_known_hard_requests_pass_the_same_check(served):
    """The requests that broke the server before, always run (the generated ones may not hit them)."""
    client, alone = served
    for path, body in (
        ("/v1/embeddings", b'{"input": "a \\ud800 b"}'),
        ("/v1/embeddings", b'{"input": ["\\udfff", "ok"]}'),
        ("/search", b'{"query": "a \\ud800 b", "system": "bm25"}'),
        ("/search", b'{"query": "a man", "top_k": true}'),
        ("/search", b'{"query": "a man", "top_k": "3"}'),
        ("/search", b'{"query": "a\tman"}'),
        ("/v1/embeddings", b'{"input": [[1, 2, 3]]}'),
        ("/v1/embeddings", b'{"input": "a man", "dimensions": 1e400}'),
    ):
        for valid_path in VALID:
            check(client, alone, (path, body, "application/json", valid_path))


def test_the_served_schema_takes_the_request_models_and_describes_the_real_answers(served):
    """GET /openapi.json (none was served): each route's request body is its model, and real answers fit it."""
    client, alone = served
    assert SCHEMA["openapi"].startswith("3.") and client.get("/openapi.json").headers["content-type"] == "application/json"
    for path, model in MODELS.items():
        ref = SCHEMA["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        described = SCHEMA["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert described["properties"].keys() == model.model_json_schema()["properties"].keys(), path
        assert not answer_problems(SCHEMA, path, "post", 200, alone[path]), alone[path]
    answers = [
        ("/v1/embeddings", {"input": "a man", "encoding_format": "base64"}),
        ("/rerank", {"query": "a man", "texts": ["a man plays", "the dog"], "return_text": True}),  # TEI's list
        ("/rerank", {"query": "a man", "documents": ["a man plays"], "return_documents": True, "top_n": 1}),
        ("/search", {"query": "a man", "system": "bm25", "full_text": True}),
    ]
    for path, body in answers:
        answer = client.post(path, json=body)
        assert answer.status_code == 200 and not answer_problems(SCHEMA, path, "post", 200, answer.json()), answer.text[:300]
    health = client.get("/health")
    assert not answer_problems(SCHEMA, "/health", "get", 200, health.json())
    refused = client.post("/search", json={"query": "a man", "top": 3})
    assert refused.status_code == 400 and not answer_problems(SCHEMA, "/search", "post", 400, refused.json())
    assert problems({"results": [], "system": "bm25"}, SCHEMA["paths"]["/search"]["post"]["responses"]["200"]["content"]["application/json"]["schema"], SCHEMA)
