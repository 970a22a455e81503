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

SERVERS = ("sentune-torch", "sentune-onnx-int8", "infinity")  # what every page measures; a rounds run adds LABEL@COMMIT rows
BEFORE = "@"  # "sentune-torch@3645b07": the server of an earlier commit, measured in the same rounds
# A level is slower when the 95 % interval of its paired ratios (now ÷ before, one a round: a t interval on their logs)
# lies below 1, and shown not slower when the interval lies above 1 - SLOWER_MARGIN; between, the rounds cannot say.
# A median alone called 8 of 20 levels slower where fresh processes put them within noise: rounds of 6 s move a level
# by up to a third.
SLOWER_MARGIN = 0.05
CONFIDENCE = 0.95
SEARCH_PROCESS = "sentune search --query"
SEARCH_TARGET_MS = 50  # the target: /search p50 for one query on SciFact, 2 cores


def servers(measured: dict) -> list[str]:
    """The measured servers: the page's own first, then any other (an earlier commit's) in the order measured."""
    served = [label for label, record in measured.items() if "levels" in record]
    return [label for label in SERVERS if label in served] + [label for label in served if label not in SERVERS]


def level_rows(measured: dict, endpoint: str) -> list[list[str]]:
    rows = []
    for label in servers(measured):
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


def by_round(level: dict) -> str:
    return " ".join(ms(r["throughput_rps"]) for r in level.get("rounds", []))


def wrk_rows(measured: dict, endpoint: str) -> list[list[str]]:
    rows = []
    for label in servers(measured):
        for lv in (lv for lv in measured.get(label, {}).get("levels", []) if lv["endpoint"] == endpoint):
            rows.append(
                [
                    label,
                    str(lv["clients"]),
                    ms(lv["throughput_rps"]),
                    *([by_round(lv)] if "rounds" in lv else []),
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
    for label in servers(measured):
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
            for label in servers(measured)
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
    rounds = next((record["rounds"] for record in measured.values() if "rounds" in record), None)
    if rounds:
        about += [
            f"Every server was up for the whole run; each level was measured in {rounds} rounds that took the servers in",
            "turn, in an order rotated each round, and a row gives the median of its rounds (its rounds beside it, in the",
            "order run) with the counts summed over them. Idle servers' CPU while another was loaded is under Start-up and memory.",
        ]
    lines = intro(measured, source, about)
    header = WRK_HEADER[:3] + (["served/s by round"] if rounds else []) + WRK_HEADER[3:]
    for endpoint, title in (("search", "## `/search` (hybrid, one query a request, top 10)"), ("embeddings", "## `/v1/embeddings` (one text a request)")):
        rows = wrk_rows(measured, endpoint)
        if rows:
            lines += [title, "", *markdown_table(header, rows), ""]
    before = against_before(measured)
    if before:
        lines += before
    verdicts = wrk_verdicts(measured)
    if verdicts:
        lines += ["## Against the targets of issue 71", "", *verdicts, ""]
    return lines + tail(measured, source, screenshot)


def paired_ratios(ours: dict, theirs: dict) -> list[float]:
    """Round by round, our served/s over theirs (the same round: minutes apart at most)."""
    return [
        a["throughput_rps"] / b["throughput_rps"] for a, b in zip(ours["rounds"], theirs["rounds"], strict=True) if a["throughput_rps"] and b["throughput_rps"]
    ]


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of paired ratios and its CONFIDENCE interval: a t interval on the logs (a throughput's
    ratio is multiplicative: 0.8 and 1.25 are as far from 1); one round alone gives no interval (0, inf)."""
    from scipy import stats

    logs = np.log(np.asarray(ratios, dtype=float))
    mean = float(logs.mean())
    if len(logs) < 2:
        return float(np.exp(mean)), 0.0, float("inf")
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs)))
    return float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half))


def against_before(measured: dict) -> list[str]:
    """Each server beside the same server of an earlier commit measured in the same rounds: the paired ratio of
    served/s by level (its median and range), for /v1/embeddings each one's ratio to infinity too, and a verdict."""
    pairs = [(label.split(BEFORE)[0], label) for label in servers(measured) if BEFORE in label and label.split(BEFORE)[0] in measured]
    if not pairs:
        return []
    header = [
        "server", "endpoint", "connections", "served/s now", "before", "now ÷ before, by round",
        f"geometric mean [{CONFIDENCE:.0%} interval]", "× infinity now / before", "slower?",
    ]  # fmt: skip
    rows: list[list[str]] = []
    slower: list[str] = []
    unshown: list[str] = []
    for now, before in pairs:
        for endpoint in ("search", "embeddings"):
            for lv in (lv for lv in measured[now]["levels"] if lv["endpoint"] == endpoint):
                old = level_of(measured, before, endpoint, lv["clients"])
                if not old or "rounds" not in lv or "rounds" not in old:
                    continue
                ratios = paired_ratios(lv, old)
                if not ratios:
                    continue
                mean, low, high = ratio_interval(ratios)
                verdict = "slower" if high < 1 else "no" if low >= 1 - SLOWER_MARGIN else "not shown"
                reference = level_of(measured, "infinity", endpoint, lv["clients"])
                versus = (
                    f"{lv['throughput_rps'] / reference['throughput_rps']:.2f} / {old['throughput_rps'] / reference['throughput_rps']:.2f}"
                    if reference and reference["throughput_rps"] and lv["throughput_rps"] and old["throughput_rps"]
                    else "—"
                )
                rows.append(
                    [
                        now,
                        endpoint,
                        str(lv["clients"]),
                        ms(lv["throughput_rps"]),
                        ms(old["throughput_rps"]),
                        " ".join(f"{r:.2f}" for r in ratios),
                        f"{mean:.2f} [{low:.2f}, {high:.2f}]",
                        versus,
                        verdict,
                    ]
                )
                slower += [f"{now} {endpoint} at {lv['clients']}"] if verdict == "slower" else []
                unshown += [f"{now} {endpoint} at {lv['clients']}"] if verdict == "not shown" else []
    commits = sorted({label.split(BEFORE)[1] for _, label in pairs})
    fresh = all(measured[label].get("fresh_processes") for pair in pairs for label in pair)
    rule = (
        f"Each round's ratio pairs two samples taken seconds apart{', every round on fresh server processes' if fresh else ''}. "
        f"A level counts as slower when the {CONFIDENCE:.0%} interval of its ratios (a t interval on their logs) lies below 1, "
        f"and as not slower (no) when it lies above {1 - SLOWER_MARGIN:.2f}; between, the rounds cannot say (not shown). "
        f"Of {len(rows)} levels that do not differ, about {len(rows) * (1 - CONFIDENCE) / 2:.1f} would be called slower by chance."
    )
    verdict = (f"Slower: {', '.join(slower)}." if slower else f"No level is slower than at {', '.join(commits)}.") + (
        f" Not shown either way ({len(unshown)} of {len(rows)}): {', '.join(unshown)}."
        if unshown
        else f" All {len(rows)} are shown not slower by more than {SLOWER_MARGIN:.0%}."
    )
    return [f"## Against the code of {', '.join(commits)}, in the same rounds", "", rule, "", *markdown_table(header, rows), "", verdict, ""]


def settling(measured: dict) -> list[str]:
    """How long the servers were waited for before each measured level, until none still worked off the load before."""
    rounds = [r for label in servers(measured) for level in measured[label].get("levels", []) for r in level.get("rounds", []) if "settle_s" in r]
    if not rounds:
        return []
    rule = next(measured[label]["quiet_before_each_level"] for label in servers(measured) if "quiet_before_each_level" in measured[label])
    waits = [r["settle_s"] for r in rounds]
    loud = sum(not r["settled"] for r in rounds)
    return [
        f"Before each of the {len(rounds)} measured levels the servers were waited for until all of them together spent "
        f"under {rule['cpu_s']:g} CPU s in {rule['window_s']:g} s (one that queues rather than sheds works off the last "
        f"level's requests after wrk stops): {np.median(waits):.1f} s at the median, {max(waits):.1f} s at most; "
        + (f"**{loud} measured without going quiet** within {rule['timeout_s']:g} s." if loud else "every one went quiet."),
        "",
    ]


def tail(measured: dict, source: str, screenshot: str | None) -> list[str]:
    """The vectors' agreement, start-up and memory, one query without a server, the page, the machine's conditions."""
    lines: list[str] = []
    reference = measured.get("sentune-torch", {}).get("probe")  # one text embedded by each server: is it the same model?
    if reference:
        base = np.array(reference["embedding"])
        for label in servers(measured)[1:]:
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
            *([f"{measured[label]['idle_cpu_s']:.1f}"] if "idle_cpu_s" in measured[label] else []),
        ]
        for label in servers(measured)
        if "memory_after_load" in measured[label]
    ]
    if memory_rows:
        header = ["server", "start-up s (to the first /health)", "RSS MiB idle", "RSS MiB after the load", "PSS MiB after the load", "processes"]
        if any("idle_cpu_s" in measured[label] for label in servers(measured)):  # a rounds run: all up at once
            header += ["CPU s idle while the others were loaded"]
        lines += ["## Start-up and memory", "", *markdown_table(header, memory_rows), ""]
    lines += settling(measured)
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
