"""The ASGI middleware in front of every route of `sentune serve`: the head's size, the Host header, the API key, the
body's type and size.

A server without a key on the loopback address trusts whatever reaches it, and a browser can reach it: a page of
another site whose name is made to resolve to 127.0.0.1 (DNS rebinding) reads its answers as its own, and any page can
send it a "simple" cross-site POST (text/plain, a form) that needs no CORS preflight. So such a server answers only the
Host names of the loopback address (--allowed-hosts widens that for a proxy), and every body must be declared JSON
(415 otherwise), which a cross-site page cannot do without a preflight that this server never grants. A request
without a body (`POST /admin/reload`) declares nothing."""

from __future__ import annotations

import hmac

from fastapi.responses import JSONResponse

from sentune.serve.protocol import error_body
from sentune.serve.settings import ServeSettings

OPEN_PATHS = ("/health", "/")  # answered without the key
BODY_METHODS = (b"POST", b"PUT", b"PATCH")


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
        head = head_size(scope)
        if head > self.settings.max_head_bytes:  # parsed whole from one read; one still arriving: sentune.serve.admission
            message = f"the request head is {head:,} bytes; at most {self.settings.max_head_bytes:,} (--max-head-kb)"
            return await _respond(send, 431, error_body(message, "invalid_request_error", code="request_head_too_large"), {"connection": "close"})
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if self.settings.allowed_hosts is not None and host and not host_allowed(host, self.settings.allowed_hosts):
            message = (
                f"Host {host[:100]!r}: this server answers {', '.join(self.settings.allowed_hosts)} only (--allowed-hosts; "
                "a page of another site reaching a local server through DNS rebinding is refused)"
            )
            return await _respond(send, 400, error_body(message, "invalid_request_error", code="host_not_allowed"))
        if self.key is not None and scope["path"] not in OPEN_PATHS:
            given = headers.get(b"authorization", b"")
            if not (given[:7].lower() == b"bearer " and hmac.compare_digest(given[7:].strip(), self.key)):  # the scheme's case is free (RFC 9110)
                message = "no API key given: send `Authorization: Bearer KEY`" if not given else "wrong API key"
                return await _respond(send, 401, error_body(message, "authentication_error", code="invalid_api_key"), {"www-authenticate": "Bearer"})
        if scope["method"].encode() in BODY_METHODS and has_body(headers) and not is_json(headers.get(b"content-type", b"")):
            given = headers.get(b"content-type", b"").decode("latin-1")[:100] or "none"
            message = f"Content-Type {given}: send the body as JSON, with `Content-Type: application/json`"
            return await _respond(send, 415, error_body(message, "invalid_request_error", code="unsupported_media_type"))
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


def head_size(scope) -> int:
    """The bytes of a request's line and headers as sent (HTTP/1.1; each line's CRLF and each header's ": ")."""
    target = len(scope.get("raw_path") or scope["path"].encode()) + (len(scope["query_string"]) + 1 if scope.get("query_string") else 0)
    return len(scope["method"]) + target + len(" HTTP/1.1\r\n") + sum(len(name) + len(value) + 4 for name, value in scope["headers"]) + 2


def host_allowed(host: str, allowed: tuple[str, ...] | list[str]) -> bool:
    """Whether a Host header's name (its port aside, whatever it is: an SSH tunnel changes it) is one of `allowed`;
    "*.example.com" allows its subdomains, as Starlette's TrustedHostMiddleware reads it."""
    name = host[: host.find("]") + 1] if host.startswith("[") else host.rsplit(":", 1)[0]
    name = name.lower().rstrip(".")
    return any(name == pattern or (pattern.startswith("*.") and name.endswith(pattern[1:])) for pattern in allowed)


def has_body(headers: dict) -> bool:
    """Whether a request carries a body: a Content-Length over 0, or one sent chunked (HTTP/1.1 has no third way). A
    bodiless POST (`POST /admin/reload`) has nothing to declare, and a cross-site page gains nothing by sending one."""
    length = headers.get(b"content-length")
    if length is None:
        return b"transfer-encoding" in headers
    return not length.strip().isdigit() or int(length) > 0


def is_json(content_type: bytes) -> bool:
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


def too_large(size: int, limit: int) -> dict:
    return error_body(f"the request body is over {limit:,} bytes ({size:,} read; --max-body-mb)", "invalid_request_error", code="request_too_large")


async def _respond(send, status: int, body: dict, headers: dict | None = None) -> None:
    response = JSONResponse(body, status_code=status, headers=headers)
    await response({"type": "http"}, _no_receive, send)


async def _no_receive():
    return {"type": "http.disconnect"}
