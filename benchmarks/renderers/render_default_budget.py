"""One table of every `sentune adapt --example NAME` run without --time (issue 72 item 6): the rows of each
benchmarks/results/default_budget-NAME.md page that benchmarks/runners/default_budget.sh wrote, each with the commit,
date and conditions its page records, and the largest candidate minutes against the 30-minute target.

    python benchmarks/renderers/render_default_budget.py [--out benchmarks/results/default_budget.md]
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
TARGET_MIN = 30.0  # candidate minutes a default run may take (issue 72)
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
        if line.startswith("| ") and len(cells) == 5 and cells[0] != "example" and not set(cells[0]) <= set("-:"):
            example, wall, candidate, left_out, choice = cells
            rows.append(
                {
                    "example": example,
                    "wall": float(wall),
                    "candidate": float(candidate),
                    "left_out": left_out,
                    "choice": choice,
                    "page": page.name,
                    **measured.groupdict(),
                }
            )
    return rows


def render(pages: list[Path]) -> str:
    rows = sorted((row for page in pages for row in page_rows(page)), key=lambda r: r["example"])
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
        "| example | wall minutes | candidate minutes | left out by the default time (expected; the --time that includes it) | choice, test | measured (commit, finished, conditions) |",
        "|---|---:|---:|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['example']} | {r['wall']:.1f} | {r['candidate']:.1f} | {r['left_out']} | {r['choice']} | "
            f"[{r['commit']}, {r['finished']}]({r['page']}): {r['conditions']} |"
        )
    return "\n".join(lines) + "\n"


def leaving(rows: list[dict]) -> str:
    """How much of its time an example that left candidates out spent (the plan counts each training at its full share
    of the race, docs/adapt.md, so such a run may end well inside its time)."""
    left = [r for r in rows if r["left_out"] != "none"]
    if not left:
        return ""
    return (
        f" {len(left)} of them left candidates out while taking at most {max(r['candidate'] for r in left):.1f} candidate minutes: "
        "the plan counts each training at its full share of the race (docs/adapt.md), and what a training takes is known only once it ran."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "default_budget.md"))
    args = parser.parse_args()
    pages = sorted(RESULTS.glob("default_budget-*.md"))
    Path(args.out).write_text(render(pages), encoding="utf-8")
    print(f"wrote {args.out} from {len(pages)} pages")


if __name__ == "__main__":
    main()
