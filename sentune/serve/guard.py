"""The ASGI middleware in front of every route of `sentune serve`: the head's size, the Host header (exactly one, as
HTTP/1.1 requires), the API key, the body's type and size, and the security headers of every answer (a strict
Content-Security-Policy, X-Frame-Options: DENY, X-Content-Type-Options: nosniff). A full queue's 503 comes after
these checks, so a request they refuse never learns the server's load (sentune.serve.shedding).

A server without a key on the loopback address trusts whatever reaches it, and a browser can reach it: a page of
another site whose name is made to resolve to 127.0.0.1 (DNS rebinding) reads its answers as its own, and any page can
send it a "simple" cross-site POST (text/plain, a form) that needs no CORS preflight. So such a server answers only the
Host names of the loopback address (--allowed-hosts widens that for a proxy), and every body must be declared JSON
(415 otherwise), which a cross-site page cannot do without a preflight that this server never grants. A request
without a body (`POST /admin/reload`) declares nothing."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
from importlib import resources

from fastapi.responses import JSONResponse

from sentune.serve.protocol import error_body
from sentune.serve.settings import ServeSettings

OPEN_PATHS = ("/health", "/", "/openapi.json")  # answered without the key: static or no data
BODY_METHODS = (b"POST", b"PUT", b"PATCH")


class BodyTooLarge(Exception):
    pass


class Guard:
    """ASGI middleware in front of everything but /metrics' count: the head's checks (`refusal`), the body size limit
    (Content-Length, and the bytes actually received when a client sends none or lies), and the security headers of
    every answer (`SECURITY_HEADERS`)."""

    def __init__(self, app, settings: ServeSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        send = secured(send, scope["path"])
        refused = refusal(self.settings, scope)
        if refused is not None:
            return await _respond(send, *refused)
        limit = self.settings.max_body_bytes
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


Refusal = tuple[int, dict, dict | None]  # a status, its JSON body, its headers


def refusal(settings: ServeSettings, scope) -> Refusal | None:
    """What a request's head alone refuses it with (None: nothing), in this order: a head over --max-head-kb (431), a
    Host header missing, repeated or not allowed (400), the API key (401), a body not declared JSON (415), a
    Content-Length over --max-body-mb (413). Read from an ASGI scope, or the few fields of one the HTTP protocol
    builds to decide whether a full queue may refuse it first (sentune.serve.shedding): only a request this lets through
    learns the server's load."""
    head = head_size(scope)
    if head > settings.max_head_bytes:  # parsed whole from one read; one still arriving: sentune.serve.admission
        message = f"the request head is {head:,} bytes; at most {settings.max_head_bytes:,} (--max-head-kb)"
        return 431, error_body(message, "invalid_request_error", code="request_head_too_large"), {"connection": "close"}
    headers = dict(scope["headers"])
    hosts = [value for name, value in scope["headers"] if name == b"host"]
    if len(hosts) > 1 or (not hosts and scope.get("http_version", "1.1") == "1.1"):  # HTTP/1.1 asks exactly one (RFC 9112 3.2)
        message = "two Host headers: send one" if hosts else "no Host header: HTTP/1.1 requests must carry one"
        return 400, error_body(message, "invalid_request_error", code="bad_host_header"), {"connection": "close"}
    host = hosts[0].decode("latin-1") if hosts else ""
    if settings.allowed_hosts is not None and host and not host_allowed(host, settings.allowed_hosts):
        message = (
            f"Host {host[:100]!r}: this server answers {', '.join(settings.allowed_hosts)} only (--allowed-hosts; "
            "a page of another site reaching a local server through DNS rebinding is refused)"
        )
        return 400, error_body(message, "invalid_request_error", code="host_not_allowed"), None
    if settings.api_key and scope["path"] not in OPEN_PATHS:
        given = headers.get(b"authorization", b"")
        # the scheme's case is free (RFC 9110)
        if not (given[:7].lower() == b"bearer " and hmac.compare_digest(given[7:].strip(), settings.api_key.encode())):
            message = "no API key given: send `Authorization: Bearer KEY`" if not given else "wrong API key"
            return 401, error_body(message, "authentication_error", code="invalid_api_key"), {"www-authenticate": "Bearer"}
    if scope["method"].encode() in BODY_METHODS and has_body(headers) and not is_json(headers.get(b"content-type", b"")):
        given = headers.get(b"content-type", b"").decode("latin-1")[:100] or "none"
        message = f"Content-Type {given}: send the body as JSON, with `Content-Type: application/json`"
        return 415, error_body(message, "invalid_request_error", code="unsupported_media_type"), None
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > settings.max_body_bytes:
        return 413, too_large(int(length), settings.max_body_bytes), None
    return None


def inline_hashes(page: str, tag: str) -> str:
    """CSP's sources for the inline `<tag>` elements of `page`: their texts' SHA-256, as CSP Level 2 hashes them."""
    texts = re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.DOTALL)
    return " ".join("'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'" for text in texts)


@functools.cache
def page_policy() -> bytes:
    """The search page's Content-Security-Policy: its own inline script and style (by hash, so no other inline code
    runs), requests to this server only, and no framing, plugin, base or form target elsewhere."""
    page = resources.files("sentune.serve").joinpath("page.html").read_text(encoding="utf-8")
    script, style = inline_hashes(page, "script"), inline_hashes(page, "style")
    return (
        f"default-src 'none'; script-src {script}; style-src {style}; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ).encode()


# every answer: not framed (clickjacking), its type not sniffed; the API's JSON loads nothing, the page its own code only
SECURITY_HEADERS = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff")]
API_POLICY = b"default-src 'none'; frame-ancestors 'none'"
PAGE_PATH = "/"


def secured(send, path: str):
    """`send` with the security headers added to the answer's head."""
    policy = page_policy() if path == PAGE_PATH else API_POLICY

    async def send_secured(message):
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"content-security-policy", policy), *SECURITY_HEADERS]}
        await send(message)

    return send_secured


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
