"""How often a search run of `sentune adapt` hands back a candidate no better than the reference it had to beat
(issue 72 item 5): the rule of sentune.adaptation.decide with `references` (the stronger of the unchanged model and `rrf`
on the selection queries is the reference; the best candidate there must beat it on the confirmation queries).

Simulated users, each a call of the real `decide` on real per-query nDCG@10: the dev queries of a search run's folder
(its unchanged model's and `rrf`'s scores, candidates/NAME/scores.npz) are resampled with replacement to a dev set of
the same size and split afresh into selection and confirmation queries; then K null candidates are made, each built
on one of the two systems so that its expected score is that system's: on every query, the system's score plus or
minus (a fair coin each) the query's difference between the two systems (a candidate that is as far from the system
as the two are from each other, query by query, and no better on average). Built on the weaker system, shipping it
hands back a worse engine than the user had; built on the stronger, it hands back one no better. Both count as false
choices; the rule's promise is that they happen at most 5 % of the time.

    python benchmarks/runners/adapt_search_reference_null.py --run benchmarks/runs/search-candidates-quora \\
        --run benchmarks/runs/search-candidates-scifact --simulations 2000
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import adapt_calibration as calibration  # its own folder (rates with Wilson intervals)
import numpy as np

from sentune.adaptation.decide import decide, split_dev
from sentune.adaptation.names import RRF, UNCHANGED
from sentune.tasks.permutation import LEVEL

METRIC = "ndcg@10"


def system_scores(run: Path) -> tuple[np.ndarray, np.ndarray]:
    """The unchanged model's and rrf's per-query scores of the run's dev queries."""
    found = [np.load(run / "candidates" / name / "scores.npz")["dev"] for name in (UNCHANGED, RRF)]
    return found[0], found[1]


def null_candidates(base: np.ndarray, other: np.ndarray, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    gap = np.abs(base - other)
    return {f"null-{k + 1}": base + rng.choice((-1.0, 1.0), size=len(base)) * gap for k in range(count)}


def simulate(unchanged: np.ndarray, rrf: np.ndarray, built_on: str, count: int, simulations: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    shipped = reference_rrf = shipped_over_rrf = 0
    for s in range(simulations):
        rows = rng.integers(0, len(unchanged), len(unchanged))
        u, r = unchanged[rows], rrf[rows]
        base, other = (r, u) if built_on == RRF else (u, r)
        gold = np.zeros(len(u))
        split = split_dev(gold, seed=int(rng.integers(2**31)))
        decision = decide(
            gold, split, (UNCHANGED, u), null_candidates(base, other, count, rng), METRIC, seed=s, stop_above=LEVEL, unit="queries", references={RRF: r}
        )
        shipped += decision.name not in (UNCHANGED, RRF)
        reference_rrf += decision.reference == RRF
        shipped_over_rrf += decision.name not in (UNCHANGED, RRF) and decision.reference == RRF
    return {"shipped": calibration.rate(shipped, simulations), "reference_rrf": reference_rrf / simulations, "shipped_over_rrf": shipped_over_rrf}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", required=True, help="a search adapt run's folder (its unchanged and rrf scores); several allowed")
    parser.add_argument("--simulations", type=int, default=2000)
    parser.add_argument("--candidates", default="1,3", help="null candidates a simulated run compares, comma-separated settings")
    parser.add_argument("--out", default="benchmarks/results/adapt_search_reference_null.md")
    parser.add_argument("--conditions", default="not stated", help="the machine's conditions, written on the page")
    args = parser.parse_args()
    started, rows = time.perf_counter(), []
    for run in map(Path, args.run):
        unchanged, rrf = system_scores(run)
        for built_on in (UNCHANGED, RRF):
            for count in (int(c) for c in args.candidates.split(",")):
                found = simulate(unchanged, rrf, built_on, count, args.simulations, seed=count)
                rows.append(
                    f"| {run.name} | {len(unchanged)} | {unchanged.mean():.2f} / {rrf.mean():.2f} | `{built_on}` | {count} | "
                    f"{calibration.percent(found['shipped'])} | {found['shipped_over_rrf']} | {100 * found['reference_rrf']:.0f} % |"
                )
                print(rows[-1], flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    page = [
        "# Search: how often adapt ships a candidate no better than the reference (issue 72 item 5)",
        "",
        f"Measured {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} at commit {commit} ({(time.perf_counter() - started) / 60:.1f} min; conditions: {args.conditions}) by:",
        "",
        "```",
        "python " + shlex.join(sys.argv),
        "```",
        "",
        "The method is in `benchmarks/runners/adapt_search_reference_null.py`'s docstring: each simulated user is a call of "
        "sentune.adaptation.decide on the run's dev queries resampled, split afresh, with null candidates built on the unchanged "
        f"model or on `rrf` (their expected nDCG@10 is that system's). A ship is a false choice; the rule's promise: at most 5 % "
        f"(one-sided paired permutation test at p ≤ {LEVEL:g} on the confirmation queries, against the reference chosen on the selection queries). "
        "Of which over rrf: ships where `rrf` was the reference; when `rrf` is the weaker system there (its mean below the unchanged model's), "
        "a candidate built on the unchanged model that replaces it is better than what would have been kept, though no better than the "
        "unchanged model, so it is counted as false here all the same.",
        "",
        "| run | dev queries | unchanged / rrf nDCG@10 | null candidates built on | candidates | shipped (95 % Wilson interval) | of which over rrf | reference was rrf |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    Path(args.out).write_text("\n".join(page) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
