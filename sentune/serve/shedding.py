"""Past saturation: a request to a batched route (/v1/embeddings, /search, /rerank) while its queue is full is answered
503 with Retry-After, for as little CPU as a request can cost, since what refusals cost is taken from the model.

Past saturation every refused connection's next request comes back at once (a load generator, a retry loop that
ignores Retry-After), thousands a second on 2 cores. So a refusal is decided by the HTTP protocol itself as soon as
the request's head is parsed (`RefusesFullQueues`, in uvicorn's httptools protocol: `TimedHttpToolsProtocol`, through
the private members sentune.serve.uvicorn_private names) and written from bytes built once: no ASGI scope, task, middleware or JSON encoding; the body is parsed and dropped as it
arrives, and the connection is kept (closed after the answer when the client asked for that; at once for
`Expect: 100-continue`). The answer comes after a pause (`Refusals.pause`), the connection not read meanwhile: the first refusal
of a connection in tens of milliseconds, each one it asks for again without waiting Retry-After twice as late (to
Retry-After's second), and all the refused connections together answered a bounded number of times a second, however
fast their clients send. Only a request that sentune.serve.guard lets through (its Host, its API key) is refused so: a
client without the key gets its 401 and never learns the load, nor takes a share of the refusals' rate.
Where the protocol cannot answer first (h11, a uvicorn whose private members changed, or a request pipelined behind one
not yet answered) the ASGI middleware
`Shed` answers the same, after sentune.serve.guard's checks and before any other layer, after the shared pause (without the per-connection doubling: it sees requests, not connections).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse

from sentune.serve.batching import MicroBatcher, QueueFull
from sentune.serve.guard import API_POLICY, SECURITY_HEADERS
from sentune.serve.protocol import error_body
from sentune.serve.uvicorn_private import UvicornHttp

# A refused request is answered after a pause, and its connection not read meanwhile, so that a client that sends
# again at once (a load generator, a retry loop that ignores Retry-After) is refused a few times a second, not
# thousands: every refusal costs the server and its client CPU that the model would otherwise have, and past
# saturation that is what the served lose. A connection's first refusal waits SHED_PAUSE_S; each one it asks for again
# sooner than Retry-After said waits twice the last, up to MAX_PAUSE_S (Retry-After's second): a client that honours
# Retry-After is answered after the least pause, one that does not is paced to what it was told. All the refused
# connections together are also answered at most REFUSALS_PER_S times a second (a flood of new connections; this share
# counts every connection waiting, paced or not, so with hundreds waiting a first refusal waits its share too), and
# refusals come due on a grid of REFUSAL_TICK_S so that one wake of the event loop answers all that are due together,
# not one wake (and one preempted forward pass) each. A request's fate is decided on its arrival (refused, or queued
# for the model), so the pause adds nothing to the latency of what is served.
SHED_PAUSE_S = 0.05  # the least pause
REFUSALS_PER_S = 500.0
MAX_PAUSE_S = 1.0
REFUSAL_TICK_S = 0.05
RETRY_AFTER = "1"  # whole seconds (RFC 9110): the least it can say; a full queue empties within a few forward passes
REFUSALS_STATE = "sentune.refusals"  # the key of `Refusals` in the app's lifespan state, where the protocol finds it


def busy(exc: QueueFull) -> JSONResponse:
    """The 503 of a full queue, as a route answers it (a request longer than the room left)."""
    return JSONResponse(busy_body(exc), status_code=503, headers={"retry-after": RETRY_AFTER})


def busy_body(exc: QueueFull) -> dict:
    message = f"the server is busy: {exc.pending} requests are being answered, at most {exc.limit} may be now (--max-queue; past saturation fewer); try again"
    return error_body(message, "server_busy", code="queue_full")


class Refusals:
    """Which requests a full queue refuses, and their answer: `queue_of(path)` is a route's batcher (None: not a
    batched route, or the app not started). `observe(route, status, seconds)` counts in /metrics an answer that the
    HTTP protocol writes itself (this 503, and sentune.serve.admission's 408 and 431), which no middleware sees.
    `admits(scope)`: whether sentune.serve.guard lets the request's head through (its Host, its key): the protocol
    refuses only those, a request that it would not admit being left to its 400 or 401."""

    def __init__(
        self,
        queue_of: Callable[[str], MicroBatcher | None],
        observe: Callable[[str, int, float], None] | None = None,
        admits: Callable[[dict], bool] | None = None,
    ) -> None:
        self.queue_of, self.observe, self.admits = queue_of, observe, admits
        self._bodies: dict[int, bytes] = {}
        self.resting = 0  # refused requests waiting for their answer (their pause) now

    def pause(self, in_a_row: int = 0) -> float:
        """How long the next refused request waits for its answer: its share of REFUSALS_PER_S, and twice its
        connection's last pause for each refusal before it that the client did not wait Retry-After after."""
        backoff = SHED_PAUSE_S * 2.0 ** min(in_a_row, 30)
        return min(MAX_PAUSE_S, max(SHED_PAUSE_S, backoff, (self.resting + 1) / REFUSALS_PER_S))

    def full(self, method: str, path: str) -> MicroBatcher | None:
        """The batcher whose queue is full, when this request would join it (None: it goes on)."""
        if method != "POST":
            return None
        batcher = self.queue_of(path)
        return batcher if batcher is not None and batcher.full() else None

    def refused(self, method: str, path: str) -> MicroBatcher | None:
        """The batcher whose full queue refuses this request (counted as refused), or None: it goes on."""
        batcher = self.full(method, path)
        if batcher is not None:
            batcher.refuse()
        return batcher

    def body(self, batcher: MicroBatcher) -> bytes:
        """The answer's JSON: a full queue holds as many requests as its bound, so one body a bound, built once."""
        limit = batcher.bound() or 0
        if limit not in self._bodies:
            self._bodies[limit] = json.dumps(busy_body(QueueFull(limit, limit))).encode()
        return self._bodies[limit]

    def response(self, batcher: MicroBatcher, default_headers: list[tuple[bytes, bytes]], close: bool) -> bytes:
        """The whole HTTP/1.1 answer, as the protocol writes it: uvicorn's default headers (date, server) and ours."""
        body = self.body(batcher)
        head = [b"HTTP/1.1 503 Service Unavailable\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in [*default_headers, *PROTOCOL_HEADERS]]
        head.append(b"content-type: application/json\r\nretry-after: " + RETRY_AFTER.encode() + b"\r\ncontent-length: " + str(len(body)).encode())
        head.append(b"\r\nconnection: close\r\n\r\n" if close else b"\r\n\r\n")
        return b"".join(head) + body


# what sentune.serve.guard adds to every answer, on those the protocol writes itself
PROTOCOL_HEADERS = [(b"content-security-policy", API_POLICY), *SECURITY_HEADERS]


class RefusesFullQueues(UvicornHttp):
    """uvicorn's httptools protocol answering a full queue's 503 itself (see the module's docstring). It finds
    `Refusals` in the app's lifespan state (`app_state`); without it (another app) it does nothing."""

    _refusing: MicroBatcher | None = None  # the batcher that refused a request not yet answered (its body is dropped)
    _refused = False  # a refused request's body was all parsed in this chunk of data: answer it after the pause
    _refused_close = False  # the connection closes after that answer
    _began = 0.0
    _target = ""  # the refused request's path and query, as the access log writes them
    _path = ""
    _pause: asyncio.TimerHandle | None = None
    _in_a_row = 0  # refusals of this connection, each asked for again before Retry-After had passed
    _answered_at = float("-inf")  # when this connection's last refusal was answered (the loop's clock)

    def on_headers_complete(self) -> None:
        if self._refusing is not None:  # pipelined behind a refused request (a POST, which no client should pipeline)
            self._refused_close = True  # the refusal closes the connection: this request is not answered
            return
        began = time.perf_counter()
        refusals: Refusals | None = self.app_state.get(REFUSALS_STATE)
        idle = self.cycle is None or self.cycle.response_complete  # else an answer is owed first
        batcher = None
        if refusals is not None and idle and not self.pipeline and not self.root_path:
            batcher = self._refused_by(refusals)
        if refusals is None or batcher is None:
            self._in_a_row = 0  # served (or not a batched route): its next refusal is a first one again
            return super().on_headers_complete()
        self._began = began
        self._refused_close = not self.parser.should_keep_alive() or self.expect_100_continue
        self._refusing = batcher
        if self.expect_100_continue:  # its body comes only after a 100: answer and close now
            self._write_refusal(refusals, batcher)

    def _refused_by(self, refusals: Refusals) -> MicroBatcher | None:
        """The batcher that refuses this request, when Guard would let its head through."""
        import httptools  # installed wherever this protocol is used (sentune.serve.admission)

        url = httptools.parse_url(self.url)
        method = self.parser.get_method().decode("ascii")
        self._path = url.path.decode("ascii")
        self._target = self._path + ("?" + url.query.decode("ascii") if url.query else "")
        batcher = refusals.full(method, self._path)
        if batcher is None:
            return None
        head = {"method": method, "path": self._path, "raw_path": url.path, "query_string": url.query or b""}
        head |= {"headers": self.headers, "http_version": self.parser.get_http_version()}
        if refusals.admits is not None and not refusals.admits(head):
            return None  # its 400 or 401 comes from Guard, as when the queue has room
        batcher.refuse()
        return batcher

    def on_body(self, body: bytes) -> None:
        if self._refusing is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refusing is None:
            return super().on_message_complete()
        self._refused = True

    if TYPE_CHECKING:

        def _disarm(self) -> None: ...  # the read limit's timer: sentune.serve.admission.HeadTimer, beside this in the protocol

    def after_data(self) -> None:
        """Called once a chunk of data is parsed: a refused request whose body is in is answered after the pause,
        its connection not read meanwhile (a request sent after it waits its turn in the socket's buffer)."""
        if not self._refused or self._pause is not None:
            return
        self._refused = False
        self._disarm()  # its body is in: no read limit runs until the answer
        if self.transport.is_closing():
            return
        self.flow.pause_reading()
        refusals: Refusals = self.app_state[REFUSALS_STATE]
        now = self.loop.time()
        if now - self._answered_at >= float(RETRY_AFTER):  # the client waited what it was told: no backoff
            self._in_a_row = 0
        due = math.ceil((now + refusals.pause(self._in_a_row)) / REFUSAL_TICK_S) * REFUSAL_TICK_S
        self._pause = self.loop.call_at(due, self._answer_refusal)
        self._in_a_row += 1
        refusals.resting += 1

    def _answer_refusal(self) -> None:
        refusals: Refusals = self.app_state[REFUSALS_STATE]
        if self._pause is not None:
            self._pause = None
            refusals.resting -= 1
        batcher, self._refusing = self._refusing, None
        if batcher is not None and not self.transport.is_closing():
            self._write_refusal(refusals, batcher)

    def _write_refusal(self, refusals: Refusals, batcher: MicroBatcher) -> None:
        self.transport.write(refusals.response(batcher, self.server_state.default_headers, self._refused_close))
        self._answered_at = self.loop.time()
        if self.access_log:  # the line uvicorn writes for an answer, with the five arguments its formatter reads
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "-"
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', client, "POST", self._target, self.parser.get_http_version(), 503)
        if refusals.observe is not None:
            refusals.observe(self._path, 503, time.perf_counter() - self._began)
        if self._refused_close:
            self.transport.close()
            return
        self.flow.resume_reading()
        self._unset_keepalive_if_required()  # idle from now on, as after any answer
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def refusal_pending(self) -> bool:
        return self._refusing is not None

    def stop_pause(self) -> None:
        if self._pause is not None:
            self._pause.cancel()
            self._pause = None
            self.app_state[REFUSALS_STATE].resting -= 1


class Shed:
    """ASGI middleware: a request to a batched route while its queue is full is answered 503 with Retry-After here,
    before any other layer runs, its body unread and unparsed, after the pause: what the protocol does not answer
    itself (h11; a request pipelined behind another)."""

    def __init__(self, app, refusals: Refusals) -> None:
        self.app, self.refusals = app, refusals

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            batcher = self.refusals.refused(scope["method"], scope["path"])
            if batcher is not None:
                self.refusals.resting += 1
                try:
                    await asyncio.sleep(self.refusals.pause())
                finally:
                    self.refusals.resting -= 1
                body = self.refusals.body(batcher)
                headers = [(b"content-type", b"application/json"), (b"retry-after", RETRY_AFTER.encode()), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return None
        return await self.app(scope, receive, send)
