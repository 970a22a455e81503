"""`sentune serve --reranker` (sentune.serve.rerank) on a tiny randomly initialised cross-encoder built from a config:
POST /rerank in infinity's and text-embeddings-inference's shapes orders and scores as CrossEncoder.predict does,
/search answers the system's candidates in the cross-encoder's order, concurrent requests share forward passes, and
every bad request is one 4xx while the next valid one is answered."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_serve
from conftest import free_port

from sentune.cli import main
from sentune.errors import UserError

pytest.importorskip("fastapi")
pytest.importorskip("httpx")  # fastapi's TestClient
pytest.importorskip("bm25s")

# test_serve's fixtures: the tiny model as it is served, and a hybrid index of the toy corpus with its queries
served_model, toy_index = test_serve.served_model, test_serve.toy_index
RERANK_TOP = 12
QUERY = "a man plays the guitar"
DOCUMENTS = ["the dog runs in the park", "a man plays the guitar in the street", "stock market price rises today", "two kids eat food", "a woman"]


def cross_encoder_folder(tokenizer_dir: Path, folder: Path, labels: int = 1) -> Path:
    """A BERT sequence classifier from a config, random weights (wide, so that scores differ well beyond float noise)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    tokenizer = BertTokenizerFast.from_pretrained(str(tokenizer_dir))
    torch.manual_seed(1)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=labels,
        initializer_range=0.5,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def cross_encoder(tiny_model_dir, tmp_path_factory) -> Path:
    return cross_encoder_folder(tiny_model_dir, tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture(scope="module")
def reference(cross_encoder):
    """sentence-transformers' own CrossEncoder on the same folder: the naive reference."""
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(cross_encoder), device="cpu")


@pytest.fixture(scope="module")
def engine(toy_index):
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings

    return Engine(ServeSettings(target=str(toy_index[0]), index=str(toy_index[0]), model=None))


def app_for(engine, toy_index, reranker: Path | None, **options):
    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    index = str(toy_index[0])
    reranking = {"reranker": str(reranker), "rerank_top": RERANK_TOP} if reranker else {}
    return create_app(ServeSettings(target=index, index=index, model=None, **reranking, **options), engine)


@pytest.fixture(scope="module")
def client(engine, toy_index, cross_encoder):
    from fastapi.testclient import TestClient

    with TestClient(app_for(engine, toy_index, cross_encoder, batch_wait_ms=20.0)) as client:
        yield client


def expected_order(scores) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: -scores[i])


def test_rerank_orders_and_scores_as_the_cross_encoder(client, reference):
    pairs = [(QUERY, d) for d in DOCUMENTS]
    scores = reference.predict(pairs)
    assert np.ptp(scores) > 1e-3  # distinct scores: the order is the model's, not float noise
    body = {"query": QUERY, "documents": DOCUMENTS, "return_documents": True, "model": "whatever-the-client-names"}
    answer = client.post("/rerank", json=body)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["object"] == "rerank" and result["model"] == "tiny-cross-encoder0" and result["id"].startswith("sentune-")
    assert [r["index"] for r in result["results"]] == expected_order(scores)
    assert [r["relevance_score"] for r in result["results"]] == pytest.approx([float(scores[i]) for i in expected_order(scores)], abs=1e-5)
    assert [r["document"] for r in result["results"]] == [DOCUMENTS[i] for i in expected_order(scores)]
    tokens = sum(len(ids) for ids in reference.tokenizer([QUERY] * len(DOCUMENTS), DOCUMENTS)["input_ids"])
    assert result["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens} and "truncated" not in result
    # top_n keeps the best; raw_scores are the logits (predict without its sigmoid); no documents unless asked
    top = client.post("/rerank", json={"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "raw_scores": True}).json()["results"]
    raw = reference.predict(pairs, activation_fn=__import__("torch").nn.Identity())
    assert [r["index"] for r in top] == expected_order(scores)[:2] and [r["document"] for r in top] == [None, None]
    assert [r["relevance_score"] for r in top] == pytest.approx([float(raw[i]) for i in expected_order(scores)[:2]], abs=1e-4)


def test_rerank_in_text_embeddings_inference_shape(client, reference):
    scores = reference.predict([(QUERY, d) for d in DOCUMENTS])
    answer = client.post("/rerank", json={"query": QUERY, "texts": DOCUMENTS, "return_text": True, "truncate": True})
    assert answer.status_code == 200, answer.text
    ranks = answer.json()
    assert isinstance(ranks, list) and [r["index"] for r in ranks] == expected_order(scores)
    assert [r["score"] for r in ranks] == pytest.approx([float(scores[i]) for i in expected_order(scores)], abs=1e-5)
    assert [r["text"] for r in ranks] == [DOCUMENTS[i] for i in expected_order(scores)]
    assert "text" not in client.post("/rerank", json={"query": QUERY, "texts": DOCUMENTS[:2]}).json()[0]


def test_a_pair_longer_than_the_model_reads_is_truncated_and_said_so(client, reference):
    long = " ".join(["the big red car is on the street with a small blue ball"] * 8)  # past its 64 positions
    answer = client.post("/rerank", json={"query": QUERY, "documents": ["a dog", long]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["truncated"] == [1] and answer.headers["x-sentune-truncated"] == "1"
    scores = reference.predict([(QUERY, "a dog"), (QUERY, long)])
    assert sorted(r["relevance_score"] for r in answer.json()["results"]) == pytest.approx(sorted(map(float, scores)), abs=1e-5)


def test_search_answers_the_candidates_in_the_cross_encoders_order(client, engine, toy_index, reference):
    from fastapi.testclient import TestClient

    queries = [json.loads(line)["text"] for line in (toy_index[1] / "queries.jsonl").read_text().splitlines()][:6]
    with TestClient(app_for(engine, toy_index, None)) as plain:
        candidates = plain.post("/search", json={"queries": queries, "top_k": RERANK_TOP, "full_text": True, "system": "hybrid"}).json()["results"]
        assert plain.post("/search", json={"query": queries[0]}).json()["reranker"] is None  # the system's own order and scores
    answer = client.post("/search", json={"queries": queries, "top_k": 5, "full_text": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["system"] == "hybrid" and answer.json()["reranker"] == "tiny-cross-encoder0"
    for query, first, reranked in zip(queries, candidates, answer.json()["results"], strict=True):
        assert len(first["hits"]) == RERANK_TOP
        scores = reference.predict([(query, hit["text"]) for hit in first["hits"]])
        order = expected_order(scores)[:5]
        assert [hit["id"] for hit in reranked["hits"]] == [first["hits"][i]["id"] for i in order]
        assert [hit["score"] for hit in reranked["hits"]] == pytest.approx([float(scores[i]) for i in order], abs=1e-5)
        assert [hit["rank"] for hit in reranked["hits"]] == [1, 2, 3, 4, 5]
    deep = client.post("/search", json={"query": queries[0], "top_k": RERANK_TOP + 1})
    assert deep.status_code == 400 and "--rerank-top" in deep.json()["error"]["message"] and deep.json()["error"]["param"] == "top_k"


def test_concurrent_requests_share_forward_passes_and_get_their_own_answers(client, reference):
    requests = [{"query": QUERY, "documents": DOCUMENTS[i:] + DOCUMENTS[:i]} for i in range(len(DOCUMENTS))] * 3
    batcher = client.app.state.service.reranking.batcher
    passes, before = batcher.forward_passes, batcher.requests
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda body: client.post("/rerank", json=body), requests))
    assert batcher.requests - before == len(requests) and batcher.forward_passes - passes < len(requests)
    assert 'sentune_batch_size_count{batcher="rerank"}' in client.get("/metrics").text
    status = client.get("/health").json()["reranker"]
    assert status["model"] == "tiny-cross-encoder0" and status["rerank_top"] == RERANK_TOP and status["max_tokens"] == 64
    assert status["batching"]["requests"] == batcher.requests and status["batching"]["forward_passes"] == batcher.forward_passes
    for body, answer in zip(requests, answers, strict=True):
        assert answer.status_code == 200, answer.text
        scores = reference.predict([(QUERY, d) for d in body["documents"]])
        assert [r["index"] for r in answer.json()["results"]] == expected_order(scores)


@pytest.mark.slow  # seconds of waiting: in the slow selection, so plain `pytest -q` stays short
def test_a_full_queue_is_refused_at_once_and_a_late_answer_is_a_503(engine, toy_index, cross_encoder):
    import threading
    import time

    from fastapi.testclient import TestClient

    with TestClient(app_for(engine, toy_index, cross_encoder, max_queue=2, timeout_s=3.0, batch_wait_ms=0.0)) as slow:
        batcher = slow.app.state.service.reranking.batcher
        score, started, release = batcher.run, threading.Event(), threading.Event()
        batcher.run = lambda pairs: (started.set(), release.wait(30), score(pairs))[2]  # a forward pass held until released
        with ThreadPoolExecutor(2) as pool:
            running = pool.submit(slow.post, "/rerank", json={"query": QUERY, "documents": DOCUMENTS[:1]})
            assert started.wait(30)
            waiting = pool.submit(slow.post, "/rerank", json={"query": QUERY, "documents": DOCUMENTS[:4]})  # 2 requests in: the queue is full
            deadline = time.monotonic() + 30
            while batcher.pending < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            refused = slow.post("/rerank", json={"query": QUERY, "documents": DOCUMENTS[:1]})
            release.set()
            assert refused.status_code == 503, refused.text
            assert refused.headers["retry-after"] == "1" and "--max-queue" in refused.json()["error"]["message"]
            assert running.result().status_code == 200 and waiting.result().status_code == 200
        release.clear()
        late = slow.post("/rerank", json={"query": QUERY, "documents": DOCUMENTS})  # held past --timeout-s
        release.set()
        assert late.status_code == 503 and "--timeout-s" in late.json()["error"]["message"]


BAD = [
    ({"documents": DOCUMENTS}, "query: required"),
    ({"query": ["a"], "documents": DOCUMENTS}, "query: a string"),
    ({"query": "", "documents": DOCUMENTS}, "query: empty"),
    ({"query": QUERY}, "give documents"),
    ({"query": QUERY, "documents": DOCUMENTS, "texts": DOCUMENTS}, "not both"),
    ({"query": QUERY, "documents": []}, "documents: an empty list"),
    ({"query": QUERY, "documents": ["a dog", 3]}, "documents[1]: a string"),
    ({"query": QUERY, "documents": ["a dog", "  "]}, "documents[1]: empty"),
    ({"query": QUERY, "documents": "a dog"}, "documents"),
    ({"query": QUERY, "documents": DOCUMENTS, "top_n": 0}, "top_n"),
    ({"query": QUERY, "documents": DOCUMENTS, "top_n": "2"}, "top_n"),
    ({"query": QUERY, "documents": DOCUMENTS, "return_documents": "yes"}, "return_documents"),
    ({"query": QUERY, "texts": DOCUMENTS, "truncation_direction": "Left"}, "truncation_direction"),
    ({"query": QUERY, "documents": ["a dog"] * 257}, "at most 256"),
    ({"query": QUERY, "documents": ["a" * 100_001]}, "--max-input-chars"),
]


def test_every_bad_request_is_one_400_and_the_next_one_is_answered(client):
    for body, message in BAD:
        answer = client.post("/rerank", json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert message in answer.json()["error"]["message"], (message, answer.json())
    broken = client.post("/rerank", content=b'{"query": ', headers={"content-type": "application/json"})
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]
    assert client.post("/rerank", json={"query": QUERY, "documents": DOCUMENTS}).status_code == 200


def test_without_a_reranker_rerank_says_how_to_get_one(engine, toy_index):
    from fastapi.testclient import TestClient

    with TestClient(app_for(engine, toy_index, None)) as plain:
        answer = plain.post("/rerank", json={"query": QUERY, "documents": DOCUMENTS})
        assert answer.status_code == 404 and "--reranker" in answer.json()["error"]["message"]
        assert plain.get("/health").json()["reranker"] is None
        assert plain.post("/search", json={"query": QUERY, "top_k": RERANK_TOP + 1}).status_code == 200  # no reranking depth to keep to


def test_the_reranker_option_is_checked_before_anything_loads(cross_encoder, reference, tiny_model_dir, toy_index, tmp_path):
    from sentune.cli import build_parser
    from sentune.cli.serve import settings_from
    from sentune.serve.rerank import Reranker, check_reranker

    def settings(*extra):
        return settings_from(build_parser().parse_args(["serve", str(toy_index[0]), "--port", str(free_port()), *extra]))

    assert settings("--reranker", str(cross_encoder), "--rerank-top", "7").reranker == str(cross_encoder)
    with pytest.raises(UserError, match=r"--reranker .*not a cross-encoder \(BertModel"):  # a bi-encoder would rank at random
        check_reranker(str(tiny_model_dir))
    with pytest.raises(UserError, match="--reranker .*no such folder"):
        check_reranker(str(tmp_path / "missing"))
    with pytest.raises(UserError, match="--rerank-top 0: at least 1"):
        settings("--reranker", str(cross_encoder), "--rerank-top", "0")
    saved = tmp_path / "saved"
    reference.save(str(saved))  # sentence-transformers' own folder layout
    assert check_reranker(str(saved)) == str(saved)
    two = cross_encoder_folder(tiny_model_dir, tmp_path / "two-labels", labels=2)
    with pytest.raises(UserError, match="2 labels"):
        Reranker(str(check_reranker(str(two))))


def test_the_command_refuses_a_bi_encoder_as_reranker(tiny_model_dir, toy_index, capsys):
    assert main(["serve", str(toy_index[0]), "--reranker", str(tiny_model_dir), "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "not a cross-encoder" in err and "Traceback" not in err


@pytest.mark.slow
def test_no_generated_rerank_request_gets_a_5xx_nor_harms_a_valid_one_beside_it(client):
    """The property tests/test_serve_schema.py checks for the other routes, over bodies generated from RerankRequest (and
    /search's, reranked here): no 5xx, every refusal one JSON error, the valid request beside it answered as alone."""
    hypothesis = pytest.importorskip("hypothesis")
    import test_serve_schema

    from sentune.serve.protocol import SearchRequest
    from sentune.serve.rerank import RerankRequest

    valid = {"query": QUERY, "documents": DOCUMENTS}
    alone = [r["index"] for r in client.post("/rerank", json=valid).json()["results"]]
    st = hypothesis.strategies
    # a valid body with one field replaced by a generated value (of its type or any JSON), left out or added: past the
    # first checks, down to the scoring; and bodies generated whole, as tests/test_serve_schema.py generates them
    fields = RerankRequest.model_fields
    one_off = st.tuples(st.sampled_from([*fields, "stray"]), st.booleans()).flatmap(
        lambda f: st.tuples(st.just(f[0]), st.just(f[1]), test_serve_schema.field_values(fields[f[0]].annotation if f[0] in fields else Any))
    )
    near = st.tuples(st.sampled_from([valid, {"query": QUERY, "texts": DOCUMENTS}]), one_off).map(
        lambda v: json.dumps({k: x for k, x in v[0].items() if not (v[1][1] and k == v[1][0])} | ({} if v[1][1] else {v[1][0]: v[1][2]})).encode()
    )
    generated = st.tuples(st.just("/rerank"), near) | st.sampled_from([("/rerank", RerankRequest), ("/search", SearchRequest)]).flatmap(
        lambda route: st.tuples(st.just(route[0]), test_serve_schema.bodies(route[1]))
    )

    def check(request) -> None:
        path, body = request
        with ThreadPoolExecutor(2) as pool:  # at the same moment: both in one batch when both are valid
            answer = pool.submit(client.post, path, content=body, headers={"content-type": "application/json"})
            good = pool.submit(client.post, "/rerank", json=valid)
            answer, good = answer.result(), good.result()
        assert answer.status_code < 500, (path, body[:200], answer.status_code, answer.text[:300])
        if answer.status_code >= 400:
            assert set(answer.json()) == {"error"} and isinstance(answer.json()["error"]["message"], str), answer.text[:300]
        assert good.status_code == 200 and [r["index"] for r in good.json()["results"]] == alone, good.text[:300]

    examples = int(os.environ.get("SENTUNE_SCHEMA_EXAMPLES", "40"))
    search = hypothesis.settings(max_examples=examples, deadline=None, database=None, derandomize=True, suppress_health_check=list(hypothesis.HealthCheck))
    search(hypothesis.given(generated)(check))()


def test_serve_app_takes_a_reranker_for_a_users_own_app(cross_encoder, tiny_model_dir, toy_index, reference):
    """sentune.serve_app (the app to mount in one's own) reranks as `sentune serve --reranker` does, and checks it alike."""
    from fastapi.testclient import TestClient

    from sentune import serve_app

    with pytest.raises(UserError, match="not a cross-encoder"):
        serve_app(toy_index[0], reranker=tiny_model_dir)
    with TestClient(serve_app(toy_index[0], reranker=cross_encoder, rerank_top=5)) as client:
        answer = client.post("/rerank", json={"query": QUERY, "documents": DOCUMENTS})
        assert answer.status_code == 200, answer.text
        assert [r["index"] for r in answer.json()["results"]] == expected_order(reference.predict([(QUERY, d) for d in DOCUMENTS]))
        assert client.get("/health").json()["reranker"]["rerank_top"] == 5
