"""The ASGI middleware in front of every route of `sentune serve`: body size limit and API key."""

from __future__ import annotations

import hmac

from fastapi.responses import JSONResponse

from sentune.serve.protocol import error_body
from sentune.serve.settings import ServeSettings

OPEN_PATHS = ("/health", "/")  # answered without the key


class BodyTooLarge(Exception):
    pass


class Guard:
    """ASGI middleware in front of everything: the body size limit (Content-Length, and the bytes actually received
    when a client sends none or lies) and the API key."""

    def __init__(self, app, settings: ServeSettings) -> None:
        self.app, self.settings = app, settings
        self.key = settings.api_key.encode() if settings.api_key else None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        if self.key is not None and scope["path"] not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not (given[:7].lower() == b"bearer " and hmac.compare_digest(given[7:].strip(), self.key)):  # the scheme's case is free (RFC 9110)
                message = "no API key given: send `Authorization: Bearer KEY`" if not given else "wrong API key"
                return await _respond(send, 401, error_body(message, "authentication_error", code="invalid_api_key"), {"www-authenticate": "Bearer"})
        limit = self.settings.max_body_bytes
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            return await _respond(send, 413, too_large(int(length), limit))
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge()
            return message

        started = False

        async def tracking_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await _respond(send, 413, too_large(received, limit))


def too_large(size: int, limit: int) -> dict:
    return error_body(f"the request body is over {limit:,} bytes ({size:,} read; --max-body-mb)", "invalid_request_error", code="request_too_large")


async def _respond(send, status: int, body: dict, headers: dict | None = None) -> None:
    response = JSONResponse(body, status_code=status, headers=headers)
    await response({"type": "http"}, _no_receive, send)


async def _no_receive():
    return {"type": "http.disconnect"}
