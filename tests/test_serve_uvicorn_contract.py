"""The private members of uvicorn's HTTP/1.1 protocols that sentune's timed protocols use (named in
sentune.serve.uvicorn_private): present, with those signatures, on the installed uvicorn, which pyproject.toml bounds;
and a uvicorn that changed them is served with its own h11 protocol and the ASGI middleware, which still refuse a full
queue (503) and time a body out (408)."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from importlib import metadata
from pathlib import Path
from unittest import mock

import pytest

uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from sentune.serve import uvicorn_private  # noqa: E402
from sentune.serve.uvicorn_private import CYCLE_ATTRIBUTES, H11_ATTRIBUTES, HTTPTOOLS_ATTRIBUTES, HTTPTOOLS_METHODS, METHODS, SERVER_STATE_ATTRIBUTES, fits  # noqa: E402


def protocols() -> list[tuple[type, dict, tuple]]:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    found = [(H11Protocol, METHODS, H11_ATTRIBUTES)]
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return found
    return [*found, (HttpToolsProtocol, HTTPTOOLS_METHODS, HTTPTOOLS_ATTRIBUTES)]


def test_the_installed_uvicorn_has_the_private_members_the_timed_protocols_use():
    from uvicorn.server import ServerState

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def a_request_begun(protocol_class):
        config = uvicorn.Config(app, log_level="warning")
        state = ServerState()
        protocol = protocol_class(config=config, server_state=state, app_state={})
        transport = mock.Mock(spec=asyncio.Transport)
        transport.get_extra_info.side_effect = lambda name, default=None: ("127.0.0.1", 9) if name in ("sockname", "peername") else default
        transport.is_closing.return_value = False
        protocol.connection_made(transport)
        protocol.data_received(b"GET / HTTP/1.1\r\nhost: a\r\n\r\n")  # the head parsed: its request's cycle exists
        await asyncio.sleep(0.05)  # its ASGI task answers
        return protocol, state

    for protocol_class, methods, attributes in protocols():
        assert fits(protocol_class, methods), protocol_class
        protocol, state = asyncio.run(a_request_begun(protocol_class))
        missing = [name for name in attributes if not hasattr(protocol, name)]
        missing += [f"cycle.{name}" for name in CYCLE_ATTRIBUTES if not hasattr(protocol.cycle, name)]
        missing += [f"server_state.{name}" for name in SERVER_STATE_ATTRIBUTES if not hasattr(state, name)]
        assert not missing, (protocol_class, missing)


def test_fits_refuses_a_protocol_whose_member_changed():
    for protocol_class, methods, _ in protocols():
        renamed = type("Renamed", (protocol_class,), {"send_400_response": lambda self, message: None})
        assert not fits(renamed, methods)
        gone = {name: value for name, value in methods.items()} | {"a_member_uvicorn_never_had": ()}
        assert not fits(protocol_class, gone)


def test_pyproject_bounds_uvicorn_to_the_versions_whose_members_were_checked():
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    (low, high) = re.search(r'"uvicorn>=([\d.]+),<([\d.]+)"', pyproject).groups()
    installed = tuple(int(part) for part in metadata.version("uvicorn").split(".")[:2])
    assert tuple(map(int, low.split("."))) <= installed < tuple(map(int, high.split(".")))


@pytest.mark.slow  # a server and a held queue: in the slow selection, so plain `pytest -q` stays short
def test_a_uvicorn_whose_members_changed_is_served_by_its_own_h11_and_the_asgi_middleware(monkeypatch, caplog):
    from test_serve_admission import Served, TimedEngine, closed_within
    from test_serve_http_layer import hold

    from sentune.serve.admission import TimedConfig
    from sentune.serve.settings import ServeSettings

    monkeypatch.setitem(uvicorn_private.METHODS, "send_400_response", ("message",))  # as if uvicorn renamed a parameter
    monkeypatch.setitem(uvicorn_private.HTTPTOOLS_METHODS, "send_400_response", ("message",))
    with caplog.at_level(logging.WARNING, logger="uvicorn.error"):
        config = TimedConfig(lambda scope, receive, send: None, ServeSettings(target="t", index=None, model="t"))
    assert config.http == "h11" and "changed the protocol members" in caplog.text
    engine = TimedEngine(per_text=0.6)
    with Served(engine, timeout_s=10.0, max_batch=1, max_queue=1, read_timeout_s=0.5) as served:
        assert served.server.config.http == "h11"
        holding = hold(served, engine)
        refused = served.embed("refused")
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1" and refused.json()["error"]["code"] == "queue_full"
        holding.join(10)
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(b'POST /v1/embeddings HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"in')
            received, seconds = closed_within(sock, 3.0)
            assert received.startswith(b"HTTP/1.1 408") and seconds < 1.5
