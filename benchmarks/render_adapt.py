"""Render benchmarks/results/adapt.md (issue 15) from the kept results of benchmarks/adapt_experiments.sh
(benchmarks/results/adapt/NAME/results.json). A domain whose run has not finished is listed as missing, never filled
in; every number comes from a results.json, and each domain names the command that produced it."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from sentune.adapt.report import METRIC_NAMES, candidate_table

DOMAINS = ("sick", "qqp", "mrpc", "stsb")
KEPT = Path(__file__).parent / "results" / "adapt"


def _pm(row: dict) -> str:
    v = row["vs_unchanged"]
    return f"{v['candidate'] - v['baseline']:+.2f} [{v['difference_low']:+.2f}, {v['difference_high']:+.2f}], P(better) {v['confidence']:.1%}"


def summary_row(name: str, results: dict) -> list[str]:
    c = results["candidates"]
    chosen = results["choice"]["name"]
    unchanged, picked = c["unchanged"]["test"], c[chosen]["test"]
    baseline = c.get("st-simcse", {}).get("test")
    versus = "— (unchanged kept)" if chosen == "unchanged" else _pm(picked)
    better = "yes" if chosen != "unchanged" and picked["vs_unchanged"]["confidence"] >= 0.95 else "no"
    return [
        name,
        METRIC_NAMES[results["meta"]["test"]["metric"]],
        f"{unchanged['score']:.2f}",
        f"`{chosen}`",
        f"{picked['score']:.2f}",
        versus,
        better,
        f"{baseline['score']:.2f}" if baseline else "—",
        ("yes" if picked["score"] >= baseline["score"] else "**no**") if baseline else "—",
        f"{sum(x['seconds'] for x in c.values()) / 60:.0f}",
    ]


def hindsight(results: dict) -> list[str]:
    """What the test set says about candidates the dev pairs could not separate (read after the choice, never by it)."""
    helped = [
        f"`{n}` ({_pm(c['test'])})"
        for n, c in results["candidates"].items()
        if c["eligible"] and c.get("test") and "vs_unchanged" in c["test"] and c["test"]["vs_unchanged"]["confidence"] >= 0.95 and not c["chosen"]
    ]
    if not helped:
        return []
    return [f"Better than unchanged on test with ≥ 95 % confidence but not chosen (dev did not show it): {', '.join(helped)}.", ""]


def predates(results: dict) -> list[str]:
    """Candidates `sentune adapt` tries by default now that this domain's run did not have (added to adapt after it
    was measured): the choice was made without them, and the page says so rather than mixing runs."""
    from sentune.adapt.candidates import METHODS, plan

    later = [f"`{c.name}`" for c in plan(METHODS, own="mean", baseline=True) if c.name not in results["candidates"]]
    if not later:
        return []
    return [f"Not in this run (added to `sentune adapt` after it was measured; the choice was made without them): {', '.join(later)}.", ""]


def render(kept: Path = KEPT) -> str:
    found = {d: json.loads((kept / d / "results.json").read_text()) for d in DOMAINS if (kept / d / "results.json").is_file()}
    lines = [
        "# `sentune adapt` on four domains (issue 15)",
        "",
        f"Rendered {datetime.now(UTC).date()} by `python {' '.join(sys.argv)}` from benchmarks/results/adapt/NAME/results.json; "
        "the runs: `bash benchmarks/adapt_experiments.sh` (each domain's exact command and date below).",
        "",
        "Default model (all-MiniLM-L6-v2), default budget (one pass over the corpus per candidate, dev evaluated 10 times, "
        "early stop after 3 without a new best), 2 CPU cores. The choice reads only the dev pairs; test is scored afterwards. "
        "`st-simcse` is sentence-transformers' own SimCSE recipe (MNRL on (s, s), batch 64, lr 3e-5, one epoch, last "
        "checkpoint), reported beside the candidates and never chosen. Minutes are wall-clock on a 2-core machine that at times "
        "also ran the test suite or another domain: they overstate a candidate's cost on an idle machine.",
        "",
        "## Summary (test set)",
        "",
        "| domain | metric | unchanged | chosen | chosen's score | chosen − unchanged [95 % CI] | better with ≥ 95 %? | ST SimCSE | chosen ≥ ST SimCSE? | minutes, all candidates |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(summary_row(d, r)) + " |" for d, r in found.items()]
    missing = [d for d in DOMAINS if d not in found]
    if missing:
        lines += ["", f'Not yet measured: {", ".join(missing)} (run `EXAMPLES="{" ".join(missing)}" bash benchmarks/adapt_experiments.sh`).']
    for name, results in found.items():
        meta = results["meta"]
        lines += [
            "",
            f"## {name}",
            "",
            f"Command ({meta['date']}):",
            "",
            "```",
            meta.get("command", "?"),
            "```",
            "",
            f"**Choice: `{results['choice']['name']}`** — {results['choice']['reason']}.",
            "",
            *hindsight(results),
            *predates(results),
            candidate_table(results),
            "",
            f"![scores]({'adapt/' + name + '/scores.png'})",
            "",
        ]
        for plot, title in (("dev_curves.png", "dev curves"), ("wise_curve.png", "wise: dev score against α")):
            if (kept / name / plot).is_file():
                lines += [f"![{title}]({'adapt/' + name + '/' + plot})", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "adapt.md"))
    args = parser.parse_args()
    text = render()
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
