"""`sentune serve INDEX_OR_MODEL`: the options parsed, checked by the API before anything heavy loads
(sentune.api.serve.checked_settings; one line naming the option, exit 2), then uvicorn.

One worker: the model and the index are loaded here, before the port opens, so a load error is one line too and the
first answer is a warm one. Several workers (--workers N): uvicorn starts N processes that each load the model and map
the index's vectors, BM25 matrix and document offsets; their pages are the page cache's, shared by all of them rather
than copied (sentune.serve.engine)."""

from __future__ import annotations

import argparse
import sys

from sentune.cli.base import Command
from sentune.serve.settings import API_KEY_ENV, BACKENDS, SMALL_BATCHES, SYSTEMS, ServeSettings, wants_small_batch_graph

SERVE_HELP = "answer searches and OpenAI-style embedding requests over HTTP from an index (or a model), loaded once"


def serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="INDEX_OR_MODEL", help="an index folder (`sentune index`), an adapt run's output folder, or a model")
    p.add_argument(
        "--model",
        help="with an index: the model that encodes the queries instead of the one the index names (a folder or a name: the index's model moved, "
        "say); its weights must be those the index was built with",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on; any but the loopback one needs --api-key")
    p.add_argument("--port", type=int, default=8000, help="the port to listen on")
    p.add_argument(
        "--api-key",
        help=f"every request but /health and the page must send `Authorization: Bearer KEY`; a key given here is visible to every user of "
        f"the machine (ps): prefer ${API_KEY_ENV} or --api-key-file",
    )
    p.add_argument("--api-key-file", metavar="FILE", help="read the API key from this file's one line (readable by you alone, say)")
    p.add_argument(
        "--allowed-hosts",
        metavar="NAMES",
        help="the Host names answered, comma-separated (*.example.com for its subdomains, * for any): the names a reverse proxy passes on; "
        "default: localhost, 127.0.0.1 and [::1] for a server without a key (a page reaching it through DNS rebinding is refused), any with one",
    )
    p.add_argument("--backend", default="torch", choices=BACKENDS, help="torch, or the model's exported graph, run as `sentune encode --backend` runs it")
    p.add_argument(
        "--small-batches",
        default="auto",
        choices=SMALL_BATCHES,
        help="with --backend torch on the CPU, what computes a batch of at most 3 texts (one client's requests): onnx, the model's exact ONNX graph "
        "(fp32, its vectors checked against PyTorch's at start; exported once into the cache), or torch; auto: onnx when ONNX Runtime is installed",
    )
    p.add_argument(
        "--workers", type=int, default=1, help="server processes; each loads the model, all share the index's memory-mapped vectors, BM25 and document offsets"
    )
    p.add_argument("--max-batch", type=int, default=64, help="texts computed in one forward pass, from the requests waiting together")
    p.add_argument(
        "--lanes",
        type=int,
        default=None,
        help="on the CPU with torch, a batch cut by length into this many runs computed side by side, each with its share of the threads "
        "(default: one a torch thread; 1: one pass over the whole batch)",
    )
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long a request waits for others to share its forward pass")
    p.add_argument("--max-batch-inputs", type=int, default=256, help="texts in one request (input list, queries list)")
    p.add_argument("--max-input-chars", type=int, default=100_000, help="characters in one text; longer ones are refused (400)")
    p.add_argument("--max-body-mb", type=float, default=2.0, help="the request body's limit in MB (413 beyond)")
    p.add_argument("--timeout-s", type=float, default=30.0, help="a request not answered in this time gets 503")
    p.add_argument(
        "--max-queue",
        type=int,
        default=64,
        help="requests being answered at once (per endpoint; half as many past saturation, until a second without a refusal); one more gets 503 with Retry-After",
    )
    p.add_argument("--read-timeout-s", type=float, default=10.0, help="a request's head, then its body, must arrive within this (408 and closed)")
    p.add_argument("--max-head-kb", type=int, default=32, help="a request's line and headers, in KiB (431 and closed beyond)")
    p.add_argument("--system", choices=SYSTEMS, help="/search's default system (default: the index's own)")
    p.add_argument("--model-name", help="the model's name in /v1/embeddings answers (default: the hub id or the folder's name)")
    p.add_argument(
        "--reranker",
        metavar="PATH",
        help="a sentence-transformers CrossEncoder (a folder or a hub id): /search reranks its candidates with it, and POST /rerank answers "
        "infinity's and text-embeddings-inference's rerank requests",
    )
    p.add_argument("--rerank-top", type=int, default=50, metavar="N", help="with --reranker: the /search candidates of a query it scores (top_k at most N)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow code shipped with the model (off by default)")
    p.add_argument("--device", help="auto (CUDA when present; $SENTUNE_DEVICE when set), cpu, cuda or cuda:N; onnx backends run on the CPU")
    p.add_argument("--quiet", action="store_true", help="no request log (uvicorn's warnings and errors only)")


def settings_from(args: argparse.Namespace) -> ServeSettings:
    """The options parsed and handed to the API's checks (sentune.api.serve.checked_settings, which names a setting
    by its option here), without importing torch or loading anything; the key, the Host names and the address are the
    command's own (it listens; an app mounted elsewhere does not)."""
    from sentune.api.serve import checked_settings
    from sentune.serve.settings import ServeSettings, allowed_hosts, check_address, option, read_api_key

    values = dict(
        host=args.host,
        port=args.port,
        index_model=args.model,
        api_key=read_api_key(args.api_key, args.api_key_file),
        backend=args.backend,
        workers=args.workers,
        max_batch=args.max_batch,
        lanes=args.lanes,
        small_batches=args.small_batches,
        max_batch_inputs=args.max_batch_inputs,
        batch_wait_ms=args.batch_wait_ms,
        max_input_chars=args.max_input_chars,
        max_body_bytes=int(args.max_body_mb * 1_000_000),
        timeout_s=args.timeout_s,
        max_queue=args.max_queue,
        read_timeout_s=args.read_timeout_s,
        max_head_bytes=args.max_head_kb * 1024,
        system=args.system,
        model_name=args.model_name,
        reranker=args.reranker,
        rerank_top=args.rerank_top,
        trust_remote_code=args.trust_remote_code,
        log_level="warning" if args.quiet else "info",
    )
    hosts = allowed_hosts(args.allowed_hosts, ServeSettings(target=args.target, index=None, model=None, host=args.host, api_key=values["api_key"]))
    return checked_settings(args.target, device=args.device, spell=option, then=check_address, allowed_hosts=hosts, **values)


def cmd_serve(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    from sentune.serve.admission import serve_one
    from sentune.serve.app import create_app

    common = dict(host=settings.host, port=settings.port, log_level=settings.log_level, access_log=settings.log_level == "info")
    where = f"http://{settings.host}:{settings.port}"
    if settings.workers == 1:
        from sentune.serve.engine import Engine

        engine = Engine(settings)
        print(f"serving {settings.target} at {where} (/search, /v1/embeddings, /health, the search page at /)", file=sys.stderr)
        serve_one(settings, create_app(settings, engine), **common)
        return 0
    if settings.backend != "torch" or wants_small_batch_graph(settings):  # the graph exported (or quantized) once here, not by every worker at once
        from sentune.serve.engine import prepare_graph

        prepare_graph(settings)
    from sentune.serve.workers import run_workers

    print(f"serving {settings.target} at {where} with {settings.workers} workers", file=sys.stderr)
    # a worker answers uvicorn's health pings from a thread while it loads; a busy CPU can delay them, hence the margin
    if not run_workers(settings, timeout_worker_healthcheck=60, **common):
        print(f"sentune serve: a worker could not start serving {settings.target} (its error is above); stopped", file=sys.stderr)
        return 1
    return 0


COMMANDS = (Command("serve", SERVE_HELP, serve_options, cmd_serve),)
