"""Admission control of `sentune serve`: what keeps a slow or greedy client from holding what others need.

- A request's head must arrive within the read limit of the connection's first byte (or of the previous answer):
  `TimedH11Protocol`, uvicorn's HTTP/1.1 protocol with a timer, since uvicorn has none (a client that sends half a
  header line would hold its connection, and a slot of the proxy in front, forever).
- Its body must arrive within the read limit of its head: `ReadLimit`, an ASGI middleware that answers 408 and closes the
  connection (a client that sends half a body is cut off; without it uvicorn waits for the rest as long as it stays).
- The read limit is --read-timeout-s, and never more than --timeout-s, the limit of the whole request.
- A request that finds the queue full is answered 503 with Retry-After at once (sentune.serve.batching.QueueFull).
- Shutdown (SIGTERM, SIGINT) is uvicorn's graceful one: the socket stops accepting, idle connections close, requests
  in flight are answered, within --timeout-s and a margin (`TimedConfig`).
"""

from __future__ import annotations

import asyncio
import math

import h11
import uvicorn
from fastapi.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

from sentune.serve.batching import QueueFull
from sentune.serve.protocol import error_body
from sentune.serve.settings import ServeSettings

TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 33\r\nconnection: close\r\n\r\nthe request head came too slowly\n"


def read_limit(settings: ServeSettings) -> float:
    return min(settings.read_timeout_s, settings.timeout_s)


class TimedConfig(uvicorn.Config):
    """uvicorn's Config for these settings: the timed protocol and its read limit, and a bound on how long a graceful
    shutdown waits for the requests in flight (each ends within --timeout-s; the margin lets its answer go out)."""

    def __init__(self, app, settings: ServeSettings, **options) -> None:
        super().__init__(app, http=TimedH11Protocol, timeout_graceful_shutdown=math.ceil(settings.timeout_s) + 5, **options)
        self.read_timeout_s = read_limit(settings)


def serve_one(settings: ServeSettings, app, **options) -> None:
    """uvicorn.run for one process, with TimedConfig."""
    uvicorn.Server(TimedConfig(app, settings, **options)).run()


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request head has not arrived within the read limit (408).
    The limit is TimedConfig's `read_timeout_s` (10 s under another Config)."""

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:  # a head is in: the body's limit is ReadLimit's
            self._disarm()
        elif self._head_timer is None:
            self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # idle until the next request: uvicorn's keep-alive timer closes it
        self._disarm()
        if self.conn.their_state is h11.SEND_BODY:  # answered before its body was in (401, 415): the rest has the limit too
            self._arm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if not self.transport.is_closing():
            self._head_timer = self.loop.call_later(getattr(self.config, "read_timeout_s", 10.0), self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return
        if self.conn.their_state is h11.IDLE:  # waiting for a head: say why before closing
            self.transport.write(TIMEOUT_408)
        self.transport.close()


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


def busy(exc: QueueFull) -> JSONResponse:
    """The 503 of a full queue. Retry-After is in whole seconds (RFC 9110): 1, the least it can say; a full queue
    empties within a few forward passes."""
    message = f"the server is busy: {exc.waiting} texts are waiting, at most {exc.limit} may (--max-queue); try again"
    headers = {"retry-after": "1"}
    return JSONResponse(error_body(message, "server_busy", code="queue_full"), status_code=503, headers=headers)
