"""What `sentune serve` was asked to serve and how, checked before anything heavy is imported: the options' ranges, the
address and its key, the port, and whether INDEX_OR_MODEL is an index, an adapt run's folder or a model. The settings
travel to uvicorn's worker processes as JSON in an environment variable (a worker is a new interpreter)."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sentune.errors import UserError

API_KEY_ENV = "SENTUNE_API_KEY"
BACKENDS = ("torch", "onnx", "onnx-int8")
SMALL_BATCHES = ("auto", "onnx", "torch")  # --small-batches (sentune.core.small_batch_graph): auto = onnx when ONNX Runtime is installed
SYSTEMS = ("hybrid", "dense", "bm25")  # sentune.search.index.SYSTEMS, without importing NumPy to check an option


@dataclass(frozen=True)
class ServeSettings:
    target: str  # the INDEX_OR_MODEL argument as given
    index: str | None  # the index folder, when there is one
    model: str | None  # the model, when no index is served (a name or a folder)
    # with an index: the model that encodes the queries instead of the one the index names (`--model`: a folder or a
    # name, its weights those the index was built with, checked by their digest); None: the index's own
    index_model: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    backend: str = "torch"
    device: str = "cpu"
    workers: int = 1
    max_batch: int = 64  # texts in one forward pass
    lanes: int | None = None  # a CPU batch's lanes (sentune.core.lanes); None: one a torch thread, 1: off
    small_batches: str = "auto"  # what computes a text or two with --backend torch on the CPU (sentune.core.small_batch_graph)
    batch_wait_ms: float = 5.0  # how long the first request of a batch waits for others
    max_batch_inputs: int = 256  # texts in one request
    max_input_chars: int = 100_000  # characters in one text
    max_body_bytes: int = 2_000_000
    timeout_s: float = 30.0  # a request's limit, its wait for a batch included
    max_queue: int = 64  # requests accepted and not yet answered, per batcher; beyond, 503 at once (sentune.serve.batching)
    read_timeout_s: float = 10.0  # a request's head, then its body, must arrive within this (sentune.serve.admission)
    max_head_bytes: int = 32 * 1024  # a request's line and headers (431 beyond; nginx's default bound, 4 buffers of 8 KiB)
    system: str | None = None  # /search's default system (None: the index's own)
    model_name: str | None = None  # the name /v1/embeddings answers with
    reranker: str | None = None  # a CrossEncoder: /search reranks with it, POST /rerank answers (sentune.serve.rerank)
    rerank_top: int = 50  # /search: the candidates of a query the reranker scores
    trust_remote_code: bool = False
    log_level: str = "info"
    # the Host names answered (port aside; None: any). `sentune serve` sets the loopback ones on a keyless server
    allowed_hosts: tuple[str, ...] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        values = json.loads(text)
        hosts = values.get("allowed_hosts")
        return cls(**values | {"allowed_hosts": tuple(hosts) if hosts is not None else None})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def option(param: str, value: Any) -> str:
    """A setting as `sentune serve` spells it: its option and value (max_body_bytes is --max-body-mb, in MB)."""
    if param == "index_model":
        return f"--model {value}"
    if param == "max_body_bytes":
        return f"--max-body-mb {value / 1e6:g}"
    if param == "max_head_bytes":
        return f"--max-head-kb {value / 1024:g}"
    shown = f"{value:g}" if isinstance(value, float) else value
    return f"--{param.replace('_', '-')} {shown}"


def argument(param: str, value: object) -> str:
    """A setting as a Python caller spells it (sentune.serve_app's keyword arguments)."""
    return f"{param}={value!r}"


def check_numbers(settings: ServeSettings, spell=option) -> None:
    """Each setting in its range: one line naming it as `spell` does (`option`: the command's; `argument`: Python's)."""
    s = settings
    checks = [
        (1 <= s.port <= 65535, "port", s.port, "from 1 to 65535"),
        (s.workers >= 1, "workers", s.workers, "at least 1"),
        (s.max_batch >= 1, "max_batch", s.max_batch, "at least 1"),
        (s.lanes is None or s.lanes >= 1, "lanes", s.lanes, "at least 1 (1: no lanes)"),
        (0 <= s.batch_wait_ms <= 1000, "batch_wait_ms", s.batch_wait_ms, "from 0 to 1000"),
        (s.max_batch_inputs >= 1, "max_batch_inputs", s.max_batch_inputs, "at least 1"),
        (s.max_input_chars >= 1, "max_input_chars", s.max_input_chars, "at least 1"),
        (s.max_body_bytes >= 1024, "max_body_bytes", s.max_body_bytes, "at least 0.001 (1 kB)" if spell is option else "at least 1024 (1 kB)"),
        (s.timeout_s > 0, "timeout_s", s.timeout_s, "more than 0"),
        (s.max_queue >= 1, "max_queue", s.max_queue, "at least 1"),
        (s.read_timeout_s > 0, "read_timeout_s", s.read_timeout_s, "more than 0"),
        (s.max_head_bytes >= 1024, "max_head_bytes", s.max_head_bytes, "at least 1" if spell is option else "at least 1024 (1 KiB)"),
        (s.rerank_top >= 1, "rerank_top", s.rerank_top, "at least 1"),
        (s.backend in BACKENDS, "backend", s.backend, f"choose {', '.join(BACKENDS)}"),
        (s.small_batches in SMALL_BATCHES, "small_batches", s.small_batches, f"choose {', '.join(SMALL_BATCHES)}"),
        (
            s.small_batches != "onnx" or (s.backend == "torch" and s.device == "cpu"),
            "small_batches",
            s.small_batches,
            f"for {spell('backend', 'torch')} on the CPU (here {spell('backend', s.backend)}, {spell('device', s.device)})",
        ),
        (s.system is None or s.system in SYSTEMS, "system", s.system, f"choose {', '.join(SYSTEMS)}"),
    ]
    for ok, param, value, rule in checks:
        if not ok:
            raise UserError(f"{spell(param, value)}: {rule}")


def read_api_key(given: str | None, file: str | None) -> str | None:
    """The key from --api-key, --api-key-file (its one line) or $SENTUNE_API_KEY, in this order; one line when it could
    never match: a client sends it in a header, which holds no leading or trailing space and no control character."""
    if given is not None and file is not None:
        raise UserError("--api-key and --api-key-file: give one of them")
    where, key = ("--api-key", given) if given is not None else (f"${API_KEY_ENV}", os.environ.get(API_KEY_ENV) or None)
    if file is not None:
        where = f"--api-key-file {file}"
        try:
            text = Path(file).read_bytes().decode("utf-8")  # bytes: read_text would turn a \r\n into \n unseen
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{where}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
        key = text.removesuffix("\n")  # the line ending an editor adds; a \r before it is refused below, as in a key given
        if "\n" in key:
            raise UserError(f"{where}: more than one line; the file holds the key alone")
    if key is None:
        return None
    if not key.strip():
        raise UserError(f"{where}: empty")
    bad = next((i for i, c in enumerate(key) if not "!" <= c <= "~"), None)  # printable ASCII, RFC 6750's token68 and more
    if bad is not None:
        what = "a space" if key[bad] == " " else f"the character {key[bad]!r}"
        raise UserError(f"{where}: {what} at position {bad + 1}; a key is sent in an HTTP header: use printable ASCII without spaces")
    return key


def allowed_hosts(given: str | None, settings: ServeSettings) -> tuple[str, ...] | None:
    """--allowed-hosts as names (None: any Host); by default the loopback names for a server without a key, which is
    only ever one on the loopback address (check_address), and any Host for one with a key (a page cannot send it)."""
    if given is None:
        return None if settings.api_key else tuple(dict.fromkeys(("localhost", "127.0.0.1", "[::1]", settings.host)))
    names = tuple(name.strip().lower().rstrip(".") for name in given.split(",") if name.strip())
    if not names:
        raise UserError(f"--allowed-hosts {given!r}: no name; give names such as search.example.com,localhost (or *)")
    return None if "*" in names else names


def check_address(settings: ServeSettings) -> None:
    """Another address than the loopback one opens the server to the network: only with a key. The port must be free
    now (checked by binding it for a moment), not after the model has loaded."""
    if not is_loopback(settings.host) and not settings.api_key:
        raise UserError(
            f"--host {settings.host}: the server would answer other machines; give --api-key KEY (or {API_KEY_ENV}) so that "
            "every request must carry `Authorization: Bearer KEY`, or bind 127.0.0.1"
        )
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # what uvicorn sets: a port in TIME_WAIT is free to it
        try:
            probe.bind((settings.host, settings.port))
        except OSError as exc:
            raise UserError(f"--host {settings.host} --port {settings.port}: cannot listen there ({exc.strerror or exc})") from None


def what_to_serve(target: str, system: str | None = None, where: str = "INDEX_OR_MODEL") -> tuple[str | None, str | None]:
    """(index folder, None) or (None, model): an index folder (sentune.search.folder), an adapt run's folder (its index, or its
    model when the run saved no index) or a model (a folder or a name sentune.core.models accepts). A folder that is
    none of these is one line, before any model code loads."""
    from sentune.core.models import check_model_name
    from sentune.search.folder import IndexFolder

    path = Path(target).expanduser()
    index_file = IndexFolder(path).settings_file.name
    if IndexFolder(path).has_index():
        from sentune.search.index import SearchIndex

        SearchIndex.open(path, system)  # a foreign or unfinished index, or a hybrid it holds no fusion for: its one line now
        return str(path), None
    if (path / "adapt.json").is_file():
        if (path / "model").is_dir():
            return None, check_model_name(str(path / "model"), where)
        raise UserError(f"{path}: an adapt run's folder with neither an index ({index_file}) nor a model (model/): has the run finished?")
    if path.is_dir() and not any((path / name).exists() for name in ("config.json", "modules.json")):
        raise UserError(f"{path}: neither an index ({index_file}, from `sentune index`) nor a model folder (config.json)")
    return None, check_model_name(target, where)


def wants_small_batch_graph(settings: ServeSettings) -> bool:
    """Whether the server runs small batches on the model's exact ONNX graph (sentune.core.small_batch_graph): with
    --backend torch on the CPU, unless --small-batches torch, and under auto only when ONNX Runtime is installed."""
    import importlib.util

    if settings.backend != "torch" or settings.device != "cpu" or settings.small_batches == "torch":
        return False
    return settings.small_batches == "onnx" or importlib.util.find_spec("onnxruntime") is not None


def check_libraries(settings: ServeSettings | None = None, spell=option) -> None:
    """The libraries the server needs, and those its settings ask for, installed: one line naming what to install."""
    import importlib.util

    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UserError("sentune serve needs FastAPI and uvicorn: pip install 'sentune[serve]'") from None
    if settings is not None and settings.small_batches == "onnx" and importlib.util.find_spec("onnxruntime") is None:
        asked, other = spell("small_batches", "onnx"), spell("small_batches", "torch")
        raise UserError(f"{asked} needs ONNX Runtime: pip install 'sentune[onnx]' (or {other})")
