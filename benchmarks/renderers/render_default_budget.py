"""One table of every `sentune adapt --example NAME` run without --time (issue 72 item 6): the rows of each
benchmarks/results/default_budget-NAME.md page that benchmarks/runners/default_budget.sh wrote, each with the commit,
date and conditions its page records, and the largest candidate minutes against the 30-minute target.

    python benchmarks/renderers/render_default_budget.py [--out benchmarks/results/default_budget.md]
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from pathlib import Path

from render_adapt import best_tested  # benchmarks/renderers/render_adapt.py: the one rule of "best tested"

RESULTS = Path(__file__).resolve().parents[1] / "results"
TARGET_MIN = 30.0  # candidate minutes a default run may take (issue 72)
REGRET_TARGET = 0.5  # test points a default run's choice may trail the best tested candidate (issue 80)
MEASURED = re.compile(r"^Measured by `(?P<command>[^`]+)` at commit (?P<commit>\w+), finished (?P<finished>[^,]+), .*?conditions: (?P<conditions>.*?)\. Target")


def page_rows(page: Path) -> list[dict]:
    """The example rows of one runner page, each with what the page says about how it was measured."""
    text = page.read_text(encoding="utf-8")
    measured = next((m for m in map(MEASURED.match, text.splitlines()) if m), None)
    if measured is None:
        raise SystemExit(f"{page}: no 'Measured by ...' line as benchmarks/runners/default_budget.sh writes it")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or cells[0] == "example" or set(cells[0]) <= set("-:"):
            continue
        confirmation = None  # a page of the runner before it said why the best tested is not the choice
        if len(cells) == 5:  # a page of the runner before it gave the share, the stopped and the best tested candidate
            example, wall, candidate, left_out, choice = cells
            share = stopped = best = regret = None
        elif len(cells) in (9, 10):
            example, wall, candidate, share, left_out, stopped, choice, best, regret, *more = cells
            confirmation = more[0] if more else None
        else:
            continue
        rows.append(
            {
                "example": example,
                "wall": float(wall),
                "candidate": float(candidate),
                "share": share,
                "left_out": left_out,
                "stopped": stopped,
                "choice": choice,
                "best": best,
                "regret": None if regret in (None, "—") else float(regret),
                "confirmation": confirmation,
                "page": page.name,
                **measured.groupdict(),
            }
        )
    return rows


def newest_per_example(rows: list[dict]) -> list[dict]:
    """One row an example, by example name: the one its page says finished last (a page re-run at a newer commit
    supersedes an older page's row of the same example; the older page stays, read by nothing)."""
    newest: dict[str, dict] = {}
    for row in rows:
        if row["example"] not in newest or row["finished"] > newest[row["example"]]["finished"]:
            newest[row["example"]] = row
    return [newest[name] for name in sorted(newest)]


def render(pages: list[Path], adapt: Path | None = None) -> str:
    adapt = RESULTS / "adapt" if adapt is None else adapt
    rows = newest_per_example([row for page in pages for row in page_rows(page)])
    if not rows:
        raise SystemExit("no default_budget-NAME.md page: run benchmarks/runners/default_budget.sh first")
    largest = max(rows, key=lambda r: r["candidate"])
    within = sum(r["candidate"] <= TARGET_MIN for r in rows)
    lines = [
        "# `sentune adapt --example NAME` without --time, on every example",
        "",
        f"Rendered {datetime.now(UTC).strftime('%Y-%m-%d')} by `python benchmarks/renderers/render_default_budget.py` from the pages "
        "`benchmarks/runners/default_budget.sh` wrote, one an example (`EXAMPLES=NAME bash benchmarks/runners/default_budget.sh`); each row's "
        "commit, date and machine conditions are its page's. A run without --time is planned for 30 minutes "
        "(sentune.adaptation.time_plan.DEFAULT_TIME): what does not fit is left out and named with the --time that would include it.",
        "",
        f"**Within {TARGET_MIN:g} candidate minutes on 2 cores: {within} of {len(rows)} examples**; the longest: {largest['example']}, "
        f"{largest['candidate']:.1f} candidate minutes ({largest['wall']:.1f} wall).{leaving(rows)}",
        "",
        *regret_line(rows),
        "The best in its full run is the best test score of any candidate in the example's run with all the time it needed "
        "(`benchmarks/results/adapt/NAME`, often an earlier commit and machine): a default run that stops its best candidate "
        "early shows no regret to its own best tested one, and does to this.",
        "",
        "| example | wall minutes | candidate minutes | share of the budget | left out by the default time (expected; the --time that includes it), and those brought back with the time left "
        "| stopped after a first look | choice, test | best tested candidate | regret | the best tested's confirmation | best in its full run | regret to it "
        "| measured (commit, finished, conditions) |",
        "|---|---:|---:|---:|---|---|---|---|---:|---|---|---:|---|",
    ]
    for r in rows:
        missing = "— (not recorded by this page's runner)"
        regret = "—" if r["regret"] is None else f"{r['regret']:.2f}"
        lines.append(
            f"| {r['example']} | {r['wall']:.1f} | {r['candidate']:.1f} | {r['share'] or '—'} | {r['left_out']} | {r['stopped'] or missing} | {r['choice']} | "
            f"{r['best'] or missing} | {regret} | {r['confirmation'] or missing} | {' | '.join(full_cells(r, adapt))} | [{r['commit']}, {r['finished']}]({r['page']}): {r['conditions']} |"
        )
    return "\n".join(lines) + "\n"


def full_run_best(example: str, adapt: Path) -> tuple[str, float] | None:
    """The best tested candidate of the example's full run (benchmarks/results/adapt/NAME, planned with all the time it
    needed): what a default run that stops its best candidate early misses, which the regret to the best *tested*
    candidate of its own run cannot show (None: no full run kept)."""
    path = adapt / example / "results.json"
    return best_tested(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None


def chosen_score(choice: str) -> float | None:
    """The test score in a page's "choice, test" cell (`` `name` 82.03 ``)."""
    found = re.search(r"(-?\d+(?:\.\d+)?)\s*$", choice)
    return float(found.group(1)) if found else None


def full_cells(row: dict, adapt: Path) -> tuple[str, str]:
    best = full_run_best(row["example"], adapt)
    score = chosen_score(row["choice"])
    if best is None:
        return "— (no full run kept)", "—"
    regret = None if score is None else round(best[1] - score, 2) + 0.0  # + 0.0: no "-0.00" for an equal score
    return f"`{best[0]}` {best[1]:.2f}", "—" if regret is None else f"{regret:.2f}"


def regret_line(rows: list[dict]) -> list[str]:
    """The regret target (issue 80): the best tested candidate's test score minus the choice's, at most REGRET_TARGET."""
    known = [r for r in rows if r["regret"] is not None]
    if not known:
        return []
    worst = max(known, key=lambda r: r["regret"])
    within = sum(r["regret"] <= REGRET_TARGET for r in known)
    return [
        f"**Regret within {REGRET_TARGET:g} on {within} of {len(known)} examples that recorded it** (of {len(rows)}); the largest: "
        f"{worst['example']}, {worst['regret']:.2f}.",
        "",
    ]


def leaving(rows: list[dict]) -> str:
    """How much of its time the slowest example that left candidates out spent: a run that left some out and ended well
    inside its time is what issue 80 item 2 is about (a default run keeps spending while a candidate is left)."""
    left = [r for r in rows if r["left_out"] != "none" and any("(brought back: " not in part for part in left_parts(r["left_out"]))]
    if not left:
        return ""
    return f" {len(left)} of them left candidates out while taking at most {max(r['candidate'] for r in left):.1f} candidate minutes."


def left_parts(cell: str) -> list[str]:
    """A row's left-out cell, one entry a candidate (the runner joins them with '; ' outside their parentheses)."""
    parts, depth, current = [], 0, ""
    for ch in cell:
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return [p for p in [*parts, current.strip()] if p]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "default_budget.md"))
    args = parser.parse_args()
    pages = sorted(RESULTS.glob("default_budget-*.md"))
    Path(args.out).write_text(render(pages), encoding="utf-8")
    print(f"wrote {args.out} from {len(pages)} pages")


if __name__ == "__main__":
    main()
