"""The members of uvicorn's HTTP/1.1 protocols (uvicorn.protocols.http, not uvicorn's public API) that sentune's timed
protocols override or read (sentune.serve.admission, sentune.serve.shedding), named once: what pyproject.toml's
upper bound on uvicorn pins, what tests/test_serve_uvicorn_contract.py checks on the installed uvicorn, and what
`fits` checks before the timed protocols are used. A uvicorn that changed them is served with its own h11 protocol
and the ASGI middleware alone (the full queue's 503, the body's read limit, the head's size), which need no private
member: only the head's read limit is then lost.

Only these can be done there: a head that never ends (or never comes) reaches no ASGI middleware, and a refusal
decided before the request becomes an ASGI task costs a third of one that is."""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

# the methods overridden, each with its parameters after self
METHODS: dict[str, tuple[str, ...]] = {
    "connection_made": ("transport",),
    "data_received": ("data",),
    "connection_lost": ("exc",),
    "send_400_response": ("msg",),
    "on_response_complete": (),
    "_unset_keepalive_if_required": (),
    "timeout_keep_alive_handler": (),
}
HTTPTOOLS_METHODS = METHODS | {"on_message_begin": (), "on_headers_complete": (), "on_body": ("body",), "on_message_complete": ()}
# the attributes read, on a protocol whose connection is made and whose request has begun
ATTRIBUTES: tuple[str, ...] = ("config", "transport", "loop", "cycle", "app_state", "server_state", "access_log", "access_logger", "client")
ATTRIBUTES += ("flow", "timeout_keep_alive_task", "timeout_keep_alive")
HTTPTOOLS_ATTRIBUTES = (*ATTRIBUTES, "parser", "pipeline", "root_path", "url", "headers", "expect_100_continue")
H11_ATTRIBUTES = (*ATTRIBUTES, "conn")
# on the objects those attributes hold
CYCLE_ATTRIBUTES = ("response_complete", "more_body")
SERVER_STATE_ATTRIBUTES = ("default_headers",)


def fits(protocol: type, methods: dict[str, tuple[str, ...]]) -> bool:
    """Whether `protocol` has each of `methods`, with those parameters (the attributes only an instance shows)."""
    for name, parameters in methods.items():
        method = getattr(protocol, name, None)
        if not callable(method):
            return False
        if tuple(inspect.signature(method).parameters)[1:] != parameters:
            return False
    return True


if TYPE_CHECKING:

    class UvicornHttp(asyncio.Protocol):
        """What a type checker is told of uvicorn's protocols in sentune's mixins (at run time asyncio.Protocol,
        the first base they share, so that uvicorn's own members come next in the method order)."""

        config: Any
        transport: asyncio.Transport
        loop: asyncio.AbstractEventLoop
        cycle: Any
        app_state: dict[str, Any]
        server_state: Any
        access_log: bool
        access_logger: Any
        client: tuple[str, int] | None
        flow: Any
        timeout_keep_alive_task: asyncio.TimerHandle | None
        timeout_keep_alive: int
        parser: Any
        pipeline: Any
        root_path: str
        url: bytes
        headers: list[tuple[bytes, bytes]]
        expect_100_continue: bool

        def send_400_response(self, msg: str) -> None: ...
        def on_response_complete(self) -> None: ...
        def _unset_keepalive_if_required(self) -> None: ...
        def timeout_keep_alive_handler(self) -> None: ...
        def on_message_begin(self) -> None: ...
        def on_headers_complete(self) -> None: ...
        def on_body(self, body: bytes) -> None: ...
        def on_message_complete(self) -> None: ...

else:
    UvicornHttp = asyncio.Protocol
