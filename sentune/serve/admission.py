"""Admission control of `sentune serve`: what keeps a slow or greedy client from holding what others need.

- A request's head must arrive within the read limit of the connection's first byte (or of the previous answer):
  `HeadTimer`, a timer on uvicorn's HTTP/1.1 protocols (httptools', else h11's), since uvicorn has none (a client that
  sends half a header line would hold its connection, and a slot of the proxy in front, forever). It uses members of
  theirs that are not uvicorn's public API (sentune.serve.uvicorn_private); `timed_protocol` serves a uvicorn that
  changed them with the ASGI middleware alone.
- A request's head (its request line and headers) holds at most --max-head-kb: past it, 431 and the connection closed.
  A head still arriving is bounded by the parser (h11 when told; httptools has none of its own, so an endless header
  line would grow in memory until the read limit: `TimedHttpToolsProtocol` counts it), one parsed whole by
  sentune.serve.guard.
- Its body must arrive within the read limit of its head: `ReadLimit`, an ASGI middleware that answers 408 and closes the
  connection (a client that sends half a body is cut off; without it uvicorn waits for the rest as long as it stays).
- The read limit is --read-timeout-s, and never more than --timeout-s, the limit of the whole request.
- A request that finds the queue full is answered 503 with Retry-After at once, once its Host and API key are checked
  (sentune.serve.guard) and before anything else is done, by the HTTP protocol itself where it can (sentune.serve.shedding).
- The 408s and 431s the protocol writes (no ASGI middleware sees them) are counted in /metrics.
- Shutdown (SIGTERM, SIGINT) is uvicorn's graceful one: the socket stops accepting, idle connections close, requests
  in flight are answered, within --timeout-s and a margin (`TimedConfig`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import math
import time

import h11
import uvicorn
from fastapi.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

from sentune.serve.protocol import ApiError, error_body
from sentune.serve.settings import ServeSettings
from sentune.serve.shedding import PROTOCOL_HEADERS, REFUSALS_STATE, RefusesFullQueues
from sentune.serve.uvicorn_private import HTTPTOOLS_METHODS, METHODS, UvicornHttp, fits

LOG = logging.getLogger("uvicorn.error")
TIMEOUT_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 33\r\n"
    + b"".join(name + b": " + value + b"\r\n" for name, value in PROTOCOL_HEADERS)
    + b"connection: close\r\n\r\nthe request head came too slowly\n"
)


def read_limit(settings: ServeSettings) -> float:
    return min(settings.read_timeout_s, settings.timeout_s)


def too_large_head(limit: int) -> bytes:
    """The 431 of a head over `limit` bytes, written as the 408 above: no request was parsed that an app could answer."""
    body = f"the request head is over {limit:,} bytes (--max-head-kb)\n".encode()
    security = "".join(f"{name.decode()}: {value.decode()}\r\n" for name, value in PROTOCOL_HEADERS)
    head = f"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\ncontent-length: {len(body)}\r\n{security}connection: close\r\n\r\n"
    return head.encode() + body


class TimedConfig(uvicorn.Config):
    """uvicorn's Config for these settings: the timed protocol and its read limit, and a bound on how long a graceful
    shutdown waits for the requests in flight (each ends within --timeout-s; the margin lets its answer go out)."""

    def __init__(self, app, settings: ServeSettings, **options) -> None:
        super().__init__(
            app,
            http=timed_protocol(),
            timeout_graceful_shutdown=math.ceil(settings.timeout_s) + 5,
            h11_max_incomplete_event_size=settings.max_head_bytes,  # h11's own bound on a head; httptools': HeadTimer
            **options,
        )
        self.read_timeout_s = read_limit(settings)
        self.max_head_bytes = settings.max_head_bytes


def serve_one(settings: ServeSettings, app, **options) -> None:
    """uvicorn.run for one process, with TimedConfig."""
    uvicorn.Server(TimedConfig(app, settings, **options)).run()


class HeadTimer(UvicornHttp):
    """A timer on uvicorn's HTTP/1.1 protocols, closing a connection whose request head has not arrived within the read
    limit (408), or whose body goes on arriving after its answer (a 401 or 415 answered before the body was read). The
    limit is TimedConfig's `read_timeout_s` (10 s under another Config). A head over TimedConfig's `max_head_bytes` is
    answered 431 and its connection closed, in place of the parser's 400 (`_head_too_large`). Both answers are
    counted in /metrics (sentune.serve.shedding.Refusals.observe), as written since the connection's last answer."""

    _head_timer: asyncio.TimerHandle | None = None
    _idle_since = 0.0  # when the connection began waiting for a head (made, or its last answer written)

    def send_400_response(self, msg: str) -> None:  # uvicorn's answer to whatever its parser refused
        if not self._head_too_large():
            return super().send_400_response(msg)
        self.transport.write(too_large_head(self._head_limit()))
        self._observe(431)
        self.transport.close()

    def _observe(self, status: int) -> None:
        refusals = self.app_state.get(REFUSALS_STATE)
        if refusals is not None and refusals.observe is not None:
            refusals.observe("", status, time.perf_counter() - self._idle_since)  # no route: no head was parsed

    def _head_limit(self) -> int:
        return getattr(self.config, "max_head_bytes", ServeSettings.max_head_bytes)

    def _head_too_large(self) -> bool:  # why the parser refused: a head over the limit
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:  # a head is in: ReadLimit times the body
            self._disarm()
        elif self._head_timer is None:
            self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # idle until the next request: uvicorn's keep-alive timer
        self._disarm()
        if self._body_pending():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _body_pending(self) -> bool:  # the request answered, its body not all in
        raise NotImplementedError

    def _arm(self) -> None:
        if not self.transport.is_closing():
            self._idle_since = time.perf_counter()
            self._head_timer = self.loop.call_later(getattr(self.config, "read_timeout_s", 10.0), self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        transport, cycle = self.transport, self.cycle
        if transport.is_closing() or (cycle is not None and not cycle.response_complete):
            return
        if not self._body_pending():  # waiting for a head: say why before closing
            transport.write(TIMEOUT_408)
            self._observe(408)
        transport.close()


class TimedH11Protocol(HeadTimer, H11Protocol):
    def _body_pending(self) -> bool:
        return self.conn.their_state is h11.SEND_BODY

    def _head_too_large(self) -> bool:  # h11 refuses a head still incomplete past max_incomplete_event_size, its bytes held
        return len(self.conn.trailing_data[0]) > self._head_limit()


if importlib.util.find_spec("httptools") is not None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class TimedHttpToolsProtocol(RefusesFullQueues, HeadTimer, HttpToolsProtocol):
        """httptools keeps a header line in memory until it ends, however long: the bytes received while a head is
        being parsed are counted here, from the chunk in which it began (a pipelined head counts the tail of the
        message before it in that chunk). A head that arrives whole in one chunk is measured by Guard. A request that
        finds its queue full is answered here (RefusesFullQueues)."""

        _in_head, _head_bytes, _head_refused = False, 0, False

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_head and not self._head_refused and not self.transport.is_closing():  # closing: the parser refused it (400)
                self._head_bytes += len(data)
                if self._head_bytes > self._head_limit():
                    self._head_refused = True
                    self.send_400_response("")
            self.after_data()

        def connection_lost(self, exc: Exception | None) -> None:
            self.stop_pause()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head, self._head_bytes = True, 0

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def _body_pending(self) -> bool:
            return self.refusal_pending() or (self.cycle is not None and self.cycle.more_body)

        def _head_too_large(self) -> bool:
            return self._head_refused


def timed_protocol() -> type | str:
    """The protocol TimedConfig serves with: httptools' when installed, as uvicorn chooses (it parses a request in
    about a third of h11's time, which is what a refusal costs past saturation), else h11's, each timed here while
    uvicorn's private members are those sentune.serve.uvicorn_private names. A uvicorn that changed them is served
    with its own h11 protocol, which the ASGI middleware guards (the full queue's 503, the body's read limit; h11's own
    bound on a head) without a read limit on the head: said once, in the log."""
    from uvicorn.protocols.http.h11_impl import H11Protocol as uvicorn_h11

    if importlib.util.find_spec("httptools") is not None and fits(HttpToolsProtocol, HTTPTOOLS_METHODS):
        return TimedHttpToolsProtocol
    if fits(uvicorn_h11, METHODS):
        return TimedH11Protocol
    LOG.warning(
        "uvicorn %s changed the protocol members sentune times heads with (sentune.serve.uvicorn_private): serving with its "
        "own h11 protocol, a request's head without --read-timeout-s (its body keeps it)",
        uvicorn.__version__,
    )
    return "h11"


class ClientLeft(Exception):
    """The client closed its connection before its answer was ready."""


async def until_answered(work, receive, timeout_s: float):
    """`await work` unless `timeout_s` passes (TimeoutError) or the client leaves first (ClientLeft); in both cases the
    work is cancelled, which takes its texts not yet computed out of the batcher's queue. `receive`: the request's ASGI
    receive, its body already read: what it gives next is the client's disconnect."""

    async def client_left() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    task, watch = asyncio.ensure_future(work), asyncio.ensure_future(client_left())
    try:
        done, _ = await asyncio.wait({task, watch}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if task in done:
        return task.result()
    task.cancel()
    if watch in done:
        raise ClientLeft()
    raise TimeoutError()


async def within_limit(work, request, timeout_s: float):
    """A route's `await work` (until_answered): 503 past `timeout_s` (--timeout-s), 499 when the client left (nobody
    reads that answer; the access log and /metrics do: nginx's code for it); either way its work is cancelled."""
    try:
        return await until_answered(work, request.receive, timeout_s)
    except TimeoutError:
        raise ApiError(503, f"not answered within {timeout_s:g} s (--timeout-s): the server is busy; try again", "server_busy") from None
    except ClientLeft:
        raise ApiError(499, "the client closed its connection before its answer", "client_closed_request") from None


class BodyTooSlow(Exception):
    pass


class ReadLimit:
    """ASGI middleware: a request's body read within `limit_s` of its head, else BodyTooSlow, which the app answers with
    `answer` (its exception handler: the routes read the body)."""

    def __init__(self, app, limit_s: float) -> None:
        self.app, self.limit_s = app, limit_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limit_s
        finished = False

        async def timed_receive():
            nonlocal finished
            if finished:  # the body is in: later receives wait for a disconnect, which is no read
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                raise BodyTooSlow() from None
            finished = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed_receive, send)

    @staticmethod
    def answer(limit_s: float) -> JSONResponse:
        """408, and `connection: close`: uvicorn closes the connection once it is sent, the rest of the body unread."""
        body = error_body(f"the request body did not arrive within {limit_s:g} s (--read-timeout-s)", "invalid_request_error", code="request_timeout")
        return JSONResponse(body, status_code=408, headers={"connection": "close"})
