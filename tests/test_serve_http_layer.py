"""The HTTP layer of `sentune serve` as a client meets it on the wire (uvicorn in a thread, as in
test_serve_admission.py; raw sockets where the head is the point): the API key is checked before a full queue's 503
tells the load, that 503 is one access line in uvicorn's format, the 408s and 431s the protocol writes are counted in
/metrics, a request has exactly one Host header, and every answer carries the security headers."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import re
import socket
import threading
import time
from importlib import resources

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from test_serve_admission import PROTOCOLS, Served, TimedEngine, closed_within, until  # noqa: E402
from test_serve_shedding import connect, metric, read_answer, request  # noqa: E402

KEY = "the-key"
# the h11 variants (the ASGI middleware's refusal) in the slow selection, so plain `pytest -q` stays short
EACH_PROTOCOL = [pytest.param(p, marks=pytest.mark.slow) if p == "TimedH11Protocol" else p for p in PROTOCOLS]
AUTH = {"authorization": f"Bearer {KEY}"}


def hold(served: Served, engine: TimedEngine, headers: dict | None = None) -> threading.Thread:
    """A request that fills the queue (--max-queue 1) for the engine's time; returns once it is being computed."""
    thread = threading.Thread(target=lambda: httpx.post(f"{served.url}/v1/embeddings", json={"input": "holding"}, headers=headers, timeout=30), daemon=True)
    thread.start()
    until(lambda: engine.batches)
    return thread


def refused_count(served: Served) -> int:
    return httpx.get(f"{served.url}/health", timeout=10).json()["batching"]["refused"]


@pytest.mark.parametrize("protocol", EACH_PROTOCOL)
def test_a_client_without_the_key_gets_401_never_the_full_queues_503(protocol):
    """The protocol's own refusal (httptools) and the middleware's (h11) both come after the key: a client without it
    reads no load and is not counted among the refused (nor paced with them)."""
    engine = TimedEngine(per_text=1.2)  # the queue stays full through five requests on a busy machine
    with Served(engine, http=protocol, timeout_s=10.0, max_batch=1, max_queue=1, api_key=KEY) as served:
        holding = hold(served, engine, AUTH)
        for headers in ({}, {"authorization": "Bearer wrong"}):
            answer = httpx.post(f"{served.url}/v1/embeddings", json={"input": "a"}, headers=headers, timeout=10)
            assert answer.status_code == 401 and "retry-after" not in answer.headers, answer.text
            assert answer.json()["error"]["code"] == "invalid_api_key" and "busy" not in answer.text
        assert refused_count(served) == 0
        keyed = httpx.post(f"{served.url}/v1/embeddings", json={"input": "a"}, headers=AUTH, timeout=10)
        assert keyed.status_code == 503 and keyed.json()["error"]["code"] == "queue_full"
        assert keyed.headers["x-content-type-options"] == "nosniff" and keyed.headers["x-frame-options"] == "DENY"
        assert refused_count(served) == 1
        holding.join(10)


class Lines(logging.Handler):
    """The access log's lines, formatted by uvicorn's own AccessFormatter; a record it cannot format is kept apart
    (logging would print its "--- Logging error ---" traceback)."""

    def __init__(self) -> None:
        from uvicorn.logging import AccessFormatter

        super().__init__()
        self.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False))
        self.lines: list[str] = []
        self.failed: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:
            self.failed.append(record)


@pytest.mark.parametrize("protocol", EACH_PROTOCOL)
def test_a_full_queues_503_is_one_access_line_in_uvicorns_format(protocol):
    engine = TimedEngine(per_text=0.6)
    served = Served(engine, http=protocol, log_level="info", timeout_s=10.0, max_batch=1, max_queue=1)
    lines = Lines()
    access = logging.getLogger("uvicorn.access")
    access.addHandler(lines)  # after the server's Config set uvicorn's logging up
    try:
        with served:
            holding = hold(served, engine)
            sock, reader = connect(served.port)
            with sock, reader:
                sock.sendall(request())
                assert read_answer(reader)[0] == 503
                client = f"127.0.0.1:{sock.getsockname()[1]}"
            holding.join(10)
    finally:
        access.removeHandler(lines)
    assert not lines.failed, [record.args for record in lines.failed]
    assert [line for line in lines.lines if " 503 " in line] == [f'{client} - "POST /v1/embeddings HTTP/1.1" 503 Service Unavailable']


def answer_to(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head)
        received, _ = closed_within(sock, 5.0) if b"connection: close" in head.lower() or b"HTTP/1.0" in head else (sock.recv(65536), 0)
        return received


@pytest.mark.parametrize("protocol", EACH_PROTOCOL)
def test_the_408_and_431_the_protocol_writes_are_counted_in_metrics(protocol):
    with Served(TimedEngine(0.0), http=protocol, read_timeout_s=0.3, max_head_bytes=16 * 1024) as served:
        with socket.create_connection(("127.0.0.1", served.port)) as sock:  # half a head: 408 at the read limit
            sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            assert closed_within(sock, 3.0)[0].startswith(b"HTTP/1.1 408")
        with socket.create_connection(("127.0.0.1", served.port)) as sock:  # a header line without end: 431
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nx-endless: ")
            with contextlib.suppress(OSError):  # the server closes the connection while it is being sent to
                for _ in range(40):
                    sock.sendall(b"a" * 1000)
                    time.sleep(0.002)
            assert closed_within(sock, 3.0)[0].startswith(b"HTTP/1.1 431")
        assert metric(served.url, "other", "408") == 1.0 and metric(served.url, "other", "431") == 1.0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_needs_exactly_one_host_header(protocol):
    """HTTP/1.1 requires one (RFC 9112 3.2): none or two is 400; an HTTP/1.0 request may send none."""
    with Served(TimedEngine(0.0), http=protocol) as served:
        body = b'{"input": "a"}'
        post = b"POST /v1/embeddings HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 14\r\nconnection: close\r\n"
        for head in (
            b"GET /health HTTP/1.1\r\nconnection: close\r\n\r\n",
            b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nhost: evil.example\r\nconnection: close\r\n\r\n",
            post + b"\r\n" + body,
            post + b"host: 127.0.0.1\r\nhost: 127.0.0.1\r\n\r\n" + body,
        ):
            answer = answer_to(served.port, head)
            assert answer.startswith(b"HTTP/1.1 400"), (head, answer[:300])
        assert answer_to(served.port, b"GET /health HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 200")
        assert answer_to(served.port, post + b"host: 127.0.0.1\r\n\r\n" + body).startswith(b"HTTP/1.1 200")


def inline_hash(page: str, tag: str) -> str:
    (text,) = re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.DOTALL)  # the page has one of each
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_and_the_api_send_a_content_security_policy_and_no_framing_or_sniffing():
    page = resources.files("sentune.serve").joinpath("page.html").read_text(encoding="utf-8")
    assert "style=" not in page and " on" not in re.sub(r"<script>.*?</script>", "", page, flags=re.DOTALL).lower().replace(" one", "")
    with Served(TimedEngine(0.0)) as served:
        answers = {path: httpx.get(served.url + path, timeout=10) for path in ("/", "/health", "/openapi.json", "/nowhere")}
        answers["post"] = httpx.post(f"{served.url}/v1/embeddings", json={"input": "a"}, timeout=10)
    for answer in answers.values():
        assert answer.headers["x-frame-options"] == "DENY" and answer.headers["x-content-type-options"] == "nosniff"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    policy = dict(part.strip().split(" ", 1) for part in answers["/"].headers["content-security-policy"].split(";"))
    assert policy["script-src"] == inline_hash(page, "script") and policy["style-src"] == inline_hash(page, "style")
    assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'" and "unsafe" not in str(policy)
    assert answers["/health"].headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
