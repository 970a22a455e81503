"""Load on an embedding or search server over localhost: throughput and p50/p99 latency at several numbers of concurrent
clients, the server's start-up time and memory. Bounded: each level stops after --requests requests or --seconds
seconds, whichever comes first; the server is started and stopped here, and listens on 127.0.0.1 only.

    # one server, started by this script (its command ends with the port), measured on both endpoints
    python benchmarks/speed/serve_load.py server --label sentune-torch --port 8101 \\
        --endpoints search,embeddings --texts queries.jsonl --out benchmarks/runs/serving/load.json -- \\
        sentune serve /tmp/scifact-index --port 8101 --quiet
    # wall time of whole commands, for the page's comparison (one `sentune search --query` process)
    python benchmarks/speed/serve_load.py command --label "sentune search --query" --repeat 3 \\
        --out benchmarks/runs/serving/load.json -- sentune search /tmp/scifact-index --query "..."

Each client sends one text a request and waits for the answer before the next (a closed loop): at 1 client the
latency is one request's alone, at 64 the queue behind a busy server is in it. The load generator runs on the same
machine as the server and takes CPU from it; the page says how much (its own CPU seconds per level).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

PROBE = "a man plays the guitar"
WARMUP_REQUESTS = 8  # a level's first requests, not counted: connections open, the server's first batches


def shown(command: list[str]) -> str:
    """The command as the page prints it: a path inside the repository relative to it, one outside by its last part, so
    that no page names this machine's folders."""
    root = Path.cwd().resolve()

    def one(token: str) -> str:
        if not token.startswith("/"):
            return token
        path = Path(token)
        return str(path.relative_to(root)) if path.is_relative_to(root) else f".../{path.parent.name}/{path.name}"

    return shlex.join(one(t) for t in command)


def read_texts(path: Path, limit: int) -> list[str]:
    """Texts to send: a queries.jsonl's "text" fields, or a text file's lines."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [json.loads(line)["text"] for line in lines] if path.suffix == ".jsonl" else lines
    if not texts:
        raise SystemExit(f"{path}: no texts")
    return texts[:limit]


def request_for(endpoint: str, text: str, model: str, embeddings_path: str) -> tuple[str, dict]:
    if endpoint == "search":
        return "/search", {"query": text, "top_k": 10}
    return embeddings_path, {"input": [text], "model": model}


async def load_level(
    base: str, endpoint: str, texts: list[str], clients: int, requests: int, seconds: float, headers: dict, model: str, embeddings_path: str
) -> dict:
    """`clients` closed-loop clients until `requests` answers or `seconds` have passed; latencies of the counted ones."""
    import httpx

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits, timeout=120) as client:
        counter = iter(range(10**9))

        async def one(number: int) -> tuple[float, int]:
            path, body = request_for(endpoint, texts[number % len(texts)], model, embeddings_path)
            began = time.perf_counter()
            answer = await client.post(path, json=body)
            return time.perf_counter() - began, answer.status_code

        await asyncio.gather(*(one(next(counter)) for _ in range(min(WARMUP_REQUESTS, requests))))
        latencies: list[float] = []
        errors = 0
        deadline = time.perf_counter() + seconds
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)

        async def client_loop() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                number = next(counter)
                if number >= requests + WARMUP_REQUESTS:
                    return
                latency, status = await one(number)
                if status == 200:
                    latencies.append(latency)
                else:
                    errors += 1

        began = time.perf_counter()
        await asyncio.gather(*(client_loop() for _ in range(clients)))
        wall = time.perf_counter() - began
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    values = np.array(latencies) * 1000
    return {
        "endpoint": endpoint,
        "clients": clients,
        "requests": len(latencies),
        "errors": errors,
        "seconds": round(wall, 3),
        "throughput_rps": round(len(latencies) / wall, 2) if wall > 0 else None,
        "p50_ms": round(float(np.percentile(values, 50)), 2) if len(values) else None,
        "p99_ms": round(float(np.percentile(values, 99)), 2) if len(values) else None,
        "mean_ms": round(float(values.mean()), 2) if len(values) else None,
        "load_generator_cpu_s": round((cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime), 2),
    }


def process_tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                pass
    return pids


def memory_of(pid: int) -> dict:
    """The server's processes: resident memory summed (shared pages counted in each) and proportional (shared pages
    split between the processes that map them: what the server as a whole holds)."""
    rss = pss = 0
    pids = process_tree(pid)
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                name, _, rest = line.partition(":")
                if name == "Rss":
                    rss += int(rest.split()[0])
                elif name == "Pss":
                    pss += int(rest.split()[0])
        except OSError:
            pass
    return {"processes": len(pids), "rss_mib": round(rss / 1024, 1), "pss_mib": round(pss / 1024, 1)}


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> float:
    import httpx

    began = time.perf_counter()
    while time.perf_counter() - began < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"the server ended with {proc.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return time.perf_counter() - began
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not answer within {timeout:.0f} s")


def save(out: Path, label: str, record: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(out.read_text()) if out.is_file() else {}
    saved[label] = record
    out.write_text(json.dumps(saved, indent=2) + "\n")


def conditions() -> dict:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def run_server(args: argparse.Namespace) -> None:
    command = args.command
    if not command or f"{args.port}" not in command:
        raise SystemExit("give the server's command after --, with the same port as --port")
    host = f"http://127.0.0.1:{args.port}"
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    texts = read_texts(Path(args.texts), args.max_texts)
    record = {"command": shown(command), **conditions(), "levels": []}
    log = open(Path(args.out).with_suffix(f".{args.label.replace(' ', '_')}.log"), "w")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        record["startup_s"] = round(wait_healthy(host + args.health, proc, args.startup_timeout), 2)
        record["memory_idle"] = memory_of(proc.pid)
        if "embeddings" in args.endpoints.split(","):  # one vector kept, so that the page can show the servers run the same model
            import httpx

            answer = httpx.post(host + args.embeddings_path, json={"input": [PROBE], "model": args.model}, headers=headers, timeout=60)
            record["probe"] = {"text": PROBE, "embedding": answer.json()["data"][0]["embedding"]}
        for endpoint in args.endpoints.split(","):
            for clients in (int(c) for c in args.clients.split(",")):
                level = asyncio.run(load_level(host, endpoint, texts, clients, args.requests, args.seconds, headers, args.model, args.embeddings_path))
                print(json.dumps({"label": args.label, **level}), flush=True)
                record["levels"].append(level)
        record["memory_after_load"] = memory_of(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):  # already ended (a refused option, say)
            os.killpg(proc.pid, 15)  # the server and any workers it started: their own session, nothing else
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()
    save(Path(args.out), args.label, record)


def run_command(args: argparse.Namespace) -> None:
    times = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        done = subprocess.run(args.command, capture_output=True, text=True)
        times.append(round(time.perf_counter() - began, 3))
        if done.returncode != 0:
            raise SystemExit(f"{shlex.join(args.command)} failed: {done.stderr[-500:]}")
    save(Path(args.out), args.label, {"command": shown(args.command), **conditions(), "wall_s": times})
    print(json.dumps({"label": args.label, "wall_s": times}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    server = sub.add_parser("server", help="start a server, load it at each level, stop it")
    server.add_argument("--label", required=True)
    server.add_argument("--port", type=int, required=True)
    server.add_argument("--endpoints", default="search,embeddings", help="search, embeddings, or both")
    server.add_argument("--clients", default="1,4,16,64")
    server.add_argument("--requests", type=int, default=2000, help="answers counted per level at most")
    server.add_argument("--seconds", type=float, default=30.0, help="seconds per level at most")
    server.add_argument("--texts", required=True, help="queries.jsonl or a text file, one text a line")
    server.add_argument("--max-texts", type=int, default=10_000)
    server.add_argument("--model", default="model", help="the model name sent in embeddings requests")
    server.add_argument("--embeddings-path", default="/v1/embeddings", help="where the server answers OpenAI embeddings requests")
    server.add_argument("--health", default="/health")
    server.add_argument("--api-key")
    server.add_argument("--startup-timeout", type=float, default=600.0)
    server.add_argument("--out", required=True)
    server.add_argument("command", nargs=argparse.REMAINDER)
    command = sub.add_parser("command", help="the wall time of a whole command, --repeat times")
    command.add_argument("--label", required=True)
    command.add_argument("--repeat", type=int, default=3)
    command.add_argument("--out", required=True)
    command.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    run_server(args) if args.what == "server" else run_command(args)


if __name__ == "__main__":
    main()
