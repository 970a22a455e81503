"""`sentune serve` where one request must not harm others and a browser must not reach a keyless server: a lone
surrogate in a request is read as U+FFFD (never a 500, never a failure of the requests batched with it); a keyless
server answers only its loopback Host names (DNS rebinding) and JSON bodies only (a cross-site "simple" request); a 500
tells no exception text; top_k is a strict integer; a JSON error says where once. On the tiny model and the toy index
of tests/test_serve.py, served in this process (TestClient) with the settings `sentune serve` makes from its options."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from test_serve import served_model, toy_index  # noqa: F401 (fixtures)

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("bm25s")

PORT = 8765  # what the settings say; TestClient never opens it
SURROGATE = b'"a \\ud800 b"'  # valid JSON, no text: a lone UTF-16 surrogate


def cli_settings(*args: str):
    """ServeSettings as `sentune serve ARGS` makes them (the port is not bound: check_address is the CLI's)."""
    from unittest import mock

    from sentune.cli.app import build_parser
    from sentune.cli.serve import settings_from

    with mock.patch("sentune.serve.settings.check_address"):
        return settings_from(build_parser().parse_args(["serve", *args, "--port", str(PORT)]))


@pytest.fixture(scope="module")
def app(toy_index):  # noqa: F811
    from sentune.serve.app import create_app
    from sentune.serve.engine import Engine

    settings = cli_settings(str(toy_index[0]), "--batch-wait-ms", "50")
    return create_app(settings, Engine(settings))


@pytest.fixture(scope="module")
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app, base_url=f"http://127.0.0.1:{PORT}") as test_client:
        yield test_client


def raw_post(client, path: str, body: bytes, content_type: str | None = "application/json", **headers):
    if content_type is not None:
        headers["content-type"] = content_type
    return client.post(path, content=body, headers=headers)


def test_a_lone_surrogate_is_read_as_the_replacement_character_and_spares_its_batch(client):
    expected = client.post("/v1/embeddings", json={"input": "a \ufffd b"}).json()["data"][0]["embedding"]
    good = {"input": ["the dog runs in the park"]}
    with ThreadPoolExecutor(8) as pool:  # sent together: the batcher computes them in one forward pass (50 ms wait)
        bad = [pool.submit(raw_post, client, "/v1/embeddings", b'{"input": ' + SURROGATE + b"}") for _ in range(2)]
        others = [pool.submit(client.post, "/v1/embeddings", json=good) for _ in range(6)]
        for future in bad:
            answer = future.result()
            assert answer.status_code == 200, answer.text
            assert np.allclose(answer.json()["data"][0]["embedding"], expected, atol=1e-6)
        for future in others:
            assert future.result().status_code == 200, future.result().text
    listed = raw_post(client, "/v1/embeddings", b'{"input": ["ok", ' + SURROGATE + b', "\\udc80\\ud83d\\ude00"]}')
    assert listed.status_code == 200 and len(listed.json()["data"]) == 3
    searched = raw_post(client, "/search", b'{"queries": [' + SURROGATE + b', "the dog"], "top_k": 2}')
    assert searched.status_code == 200, searched.text
    assert [r["query"] for r in searched.json()["results"]] == ["a \ufffd b", "the dog"]
    assert client.get("/health").json()["status"] == "ok"


def test_a_keyless_server_answers_its_loopback_names_only(client):
    for host in (f"127.0.0.1:{PORT}", "localhost", "LOCALHOST:9000", "[::1]:8000"):  # any port: an SSH tunnel changes it
        assert client.get("/health", headers={"host": host}).status_code == 200, host
    for host in ("attacker.example:8765", "localhost.attacker.example", "127.0.0.1.nip.io"):  # DNS rebinding
        for method, path in (("GET", "/health"), ("GET", "/"), ("POST", "/search")):
            refused = client.request(method, path, json={"query": "a man"}, headers={"host": host})
            assert refused.status_code == 400, (host, path)
            assert refused.json()["error"]["code"] == "host_not_allowed" and "--allowed-hosts" in refused.json()["error"]["message"]


def test_allowed_hosts_follow_the_key_and_the_option(toy_index):  # noqa: F811
    index = str(toy_index[0])
    assert cli_settings(index).allowed_hosts == ("localhost", "127.0.0.1", "[::1]")
    assert cli_settings(index, "--api-key", "k3y").allowed_hosts is None  # a page cannot send the key
    assert cli_settings(index, "--allowed-hosts", "search.example.com, *.corp.example").allowed_hosts == ("search.example.com", "*.corp.example")
    assert cli_settings(index, "--allowed-hosts", "*").allowed_hosts is None
    from sentune.serve.settings import ServeSettings

    settings = cli_settings(index)
    assert ServeSettings.from_json(settings.to_json()) == settings  # what each worker process reads
    from sentune.serve.guard import host_allowed

    allowed = ("search.example.com", "*.corp.example")
    assert host_allowed("search.example.com:443", allowed) and host_allowed("a.corp.example", allowed)
    assert not host_allowed("corp.example", allowed) and not host_allowed("evilcorp.example", allowed)


@pytest.mark.parametrize("content_type", [None, "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_body_not_declared_json_is_refused_with_415(client, content_type):
    body = json.dumps({"query": "a man"}).encode()
    for path in ("/search", "/v1/embeddings"):
        answer = raw_post(client, path, body, content_type)
        assert answer.status_code == 415, (path, content_type)
        assert "Content-Type: application/json" in answer.json()["error"]["message"]
    ok = raw_post(client, "/search", body, "Application/JSON; charset=utf-8")
    assert ok.status_code == 200, ok.text


def test_a_post_without_a_body_needs_no_content_type_and_a_text_body_still_does(client):
    """`curl -X POST .../admin/reload` sends no body and so no Content-Type: nothing to declare, no 415."""
    for headers in ({}, {"content-length": "0"}):
        reloaded = client.post("/admin/reload", headers=headers)
        assert reloaded.status_code == 200 and reloaded.json()["status"] == "reloaded", reloaded.text
    assert raw_post(client, "/admin/reload", b"{}", "text/plain").status_code == 415
    chunked = client.post("/search", content=iter([b'{"query": "a man"}']))  # sent chunked, no Content-Length: a body
    assert chunked.status_code == 415 and "transfer-encoding" in chunked.request.headers
    assert raw_post(client, "/search", b"", None).status_code == 400  # nothing to read: the route says what is missing


def test_top_k_is_a_strict_integer_and_a_json_error_says_at_once(client):
    for value in ("true", '"3"', "3.5"):
        answer = raw_post(client, "/search", b'{"query": "a man", "top_k": ' + value.encode() + b"}")
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "top_k", value
    bad = raw_post(client, "/search", b'{"query": "a\tman"}')  # a raw tab inside a JSON string
    message = bad.json()["error"]["message"]
    assert bad.status_code == 400 and "Invalid control character at line 1 column 13" in message and "at at" not in message


def test_a_500_tells_no_exception_text():
    from fastapi.testclient import TestClient

    from sentune.serve.app import create_app
    from sentune.serve.settings import ServeSettings

    class Failing:
        views: dict = {}
        name, dimension = "failing", 3

        def embed(self, texts):
            raise RuntimeError("/secret/path/of/the/server in the message")

        def search(self, items):
            return []

        def health(self):
            return {"model": self.name}

    with TestClient(create_app(ServeSettings(target="x", index=None, model="x"), Failing()), raise_server_exceptions=False) as client:
        answer = client.post("/v1/embeddings", json={"input": "a man"})
    assert answer.status_code == 500 and answer.json()["error"]["type"] == "server_error"
    assert "secret" not in answer.text and "RuntimeError" not in answer.text


@pytest.mark.parametrize("depth", [33, 1_000, 100_000])
def test_json_nested_deeper_than_the_limit_is_one_400_not_a_recursion_error(client, depth):
    """1,000 levels (2 kB) gave a 500 and a RecursionError traceback in the log; 33 is one past what is taken."""
    from sentune.serve.protocol import MAX_JSON_DEPTH

    nested = b"[" * depth + b"]" * depth
    for path, body in (("/v1/embeddings", b'{"input": ' + nested + b"}"), ("/search", b'{"query": "a", "x": ' + nested + b"}"), ("/search", nested)):
        answer = raw_post(client, path, body)
        assert answer.status_code == 400, (path, depth, answer.text[:200])
        assert answer.json()["error"]["message"] == f"the request body nests JSON more than {MAX_JSON_DEPTH} levels deep (arrays and objects in one another)"
    taken = b'{"input": ' + b"[" * (MAX_JSON_DEPTH - 1) + b'"a"' + b"]" * (MAX_JSON_DEPTH - 1) + b"}"
    assert "levels deep" not in raw_post(client, "/v1/embeddings", taken).text  # at the limit: read, and refused for what it holds
