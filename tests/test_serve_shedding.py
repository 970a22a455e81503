"""A full queue's 503 past saturation (sentune.serve.shedding): written by the HTTP protocol as soon as the request's
head is parsed, the connection then not read for SHED_PAUSE_S, twice that for each refusal asked for again before
Retry-After (so a client that sends again at once costs at most 1/SHED_PAUSE_S refusals a second, soon one),
its body dropped without breaking the connection, counted in /metrics; h11, which
has no such protocol here, answers the same from the ASGI middleware after the pause. Servers as in
test_serve_admission.py: uvicorn in a thread, an engine whose forward pass takes a set time."""

from __future__ import annotations

import socket
import threading
import time
from typing import BinaryIO

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from test_serve_admission import PROTOCOLS, Served, TimedEngine, until  # noqa: E402

BODY = b'{"input": ["a"]}'


def request(body: bytes = BODY, extra: str = "") -> bytes:
    head = f"POST /v1/embeddings HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def connect(port: int, timeout: float = 5.0) -> tuple[socket.socket, BinaryIO]:
    """A connection to the server and its buffered reader (an answer read leaves what follows it there)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(timeout)
    return sock, sock.makefile("rb")


def read_answer(reader: BinaryIO) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 answer: status, headers (lower-case names), body (by its content-length)."""
    status_line = reader.readline()
    assert status_line, "the connection closed before an answer"
    headers = {}
    while (line := reader.readline().decode("latin-1").strip()) != "":
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, reader.read(int(headers["content-length"]))


def busy_server(engine: TimedEngine, http: str | None = None) -> Served:
    """One request at a time (--max-queue 1, one text a batch): a second is refused while the first is computed."""
    return Served(engine, http=http, timeout_s=10.0, max_batch=1, max_queue=1)


def hold_the_queue(served: Served, engine: TimedEngine) -> threading.Thread:
    """A request that fills the queue for the engine's time, in a thread; returns once it is being computed."""
    thread = threading.Thread(target=served.embed, args=("holding",), daemon=True)
    thread.start()
    until(lambda: engine.batches)
    return thread


def metric(url: str, route: str, status: str) -> float:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    page = httpx.get(f"{url}/metrics", timeout=10).text
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name == "sentune_requests_total" and sample.labels == {"route": route, "status": status}:
                return sample.value
    return 0.0


@pytest.fixture
def long_pause(monkeypatch):
    """A pause long enough to tell the protocol's answer (at once, then no reading) from the middleware's (after it)."""
    from sentune.serve import shedding

    monkeypatch.setattr(shedding, "SHED_PAUSE_S", 0.4)
    return 0.4


@pytest.mark.skipif("TimedHttpToolsProtocol" not in PROTOCOLS, reason="httptools is not installed")
def test_a_full_queue_is_refused_by_the_protocol_on_arrival_and_answered_after_the_pause(long_pause):
    """No ASGI task runs for the refusal (the app's middleware would hold one through the pause), and a request refused
    on arrival stays refused when the queue empties during its pause: the pause adds nothing to what is served."""
    engine = TimedEngine(per_text=0.25)
    with busy_server(engine) as served:
        holding = hold_the_queue(served, engine)
        sock, reader = connect(served.port)
        with sock, reader:
            began = time.perf_counter()
            sock.sendall(request())
            time.sleep(0.1)
            assert len(served.server.server_state.tasks) == 1  # the holding request's only: the refusal is not the app's
            status, headers, body = read_answer(reader)
            assert status == 503 and time.perf_counter() - began >= long_pause * 0.9  # the queue emptied before
            assert headers["retry-after"] == "1" and headers["content-type"] == "application/json" and "connection" not in headers
            assert b'"queue_full"' in body and b"--max-queue" in body and "date" in headers
            sock.sendall(request(b'{"input": ["next"]}'))  # the same connection, kept
            assert read_answer(reader)[0] == 200 and engine.batches[-1] == ["next"]
        holding.join(10)
        assert metric(served.url, "/v1/embeddings", "503") == 1.0


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
@pytest.mark.skipif("TimedHttpToolsProtocol" not in PROTOCOLS, reason="httptools is not installed")
def test_a_connection_is_not_read_while_its_refusal_waits(long_pause):
    """A request sent during the pause is read after the 503 (answers in order); one pipelined in the same packet
    behind a refused POST closes the connection after the 503 (clients must not pipeline POSTs: RFC 9112 9.3.2)."""
    engine = TimedEngine(per_text=2.0)
    with busy_server(engine) as served:
        holding = hold_the_queue(served, engine)
        sock, reader = connect(served.port)
        with sock, reader:
            sock.sendall(request())
            time.sleep(0.1)
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            assert read_answer(reader)[0] == 503
            assert read_answer(reader)[0] == 200  # /health, read once the refusal was answered
        sock, reader = connect(served.port)
        with sock, reader:
            sock.sendall(request() + b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            status, headers, _ = read_answer(reader)
            assert status == 503 and headers["connection"] == "close" and sock.recv(100) == b""  # closed
        sock, reader = connect(served.port)
        with sock, reader:  # a client that asks to close is answered, then closed
            sock.sendall(request(extra="connection: close\r\n"))
            status, headers, _ = read_answer(reader)
            assert status == 503 and headers["connection"] == "close" and sock.recv(100) == b""
        holding.join(10)


def test_refusals_share_a_rate_however_many_connections_are_refused():
    from sentune.serve.shedding import MAX_PAUSE_S, REFUSALS_PER_S, SHED_PAUSE_S, Refusals

    refusals = Refusals(lambda path: None)
    assert refusals.pause() == SHED_PAUSE_S  # one client: the least pause
    for resting in (10, 100, 300):
        refusals.resting = resting
        assert refusals.pause() == pytest.approx(max(SHED_PAUSE_S, (resting + 1) / REFUSALS_PER_S))
        assert (resting + 1) / refusals.pause() <= REFUSALS_PER_S + 1e-9  # answered at most that often, all together
    refusals.resting = 10 * int(REFUSALS_PER_S)
    assert refusals.pause() == MAX_PAUSE_S  # never past Retry-After's second


def test_a_client_that_does_not_wait_retry_after_waits_twice_as_long_each_time():
    from sentune.serve.shedding import MAX_PAUSE_S, SHED_PAUSE_S, Refusals

    refusals = Refusals(lambda path: None)
    pauses = [refusals.pause(in_a_row) for in_a_row in range(8)]
    assert pauses[:4] == pytest.approx([SHED_PAUSE_S * 2**k for k in range(4)])
    assert max(pauses) == MAX_PAUSE_S == pauses[-1]  # never past Retry-After's second
    refusals.resting = 400  # the shared rate still bounds a connection's first refusal
    assert refusals.pause(0) == pytest.approx(401 / 500.0)


@pytest.mark.slow  # seconds of waiting: in the slow selection, so plain `pytest -q` stays short
@pytest.mark.skipif("TimedHttpToolsProtocol" not in PROTOCOLS, reason="httptools is not installed")
def test_a_connection_asking_again_at_once_is_paced_and_one_that_waited_retry_after_is_not():
    """Refusals in a row on one connection come twice as late each time; after waiting Retry-After's second the
    next refusal is a first one again (answered in tens of milliseconds)."""
    from sentune.serve.shedding import REFUSAL_TICK_S, SHED_PAUSE_S

    engine = TimedEngine(per_text=4.0)
    with busy_server(engine) as served:
        holding = hold_the_queue(served, engine)
        sock, reader = connect(served.port)
        with sock, reader:
            waits = []
            for _ in range(3):
                began = time.perf_counter()
                sock.sendall(request())
                assert read_answer(reader)[0] == 503
                waits.append(time.perf_counter() - began)
            time.sleep(1.05)
            began = time.perf_counter()
            sock.sendall(request())
            assert read_answer(reader)[0] == 503
            rested = time.perf_counter() - began
        holding.join(10)
    slack = REFUSAL_TICK_S + 0.1  # the grid the answers come due on, and a busy test machine
    for k, wait in enumerate(waits):
        assert SHED_PAUSE_S * 2**k * 0.9 <= wait <= SHED_PAUSE_S * 2**k + slack
    assert SHED_PAUSE_S * 0.9 <= rested <= SHED_PAUSE_S + slack


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
@pytest.mark.skipif("TimedHttpToolsProtocol" not in PROTOCOLS, reason="httptools is not installed")
def test_a_refused_request_whose_body_comes_later_leaves_the_connection_usable():
    """The body of a request refused on its head is parsed and dropped as it arrives, not read as the next request."""
    engine = TimedEngine(per_text=0.8)
    with busy_server(engine) as served:
        holding = hold_the_queue(served, engine)
        sock, reader = connect(served.port)
        with sock, reader:
            whole = request(b'{"input": ["' + b"b" * 3000 + b'"]}')
            sock.sendall(whole[:-2000])
            time.sleep(0.2)
            sock.sendall(whole[-2000:])
            assert read_answer(reader)[0] == 503  # refused on its head, answered once its body is in and dropped
            holding.join(10)
            sock.sendall(request(b'{"input": ["after"]}'))
            status, _, body = read_answer(reader)
            assert status == 200 and b'"embedding"' in body and engine.batches[-1] == ["after"], body[:200]


@pytest.mark.slow  # among the longest: in the slow selection (scripts/test.sh and CI run it), so plain `pytest -q` stays short
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_full_queue_is_refused_on_every_protocol_and_what_is_not_refused_is_served(protocol):
    """h11 has no protocol of ours that refuses: the middleware answers the same 503 (after the pause)."""
    engine = TimedEngine(per_text=0.5)
    with busy_server(engine, http=protocol) as served:
        holding = hold_the_queue(served, engine)
        refused = served.embed("refused")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "queue_full"
        holding.join(10)
        assert served.embed("after").status_code == 200
        assert [b for batch in engine.batches for b in batch] == ["holding", "after"]
