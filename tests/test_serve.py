"""`sentune serve` (sentune.serve) on the tiny model: a real server process on a free 127.0.0.1 port, started once for
the module, ranks as `sentune search` does, embeds as `sentune encode` does (also through the openai client), batches
concurrent requests into fewer forward passes with the same vectors, answers every bad input with one JSON 4xx while
valid requests go on, and refuses requests without its key. The options are refused before anything loads; a model
served without an index answers embeddings only; a request past the time limit gets 503."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import free_port
from test_adapt_retrieval import _toy_beir

from sentune.cli import main

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

REPO = Path(__file__).resolve().parents[1]
KEY = "test-key-of-this-module"
AUTH = {"Authorization": f"Bearer {KEY}"}
MAX_TOKENS = 24  # the served model's limit: the long sentences below pass it
SENTENCES = [
    "a man plays the guitar",
    "the dog runs in the park",
    "stock market price rises today",
    " ".join(["the big red car is on the street with a small blue ball"] * 4),  # over MAX_TOKENS: truncated
    "two kids eat food",
]


def server_environment() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "HF_HUB_OFFLINE": "1"}


def start_server(args: list[str], port: int, timeout: float = 180.0) -> subprocess.Popen:
    """`python -m sentune serve ARGS --port PORT`, once /health answers; its output goes to a log file (read on failure)."""
    log = open(Path(os.environ["SENTUNE_CACHE"]) / f"serve-{port}.log", "w+")  # closed by stop_server
    proc = subprocess.Popen(
        [sys.executable, "-m", "sentune", "serve", *args, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=server_environment()
    )
    proc.log = log  # type: ignore[attr-defined]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"the server ended with {proc.returncode}: {log.read()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise AssertionError(f"the server did not answer /health within {timeout:.0f} s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.log.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def served_model(_tiny_st, tmp_path_factory) -> Path:
    """The tiny BERT as a sentence-transformers folder that reads at most MAX_TOKENS tokens."""
    import copy

    folder = tmp_path_factory.mktemp("served-model")
    model = copy.deepcopy(_tiny_st)
    model.max_seq_length = MAX_TOKENS
    model.save(str(folder))
    return folder


@pytest.fixture(scope="module")
def toy_index(served_model, tmp_path_factory) -> tuple[Path, Path]:
    """(a hybrid index of the toy corpus, its folder of queries)."""
    root = tmp_path_factory.mktemp("serve-index")
    dev, _ = _toy_beir(root / "toy")
    index = root / "index"
    assert main(["index", "--model", str(served_model), "--corpus", str(dev / "corpus.jsonl"), "--out", str(index), "--quiet", "--fusion", "convex:0.4"]) == 0
    return index, dev


@pytest.fixture(scope="module")
def server(toy_index):
    port = free_port()
    proc = start_server([str(toy_index[0]), "--api-key", KEY, "--batch-wait-ms", "20", "--quiet"], port)
    yield f"http://127.0.0.1:{port}"
    stop_server(proc)


def post(server: str, path: str, body, headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{server}{path}", json=body, headers={**AUTH, **(headers or {})}, timeout=60)


def read_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    rows: dict[str, list[tuple[str, float]]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        rows.setdefault(qid, []).append((doc, float(score)))
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("system", ["hybrid", "dense", "bm25"])
def test_search_ranks_as_sentune_search(server, toy_index, tmp_path, system):
    index, dev = toy_index
    queries = [json.loads(line) for line in (dev / "queries.jsonl").read_text().splitlines()][:12]
    run = tmp_path / "run.txt"
    args = ["search", str(index), "--queries", str(dev / "queries.jsonl"), "--top", "7", "--run", str(run), "--quiet"]
    assert main([*args, "--system", system]) == 0
    expected = read_run(run)
    answer = post(server, "/search", {"queries": [q["text"] for q in queries], "top_k": 7, "system": system})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["system"] == system and body["took_ms"] > 0 and len(body["results"]) == len(queries)
    for query, result in zip(queries, body["results"], strict=True):
        assert result["query"] == query["text"]
        wanted = expected.get(query["_id"], [])  # BM25 returns only documents sharing a term: a query of stopwords has none
        assert len(wanted) == 7 or (system == "bm25" and len(wanted) < 7)
        assert [hit["id"] for hit in result["hits"]] == [doc for doc, _ in wanted]
        assert [hit["score"] for hit in result["hits"]] == pytest.approx([score for _, score in wanted], abs=1e-5)
        assert [hit["rank"] for hit in result["hits"]] == list(range(1, len(wanted) + 1))
    # one query a request, sent together: the same answers as in one batch (and as the CLI)
    with ThreadPoolExecutor(6) as pool:
        singles = list(pool.map(lambda q: post(server, "/search", {"query": q["text"], "top_k": 7, "system": system}), queries))
    for single, result in zip(singles, body["results"], strict=True):
        assert_same_hits(single.json()["results"][0]["hits"], result["hits"])


def assert_same_hits(hits: list[dict], expected: list[dict]) -> None:
    """The same documents in the same order, with the same scores up to float noise (a query encoded in another batch; the hybrid
    normalises by each query's score range, which magnifies it)."""
    assert [(h["id"], h["rank"], h["text"]) for h in hits] == [(h["id"], h["rank"], h["text"]) for h in expected]
    assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in expected], abs=1e-5)


@pytest.mark.slow
def test_search_defaults_snippets_and_depths(server, toy_index):
    index, _ = toy_index
    documents = {d["_id"]: d["text"] for d in map(json.loads, (index / "documents.jsonl").read_text().splitlines())}
    query = next(iter(documents.values())).split(".")[0]
    default = post(server, "/search", {"query": query}).json()
    assert default["system"] == "hybrid" and default["fusion"] == "convex, α = 0.4 on the dense scores"  # the index's own
    hits = default["results"][0]["hits"]
    assert len(hits) == 10 and all(hit["text"] == documents[hit["id"]] for hit in hits)  # short texts: whole
    # a deeper ranking starts with the shallower one; a depth past the corpus gives every document once
    deep = post(server, "/search", {"query": query, "top_k": 1000}).json()["results"][0]["hits"]
    assert_same_hits(deep[:10], hits)
    assert sorted(hit["id"] for hit in deep) == sorted(documents)
    from sentune.serve.protocol import SNIPPET_CHARS, snippet

    long = "word " * 200
    assert snippet(long, False).endswith("…") and len(snippet(long, False)) == SNIPPET_CHARS and snippet(long, True) == long
    assert snippet("short", False) == "short"


@pytest.mark.slow
def test_embeddings_equal_sentune_encode(server, served_model, tmp_path):
    text_file, out = tmp_path / "sentences.txt", tmp_path / "vectors.npy"
    text_file.write_text("\n".join(SENTENCES) + "\n")
    assert main(["encode", "--model", str(served_model), str(text_file), str(out), "--quiet"]) == 0
    expected = np.load(out)
    answer = post(server, "/v1/embeddings", {"input": SENTENCES, "model": "whatever-the-client-says"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "list" and body["model"] == served_model.name
    assert [(d["object"], d["index"]) for d in body["data"]] == [("embedding", i) for i in range(len(SENTENCES))]
    np.testing.assert_allclose(np.array([d["embedding"] for d in body["data"]]), expected, atol=1e-5)
    # the usage is the tokens the model read: each text's, special tokens included, up to its limit
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(served_model))
    lengths = [len(tokenizer(s)["input_ids"]) for s in SENTENCES]
    assert body["usage"] == {"prompt_tokens": sum(min(n, MAX_TOKENS) for n in lengths), "total_tokens": sum(min(n, MAX_TOKENS) for n in lengths)}
    # the over-long text is truncated, and said so (a field beside OpenAI's, and a header)
    assert body["truncated"] == [i for i, n in enumerate(lengths) if n > MAX_TOKENS] == [3]
    assert answer.headers["x-sentune-truncated"] == "3"
    # base64: the float32 values' little-endian bytes, as OpenAI sends them
    packed = post(server, "/v1/embeddings", {"input": SENTENCES[0], "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, expected[0], atol=1e-5)
    assert "truncated" not in packed


@pytest.mark.slow
def test_the_openai_client_works_unchanged(server, served_model, tmp_path):
    openai = pytest.importorskip("openai")
    text_file, out = tmp_path / "sentences.txt", tmp_path / "vectors.npy"
    text_file.write_text("\n".join(SENTENCES) + "\n")
    assert main(["encode", "--model", str(served_model), str(text_file), str(out), "--quiet"]) == 0
    client = openai.OpenAI(base_url=f"{server}/v1", api_key=KEY, max_retries=0)
    answer = client.embeddings.create(input=SENTENCES, model=served_model.name)  # the client asks for base64 and decodes it
    np.testing.assert_allclose(np.array([d.embedding for d in answer.data]), np.load(out), atol=1e-5)
    assert answer.usage.prompt_tokens > len(SENTENCES)
    refused = openai.OpenAI(base_url=f"{server}/v1", api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        refused.embeddings.create(input="a man", model=served_model.name)
    with pytest.raises(openai.BadRequestError, match="empty"):
        client.embeddings.create(input="", model=served_model.name)


def health(server: str) -> dict:
    return httpx.get(f"{server}/health", timeout=10).json()


@pytest.mark.slow
def test_concurrent_requests_share_forward_passes_and_get_one_by_one_vectors(server):
    texts = [f"{w} plays the {v}" for w in ("a man", "a woman", "the kid", "two dogs") for v in ("guitar", "piano", "ball", "food", "car", "street")]
    alone = [np.array(post(server, "/v1/embeddings", {"input": t}).json()["data"][0]["embedding"]) for t in texts[:4]]
    before = health(server)["batching"]["embeddings"]
    with ThreadPoolExecutor(len(texts)) as pool:
        answers = list(pool.map(lambda t: post(server, "/v1/embeddings", {"input": t}), texts))
    after = health(server)["batching"]["embeddings"]
    requests, passes = after["requests"] - before["requests"], after["forward_passes"] - before["forward_passes"]
    assert requests == len(texts) and 1 <= passes < requests, (requests, passes)
    together = [np.array(a.json()["data"][0]["embedding"]) for a in answers]
    np.testing.assert_allclose(np.array(together[:4]), np.array(alone), atol=1e-5)
    assert all(a.status_code == 200 for a in answers)


BIG = "word " * 210_000  # 1 MB of text: under the body limit, over --max-input-chars


BAD_REQUESTS = [
    # (what, path, body as bytes or JSON, expected status, words of the message)
    ("malformed JSON", "/search", b'{"query": "a man', 400, "not valid JSON"),
    ("a list for a body", "/search", b"[1, 2]", 400, "JSON object"),
    ("no query", "/search", {"top_k": 3}, 400, "either query"),
    ("both query and queries", "/search", {"query": "a", "queries": ["b"]}, 400, "either query"),
    ("an empty query", "/search", {"query": ""}, 400, "query: empty"),
    ("a blank query", "/search", {"query": "   "}, 400, "query: empty"),
    ("a 1 MB query", "/search", {"query": BIG}, 400, "--max-input-chars"),
    ("top_k 0", "/search", {"query": "a man", "top_k": 0}, 400, "top_k"),
    ("top_k 1001", "/search", {"query": "a man", "top_k": 1001}, 400, "top_k"),
    ("top_k not a number", "/search", {"query": "a man", "top_k": "ten"}, 400, "top_k"),
    ("an unknown system", "/search", {"query": "a man", "system": "semantic"}, 400, "system"),
    ("a misspelt field", "/search", {"query": "a man", "top": 3}, 400, "top"),
    ("a query that is not text", "/search", {"query": 42}, 400, "query"),
    ("queries over the limit", "/search", {"queries": ["a man"] * 257}, 400, "--max-batch-inputs"),
    ("an empty queries list", "/search", {"queries": []}, 400, "empty list"),
    ("no input", "/v1/embeddings", {"model": "m"}, 400, "input: required"),
    ("an empty input", "/v1/embeddings", {"input": ""}, 400, "input: empty"),
    ("an empty text in the list", "/v1/embeddings", {"input": ["a man", ""]}, 400, "input[1]: empty"),
    ("token ids", "/v1/embeddings", {"input": [1, 2, 3]}, 400, "token ids"),
    ("inputs over the limit", "/v1/embeddings", {"input": ["a man"] * 257}, 400, "--max-batch-inputs"),
    ("a 1 MB input", "/v1/embeddings", {"input": BIG}, 400, "--max-input-chars"),
    ("other dimensions", "/v1/embeddings", {"input": "a man", "dimensions": 7}, 400, "dimensions"),
    ("an unknown encoding", "/v1/embeddings", {"input": "a man", "encoding_format": "int8"}, 400, "encoding_format"),
    ("a body over the limit", "/v1/embeddings", {"input": ["word " * 100_000] * 5}, 413, "over 2,000,000 bytes"),
    ("an unknown path", "/v2/embeddings", {"input": "a man"}, 404, "Not Found"),
]


def send(server: str, path: str, body, headers: dict | None = None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{server}{path}", content=content, headers={**AUTH, "Content-Type": "application/json", **(headers or {})}, timeout=60)


@pytest.mark.slow
def test_every_bad_input_is_one_json_4xx_while_valid_requests_succeed(server):
    valid = {"queries": ["a man plays", "the dog runs"], "top_k": 3}
    expected = post(server, "/search", valid).json()["results"]
    with ThreadPoolExecutor(8) as pool:
        good = [pool.submit(post, server, "/search", valid) for _ in range(len(BAD_REQUESTS))]
        bad = [pool.submit(send, server, path, body) for _, path, body, _, _ in BAD_REQUESTS]
        for (what, _, _, status, words), future in zip(BAD_REQUESTS, bad, strict=True):
            answer = future.result()
            assert answer.status_code == status, (what, answer.status_code, answer.text[:300])
            error = answer.json()["error"]
            assert set(answer.json()) == {"error"} and isinstance(error["type"], str), what
            assert words in error["message"], (what, error["message"])
            assert len(error["message"]) < 300, (what, "one message, not the input echoed back")
        for future in good:
            assert future.result().status_code == 200
            for result, wanted in zip(future.result().json()["results"], expected, strict=True):
                assert_same_hits(result["hits"], wanted["hits"])
    # a body not declared JSON (curl -d without -H "Content-Type: application/json", a cross-site form) is refused
    plain = httpx.post(f"{server}/search", content=json.dumps(valid), headers={**AUTH, "Content-Type": "application/x-www-form-urlencoded"}, timeout=60)
    assert plain.status_code == 415 and "Content-Type: application/json" in plain.json()["error"]["message"]
    # a body sent in chunks, without a Content-Length, is cut off at the limit as it arrives
    chunked = httpx.post(f"{server}/v1/embeddings", content=iter([b"x" * 1_000_000] * 3), headers={**AUTH, "Content-Type": "application/json"}, timeout=60)
    assert chunked.status_code == 413 and "over 2,000,000 bytes" in chunked.json()["error"]["message"]
    wrong_method = httpx.get(f"{server}/search", headers=AUTH, timeout=10)
    assert wrong_method.status_code == 405 and "GET /search" in wrong_method.json()["error"]["message"]
    assert health(server)["status"] == "ok"


@pytest.mark.slow
def test_the_key_is_asked_for_on_every_request_but_health_and_the_page(server, served_model):
    for path, body in (("/search", {"query": "a man"}), ("/v1/embeddings", {"input": "a man"})):
        missing = httpx.post(f"{server}{path}", json=body, timeout=10)
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error", missing.text
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = httpx.post(f"{server}{path}", json=body, headers={"Authorization": "Bearer not-the-key"}, timeout=10)
        assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "wrong API key"
        not_bearer = httpx.post(f"{server}{path}", json=body, headers={"Authorization": KEY}, timeout=10)
        assert not_bearer.status_code == 401
    # a body over the limit without the key: refused for the key, before anything is read
    assert httpx.post(f"{server}/v1/embeddings", content=b"x" * 3_000_000, timeout=30).status_code == 401
    status = health(server)
    assert status["auth"] is True and status["index"]["documents"] == 150 and status["index"]["system"] == "hybrid"
    assert status["model"] == served_model.name and status["backend"] == "torch" and status["max_tokens"] == MAX_TOKENS
    page = httpx.get(f"{server}/", timeout=10)
    assert page.status_code == 200 and "<title>sentune search</title>" in page.text and "http" not in page.text.split("<script>")[1]  # no outside assets


def test_the_options_are_refused_before_anything_loads(toy_index, tmp_path, capsys):
    index, dev = toy_index
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    settings = json.loads((index / "index.json").read_text())
    (unfinished / "index.json").write_text(json.dumps({**settings, "complete": False}))
    cases = [
        ([str(index), "--host", "0.0.0.0"], "--api-key"),
        ([str(index), "--host", "192.0.2.1", "--api-key", ""], "empty"),
        ([str(index), "--port", "0"], "--port 0"),
        ([str(index), "--port", str(taken.getsockname()[1])], "cannot listen"),
        ([str(index), "--workers", "0"], "--workers 0"),
        ([str(index), "--max-batch", "0"], "--max-batch 0"),
        ([str(index), "--timeout-s", "0"], "--timeout-s 0"),
        ([str(index), "--max-body-mb", "0"], "--max-body-mb 0"),
        ([str(tmp_path / "nowhere")], "no such folder"),
        ([str(dev)], "neither an index"),
        ([str(unfinished)], "did not finish"),
    ]
    try:
        for args, words in cases:
            capsys.readouterr()
            assert main(["serve", *args]) == 2, args
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and words in err, (args, err)
    finally:
        taken.close()
    # torch is not even imported for a refused address (a process of its own: this one has torch already)
    code = "import sys; from sentune.cli import main; rc = main(['serve', sys.argv[1], '--host', '0.0.0.0']); print(rc, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code, str(index)], capture_output=True, text=True, env=server_environment(), timeout=120)
    assert out.stdout.split() == ["2", "False"], out.stderr


def test_what_is_served_is_told_from_the_folder(toy_index, served_model, tmp_path, monkeypatch):
    """An index, an adapt run's folder with an index (its index) or without one (its model), a model folder or name."""
    import shutil

    from sentune.cli import build_parser
    from sentune.cli.serve import settings_from
    from sentune.errors import UserError
    from sentune.serve.settings import what_to_serve

    index, _ = toy_index
    assert what_to_serve(str(index)) == (str(index), None)
    assert what_to_serve(str(served_model)) == (None, str(served_model))
    run = tmp_path / "adapt-run"
    shutil.copytree(served_model, run / "model")
    (run / "adapt.json").write_text("{}")
    assert what_to_serve(str(run)) == (None, str(run / "model"))  # a run on pairs saves a model and no index
    shutil.copytree(index, run / "index-files")
    for path in (run / "index-files").iterdir():
        path.rename(run / path.name)
    assert what_to_serve(str(run)) == (str(run), None)  # a search run's folder holds its index
    shutil.rmtree(run / "model")
    (run / "index.json").unlink()
    with pytest.raises(UserError, match="neither an index"):
        what_to_serve(str(run))
    # the key may come from the environment
    monkeypatch.setenv("SENTUNE_API_KEY", "from-the-environment")
    settings = settings_from(build_parser().parse_args(["serve", str(index), "--port", str(free_port())]))
    assert settings.api_key == "from-the-environment" and settings.index == str(index) and settings.device == "cpu"


def test_a_model_without_an_index_answers_embeddings_only(served_model):
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings

    settings = ServeSettings(target=str(served_model), index=None, model=str(served_model))
    with TestClient(create_app(settings, Engine(settings))) as client:
        refused = client.post("/search", json={"query": "a man"})
        assert refused.status_code == 404 and "not an index" in refused.json()["error"]["message"]
        answer = client.post("/v1/embeddings", json={"input": ["a man", "a dog"]})
        assert answer.status_code == 200 and len(answer.json()["data"]) == 2
        status = client.get("/health").json()
        assert status["index"] is None and status["auth"] is False and status["dimension"] == 32


def test_an_index_without_a_fusion_serves_dense_and_bm25_and_refuses_the_hybrid(served_model, toy_index, tmp_path):
    from fastapi.testclient import TestClient

    from sentune.cli import main
    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings

    _, dev = toy_index
    dense = tmp_path / "dense-index"
    assert main(["index", "--model", str(served_model), "--corpus", str(dev / "corpus.jsonl"), "--out", str(dense), "--quiet"]) == 0
    settings = ServeSettings(target=str(dense), index=str(dense), model=None)
    with TestClient(create_app(settings, Engine(settings))) as client:
        refused = client.post("/search", json={"query": "a man", "system": "hybrid"})
        assert refused.status_code == 400 and "no fusion weight" in refused.json()["error"]["message"]
        for system in ("dense", "bm25"):
            answer = client.post("/search", json={"query": "a man", "system": system})
            assert answer.status_code == 200 and answer.json()["system"] == system and answer.json()["fusion"] is None
        assert client.post("/search", json={"query": "a man"}).json()["system"] == "dense"  # the index's own


class SlowEngine:
    """An engine whose forward pass takes `seconds`: what a server behind a long queue looks like."""

    views: dict = {}
    name, dimension = "slow", 3

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def embed(self, texts):
        from sentune.serve.engine import Embedded

        time.sleep(self.seconds)
        return [Embedded(np.ones(3, dtype=np.float32), 1, False) for _ in texts]

    def search(self, items):
        return []

    def health(self) -> dict:
        return {"model": self.name}


def test_a_request_past_the_time_limit_gets_503_and_the_server_goes_on():
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    settings = ServeSettings(target="slow", index=None, model="slow", timeout_s=0.3)
    engine = SlowEngine(1.0)
    with TestClient(create_app(settings, engine)) as client:
        late = client.post("/v1/embeddings", json={"input": "a man"})
        assert late.status_code == 503 and "--timeout-s" in late.json()["error"]["message"]
        engine.seconds = 0.0
        time.sleep(1.0)  # the late request's batch finishes in the worker thread
        assert client.post("/v1/embeddings", json={"input": "a man"}).status_code == 200


@pytest.mark.slow
def test_workers_map_the_same_vectors_pages(toy_index):
    """Two worker processes: each maps vectors.npy, BM25's score matrix and the documents' offsets and id order, and
    the pages are shared between them (the page cache's), not copied into each process; both answer as one process
    does."""
    index, _ = toy_index
    port = free_port()
    proc = start_server([str(index), "--workers", "2", "--api-key", KEY, "--quiet"], port, timeout=300)
    try:
        server = f"http://127.0.0.1:{port}"
        mapped = ["vectors.npy", "bm25/data.csc.index.npy", "documents.offsets.npy", "documents.order.npy"]
        files = [str((index / name).resolve()) for name in mapped]
        deadline = time.time() + 120
        workers: list[int] = []
        while time.time() < deadline:  # until both workers have mapped and read both files (the second may still load)
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            workers = [int(pid) for pid in children if all(smaps_of(int(pid), f).get("Rss", 0) > 0 for f in files)]
            if len(workers) == 2:
                break
            time.sleep(0.5)
        assert len(workers) == 2, workers
        for pid in workers:
            for shared in files:
                mapping = smaps_of(pid, shared)
                # shared pages (dirty while a file just written is not yet on disk), none of them private to one worker
                assert mapping["Shared_Clean"] + mapping["Shared_Dirty"] == mapping["Rss"], (shared, mapping)
                assert mapping["Private_Clean"] == mapping["Private_Dirty"] == 0, (shared, mapping)
        answers = {json.dumps(post(server, "/search", {"query": "a man plays", "top_k": 5}).json()["results"]) for _ in range(6)}
        assert len(answers) == 1
    finally:
        stop_server(proc)


def smaps_of(pid: int, path: str) -> dict[str, int]:
    """The kB counters of the mapping of `path` in /proc/PID/smaps."""
    counters: dict[str, int] = {}
    inside = False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = fields[-1] == path
        elif inside and fields[0].endswith(":") and len(fields) >= 2 and fields[1].isdigit():
            counters[fields[0][:-1]] = counters.get(fields[0][:-1], 0) + int(fields[1])
    return counters


def run_batcher(jobs: list[list[int]], *, max_batch: int, wait_s: float, fail_on: int | None = None) -> tuple[list, list[list[int]]]:
    """Submit `jobs` (lists of numbers) to a MicroBatcher at once; (each job's answer or exception, the batches `run` saw)."""
    import asyncio

    from sentune.serve.batching import MicroBatcher

    seen: list[list[int]] = []

    def run(items):
        seen.append(list(items))
        if fail_on in items:
            raise ValueError(f"cannot do {fail_on}")
        return [x * 10 for x in items]

    async def scenario():
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(run, executor, max_batch=max_batch, wait_s=wait_s)
            batcher.start()
            answers = await asyncio.gather(*(batcher.submit(job) for job in jobs), return_exceptions=True)
            await batcher.stop()
            assert batcher.requests == len(jobs) and batcher.forward_passes == len(seen)
            return answers

    return asyncio.run(scenario()), seen


def test_the_batcher_joins_requests_splits_a_long_one_and_keeps_their_order():
    answers, seen = run_batcher([[1], [2, 3], [4], [5, 6, 7, 8, 9], [10]], max_batch=4, wait_s=0.05)
    assert answers == [[10], [20, 30], [40], [50, 60, 70, 80, 90], [100]]
    # the shortest first; [2, 3] is not split: it waits for the next batch; the 5-text request is split to fill them
    assert seen == [[1, 4, 10, 5], [2, 3, 6, 7], [8, 9]]
    answers, seen = run_batcher([[1], [2], [3]], max_batch=64, wait_s=0.0)
    assert answers == [[10], [20], [30]] and sum(map(len, seen)) == 3


def test_after_a_shared_batch_the_next_waits_for_company_only_until_as_many_texts_are_back():
    """Two clients: once their shared batch is answered, their next two requests run as soon as both are back, not
    wait_s later (at 4 connections every batch paid the whole wait); one back alone waits wait_s for the other."""
    import asyncio

    from sentune.serve.batching import MicroBatcher

    seen: list[list[int]] = []

    def run(items):
        seen.append(list(items))
        return items

    async def scenario(wait_s: float) -> tuple[float, float]:
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(run, executor, max_batch=64, wait_s=wait_s)
            batcher.start()
            await asyncio.gather(batcher.submit([1]), batcher.submit([2]))  # one shared batch: others are sending
            began = time.monotonic()
            await asyncio.gather(batcher.submit([3]), batcher.submit([4]))  # both back: no wait for a 64-text batch
            both = time.monotonic() - began
            began = time.monotonic()
            await batcher.submit([5])  # one of the two back: it waits for the other up to wait_s
            alone = time.monotonic() - began
            await batcher.stop()
            return both, alone

    both, alone = asyncio.run(scenario(wait_s=2.0 / 3))
    assert seen == [[1, 2], [3, 4], [5]]
    assert both < 1.0 / 3 <= 2.0 / 3 <= alone  # (before: both waited the whole 2/3 s too)


def test_a_request_that_fails_its_batch_fails_alone():
    """[2] raises in a batch it shares with [1]: each is computed alone again, and only [2] gets the error (before,
    every request of the batch got it)."""
    answers, seen = run_batcher([[1], [2], [3, 4], [5]], max_batch=2, wait_s=0.05, fail_on=2)
    assert seen == [[1, 2], [1], [2], [5], [3, 4]]  # the shortest first, [3, 4] whole; the failed batch's requests one by one
    assert answers[0] == [10] and type(answers[1]).__name__ == "ValueError" and answers[2:] == [[30, 40], [50]]


def test_a_request_given_up_before_its_batch_runs_is_not_computed():
    import asyncio

    from sentune.serve.batching import MicroBatcher

    seen: list[list[int]] = []

    def run(items):
        seen.append(list(items))
        time.sleep(0.2)
        return items

    async def scenario():
        with ThreadPoolExecutor(1) as executor:
            batcher = MicroBatcher(run, executor, max_batch=1, wait_s=0.0)
            batcher.start()
            first = asyncio.ensure_future(batcher.submit([1]))
            await asyncio.sleep(0.05)  # [1] is running
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(batcher.submit([2]), 0.05)  # gives up while it waits
            third = await batcher.submit([3])
            await batcher.stop()
            return await first, third

    assert asyncio.run(scenario()) == ([1], [3])
    assert seen == [[1], [3]]


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_the_onnx_backends_serve_the_exported_graph_as_sentune_encode_runs_it(toy_index, served_model, tmp_path, backend):
    pytest.importorskip("onnxruntime")
    from fastapi.testclient import TestClient
    from sentence_transformers import SentenceTransformer

    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings

    text_file, out = tmp_path / "sentences.txt", tmp_path / "vectors.npy"
    text_file.write_text("\n".join(SENTENCES) + "\n")
    assert main(["encode", "--model", str(served_model), "--backend", backend, str(text_file), str(out), "--quiet"]) == 0
    settings = ServeSettings(target=str(toy_index[0]), index=str(toy_index[0]), model=None, backend=backend)
    engine = Engine(settings)
    assert engine.runtime.backend == backend and all(view.runtime is engine.runtime for view in engine.views.values())
    assert set(vars(engine.model)) == set(vars(SentenceTransformer(str(served_model), device="cpu")))  # no graph set on the model
    with TestClient(create_app(settings, engine)) as client:
        answer = client.post("/v1/embeddings", json={"input": SENTENCES}).json()  # one batch, as the file's: int8 scales activations per batch
        np.testing.assert_allclose(np.array([d["embedding"] for d in answer["data"]]), np.load(out), atol=1e-5)
        assert client.get("/health").json()["backend"] == backend
        hits = client.post("/search", json={"query": SENTENCES[0], "system": "dense", "top_k": 3}).json()["results"][0]["hits"]
        assert len(hits) == 3 and hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
