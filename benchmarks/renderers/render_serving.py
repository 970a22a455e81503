"""Render benchmarks/results/serving.md from a serving benchmark's measurements (benchmarks/runners/serving.sh writes
them with benchmarks/speed/serve_load.py into one JSON file): each server's throughput and p50/p99 latency on /search
and /v1/embeddings at each number of concurrent clients, its start-up time and memory, and the wall time of one
`sentune search --query` process beside a served query. Every number is read from the file (kept in
benchmarks/results/runs/serving/load.json, with conditions.txt beside it); a server that was not measured is listed as
missing."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from sentune.analysis.pages import emit, machine_conditions, markdown_table

SERVERS = ("sentune-torch", "sentune-onnx-int8", "infinity")
SEARCH_PROCESS = "sentune search --query"
SEARCH_TARGET_MS = 50  # the target: /search p50 for one query on SciFact, 2 cores


def level_rows(measured: dict, endpoint: str) -> list[list[str]]:
    rows = []
    for label in SERVERS:
        for level in (lv for lv in measured.get(label, {}).get("levels", []) if lv["endpoint"] == endpoint):
            rows.append(
                [
                    label,
                    str(level["clients"]),
                    f"{level['throughput_rps']:.1f}" if level["throughput_rps"] is not None else "—",
                    f"{level['p50_ms']:.1f}" if level["p50_ms"] is not None else "—",
                    f"{level['p99_ms']:.1f}" if level["p99_ms"] is not None else "—",
                    f"{level['requests']} in {level['seconds']:.1f} s",
                    str(level["errors"]),
                    f"{level['load_generator_cpu_s']:.1f}",
                ]
            )
    return rows


HEADER = ["server", "clients", "requests/s", "p50 ms", "p99 ms", "answered", "errors", "load generator CPU s"]
WRK_HEADER = ["server", "connections", "served/s", "p50 ms", "p99 ms", "served", "503s (with Retry-After)", "503 p50 / p99 ms", "other errors", "wrk CPU s"]
EMBEDDINGS_TARGET = 1.2  # the issue's: /v1/embeddings throughput against infinity's at 1, 4, 16 and 64 connections
SEARCH_WRK_TARGET_MS = 15  # the issue's: /search p50 at one connection


def ms(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "—"


def wrk_rows(measured: dict, endpoint: str) -> list[list[str]]:
    rows = []
    for label in SERVERS:
        for lv in (lv for lv in measured.get(label, {}).get("levels", []) if lv["endpoint"] == endpoint):
            rows.append(
                [
                    label,
                    str(lv["clients"]),
                    ms(lv["throughput_rps"]),
                    ms(lv["p50_ms"]),
                    ms(lv["p99_ms"]),
                    f"{lv['requests']} in {lv['seconds']:.1f} s",
                    f"{lv['shed']} ({lv['shed_with_retry_after']})",
                    f"{ms(lv['shed_p50_ms'])} / {ms(lv['shed_p99_ms'])}",
                    str(lv["errors"]),
                    f"{lv['load_generator_cpu_s']:.1f}",
                ]
            )
    return rows


def level_of(measured: dict, label: str, endpoint: str, connections: int) -> dict | None:
    found = [lv for lv in measured.get(label, {}).get("levels", []) if lv["endpoint"] == endpoint and lv["clients"] == connections]
    return found[0] if found else None


def wrk_verdicts(measured: dict) -> list[str]:
    """The issue's targets, each checked against the measurements: a line each, saying met or not."""
    lines = []
    for label in ("sentune-torch", "sentune-onnx-int8"):
        for n in (1, 4, 16, 64):
            ours, theirs = level_of(measured, label, "embeddings", n), level_of(measured, "infinity", "embeddings", n)
            if ours and theirs and ours["throughput_rps"] and theirs["throughput_rps"]:
                ratio = ours["throughput_rps"] / theirs["throughput_rps"]
                met = ratio >= EMBEDDINGS_TARGET and ours["p99_ms"] <= theirs["p99_ms"]
                lines.append(
                    f"- /v1/embeddings, {n} connection{'s' if n > 1 else ''}: {label} {ours['throughput_rps']:.1f}/s, {ratio:.2f}× infinity's "
                    f"{theirs['throughput_rps']:.1f}, p99 {ours['p99_ms']:.1f} ms against {theirs['p99_ms']:.1f}: "
                    f"{'met' if met else 'not met'} (≥ {EMBEDDINGS_TARGET}×, p99 no higher)."
                )
    one = level_of(measured, "sentune-torch", "search", 1)
    if one and one["p50_ms"] is not None:
        verdict = "met" if one["p50_ms"] <= SEARCH_WRK_TARGET_MS else "not met"
        lines.append(f"- /search, one connection, PyTorch: p50 {one['p50_ms']:.1f} ms: {verdict} (≤ {SEARCH_WRK_TARGET_MS} ms).")
    for label in ("sentune-torch", "sentune-onnx-int8"):
        for endpoint in ("embeddings", "search"):
            at64, at256 = level_of(measured, label, endpoint, 64), level_of(measured, label, endpoint, 256)
            if at64 and at256 and at64["throughput_rps"] and at256["throughput_rps"] is not None and at256["p99_ms"] is not None:
                held = at256["throughput_rps"] / at64["throughput_rps"]
                lines.append(
                    f"- {label} {endpoint}, 256 connections: {at256['throughput_rps']:.1f} served/s, {held:.2f}× the 64 level's; "
                    f"{at256['shed']} answered 503 ({at256['shed_with_retry_after']} with Retry-After) in p50 {ms(at256['shed_p50_ms'])} / "
                    f"p99 {ms(at256['shed_p99_ms'])} ms; p99 of the served {at256['p99_ms']:.1f} ms against {at64['p99_ms']:.1f} at 64."
                )
    return lines


def intro(measured: dict, source: str, about: list[str]) -> list[str]:
    """The title, where the numbers come from, how the load was made, and each server's command and conditions."""
    lines = [
        "# Serving: `sentune serve` beside infinity",
        "",
        f"Measured by `bash benchmarks/runners/serving.sh` (measurements: `{source}`, rendered by `benchmarks/renderers/render_serving.py`).",
        *about,
        "",
    ]
    missing = [label for label in SERVERS if label not in measured]
    if missing:
        lines += [f"Not measured: {', '.join(missing)} (see the runner's output).", ""]
    for label in SERVERS:
        if label in measured:
            m = measured[label]
            lines += [f"- **{label}**, {m['date']}, load average before {m['load_average_before']} on {m['cpus']} CPUs: `{m['command']}`"]
    lines += [""]
    return lines


def render(measured: dict, source: str, screenshot: str | None) -> list[str]:
    if any(lv.get("generator") == "wrk" for record in measured.values() for lv in record.get("levels", [])):
        return render_wrk(measured, source, screenshot)
    about = [
        "Each client sends one text a request and waits for the answer before sending the next; the load generator",
        "(`benchmarks/speed/serve_load.py`, httpx) runs on the same machine and its CPU seconds are in each row.",
    ]
    lines = intro(measured, source, about)
    search_rows = level_rows(measured, "search")
    if search_rows:
        lines += ["## `/search` (one query a request, top 10)", "", *markdown_table(HEADER, search_rows), ""]
        one = [lv for lv in measured.get("sentune-torch", {}).get("levels", []) if lv["endpoint"] == "search" and lv["clients"] == 1]
        if one and one[0]["p50_ms"] is not None:
            verdict = "under" if one[0]["p50_ms"] < SEARCH_TARGET_MS else "not under"
            lines += [f"One client, PyTorch: p50 {one[0]['p50_ms']:.1f} ms, {verdict} the {SEARCH_TARGET_MS} ms target.", ""]
    embed_rows = level_rows(measured, "embeddings")
    if embed_rows:
        lines += ["## `/v1/embeddings` (one text a request)", "", *markdown_table(HEADER, embed_rows), ""]
        at16 = {
            label: lv["throughput_rps"]
            for label in SERVERS
            for lv in measured.get(label, {}).get("levels", [])
            if lv["endpoint"] == "embeddings" and lv["clients"] == 16 and lv["throughput_rps"]
        }
        if "infinity" in at16:
            for label in ("sentune-torch", "sentune-onnx-int8"):
                if label in at16:
                    lines += [f"- 16 clients: {label} {at16[label]:.1f} requests/s, {at16[label] / at16['infinity']:.2f}× infinity's {at16['infinity']:.1f}."]
            lines += [""]
    return lines + tail(measured, source, screenshot)


def render_wrk(measured: dict, source: str, screenshot: str | None) -> list[str]:
    about = [
        "The load is wrk's (`benchmarks/speed/serve_load.py` with `serve_load.lua`): each connection, one a wrk thread, sends",
        "SciFact's queries in turn, one a request, and waits for the answer before the next; latencies are timed per request",
        "by status (served: 200; shed: 503). wrk runs on the same machine; its CPU seconds are in each row.",
    ]
    lines = intro(measured, source, about)
    for endpoint, title in (("search", "## `/search` (hybrid, one query a request, top 10)"), ("embeddings", "## `/v1/embeddings` (one text a request)")):
        rows = wrk_rows(measured, endpoint)
        if rows:
            lines += [title, "", *markdown_table(WRK_HEADER, rows), ""]
    verdicts = wrk_verdicts(measured)
    if verdicts:
        lines += ["## Against the targets of issue 71", "", *verdicts, ""]
    return lines + tail(measured, source, screenshot)


def tail(measured: dict, source: str, screenshot: str | None) -> list[str]:
    """The vectors' agreement, start-up and memory, one query without a server, the page, the machine's conditions."""
    lines: list[str] = []
    reference = measured.get("sentune-torch", {}).get("probe")  # one text embedded by each server: is it the same model?
    if reference:
        base = np.array(reference["embedding"])
        for label in SERVERS[1:]:
            probe = measured.get(label, {}).get("probe")
            if probe:
                other = np.array(probe["embedding"])
                cosine = float(base @ other / (np.linalg.norm(base) * np.linalg.norm(other)))
                lines += [f"- {label}'s vector of “{probe['text']}” has cosine {cosine:.4f} to sentune-torch's."]
        lines += [""]
    memory_rows = [
        [
            label,
            f"{measured[label]['startup_s']:.1f}",
            f"{measured[label]['memory_idle']['rss_mib']:.0f}",
            f"{measured[label]['memory_after_load']['rss_mib']:.0f}",
            f"{measured[label]['memory_after_load']['pss_mib']:.0f}",
            str(measured[label]["memory_after_load"]["processes"]),
        ]
        for label in SERVERS
        if label in measured and "memory_after_load" in measured[label]
    ]
    if memory_rows:
        header = ["server", "start-up s (to the first /health)", "RSS MiB idle", "RSS MiB after the load", "PSS MiB after the load", "processes"]
        lines += ["## Start-up and memory", "", *markdown_table(header, memory_rows), ""]
    if SEARCH_PROCESS in measured:
        process = measured[SEARCH_PROCESS]
        times = ", ".join(f"{t:.2f}" for t in process["wall_s"])
        runs = len(process["wall_s"])
        lines += ["## One query without a server", "", f"`{process['command']}`, the whole process, {runs} run{'s' if runs != 1 else ''}: {times} s."]
        one = [lv for lv in measured.get("sentune-torch", {}).get("levels", []) if lv["endpoint"] == "search" and lv["clients"] == 1]
        if one and one[0]["p50_ms"]:
            median = sorted(process["wall_s"])[runs // 2]
            lines += [
                f"Served, the same kind of query (one client, PyTorch) takes {one[0]['p50_ms']:.1f} ms at the median: {median * 1000 / one[0]['p50_ms']:.0f}× less."
            ]
        lines += [""]
    if screenshot:
        lines += ["## The search page", "", f"![the search page]({screenshot})", ""]
    lines += machine_conditions(Path(source).parent / "conditions.txt")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("measurements", help="the JSON file serve_load.py wrote")
    parser.add_argument("--screenshot", help="the page's screenshot, relative to the page")
    parser.add_argument("--out")
    args = parser.parse_args()
    measured = json.loads(Path(args.measurements).read_text())
    emit(render(measured, args.measurements, args.screenshot), args.out)


if __name__ == "__main__":
    main()
