"""Honest designs for a small dev set (issue 46, item 3): how often each ships a candidate with no gain, and how often it
ships a planted better one, at 100, 250, 500 and 1,500 dev pairs. Simulated users as on the calibration page
(benchmarks/runners/adapt_calibration.py: its model, its error scales and its rates with Wilson intervals).

Designs, each shipping at most one candidate, at the level adapt uses (sentune.tasks.permutation.LEVEL):
- `half` (adapt today, sentune.adaptation.decide): checkpoints and candidate chosen on a selection half, confirmed on the
  other half by the paired permutation test;
- `select-30`: the same with a smaller selection part (30 %), so the confirmation sees 70 % of the pairs;
- `swapped`: cross-fitting with the halves swapped: choose on A and confirm on B, choose on B and confirm on A; ship
  only when both choices are the same candidate and both confirmations pass (each alone already holds the level);
- `max-T`: candidates whose recipes are fixed in advance (no checkpoint chosen on dev: each candidate's last
  checkpoint), all tested at once on every dev pair by the step-down max-T permutation test (Westfall & Young 1993,
  sentune.tasks.permutation.step_down_max_t), which bounds the chance of calling any no-gain candidate better; the
  confirmed candidate with the largest difference is shipped.

In this model every checkpoint of a candidate has the same expected score, so a fixed recipe loses nothing by not
choosing a checkpoint; on real data early stopping can matter, and max-T cannot use it.

    python benchmarks/runners/adapt_designs.py --out benchmarks/results/adapt_designs.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import adapt_calibration as calibration  # its own folder (the simulated users and their rates)
import numpy as np
from tqdm import tqdm

from sentune.adaptation.decide import decide, split_dev
from sentune.analysis.pages import command_line
from sentune.core.metrics import METRICS
from sentune.tasks.permutation import LEVEL, step_down_max_t

DESIGNS = ("half", "select-30", "swapped", "max-T")
NULL_CANDIDATES = (5, 14)


def chosen_on(gold, part: np.ndarray, checkpoints: np.ndarray, metric: str) -> dict[str, np.ndarray]:
    """Each candidate at its checkpoint best on the pairs `part` (every pair's predictions)."""
    k, c, _ = checkpoints.shape
    scores = METRICS[metric].rows(gold[part], checkpoints[:, :, part].reshape(k * c, -1)).reshape(k, c)
    return {str(i): checkpoints[i, j] for i, j in enumerate(scores.argmax(axis=1))}


def split_rule(gold, unchanged, checkpoints, metric, seed, fraction) -> int:
    """Index of the shipped candidate or -1: select on `fraction` of the pairs, confirm on the rest."""
    split = split_dev(gold, seed=seed, fraction=fraction)
    found = decide(gold, split, ("unchanged", unchanged), chosen_on(gold, split.select, checkpoints, metric), metric, seed=seed, stop_above=LEVEL)
    return int(found.name) if found.name != "unchanged" else -1


def swapped_rule(gold, unchanged, checkpoints, metric, seed) -> int:
    split = split_dev(gold, seed=seed)
    picks = set()
    for part in (split, type(split)(split.confirm, split.select)):
        found = decide(gold, part, ("unchanged", unchanged), chosen_on(gold, part.select, checkpoints, metric), metric, seed=seed, stop_above=LEVEL)
        if found.name == "unchanged":
            return -1
        picks.add(found.name)
    return int(picks.pop()) if len(picks) == 1 else -1


def max_t_rule(gold, unchanged, checkpoints, metric, seed) -> int:
    return step_down_max_t(gold, checkpoints[:, -1], unchanged, metric, seed=seed, stop_above=LEVEL).best_confirmed(LEVEL)


def ship(design: str, gold, unchanged, checkpoints, metric, seed) -> int:
    if design == "half":
        return split_rule(gold, unchanged, checkpoints, metric, seed, 0.5)
    if design == "select-30":
        return split_rule(gold, unchanged, checkpoints, metric, seed, 0.3)
    if design == "swapped":
        return swapped_rule(gold, unchanged, checkpoints, metric, seed)
    return max_t_rule(gold, unchanged, checkpoints, metric, seed)


CHUNK = 25  # simulated users a worker takes at once: a 1,500-pair setting costs seconds a user, so settings are split


def run_chunk(job: tuple) -> dict:
    """Every design on the same simulated users, one chunk of a setting: (metric, n, factors, runs, seed, planted gain
    or None, chunk). Each chunk draws from its own seeded generator, so the result does not depend on the workers."""
    metric, n, factors, runs, seed, gain, chunk = job
    rng = np.random.default_rng([seed, n, len(factors), int(1000 * factors[0]), chunk])
    picks: dict[str, list[int]] = {d: [] for d in DESIGNS}
    started = time.process_time()
    for run in range(chunk * CHUNK, min(runs, (chunk + 1) * CHUNK)):
        gold, unchanged, checkpoints = calibration.simulate(rng, n, factors, metric)
        for design in DESIGNS:
            picks[design].append(ship(design, gold, unchanged, checkpoints, metric, seed * 100_000 + run))
    return {"metric": metric, "n": n, "k": len(factors), "gain": gain, "picks": picks, "cpu_s": time.process_time() - started}


def merged(chunks: list[dict]) -> list[dict]:
    """One record a setting, its chunks' picks joined in order."""
    settings: dict[tuple, dict] = {}
    for part in chunks:
        key = (part["metric"], part["n"], part["k"], part["gain"])
        if key not in settings:
            settings[key] = {**part, "picks": {d: [] for d in DESIGNS}, "cpu_s": 0.0}
        settings[key]["cpu_s"] += part["cpu_s"]
        for d in DESIGNS:
            settings[key]["picks"][d] += part["picks"][d]
    return list(settings.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/adapt_designs.md")
    parser.add_argument("--null-runs", type=int, default=1000, help="simulated users per null setting")
    parser.add_argument("--power-runs", type=int, default=300, help="simulated users per planted-gain setting")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    started = time.perf_counter()
    factors = {(m, g): calibration.factor_for(m, g) for m in calibration.METRICS for g in calibration.GAINS}
    jobs = []
    for metric in calibration.METRICS:
        for n in calibration.SIZES:
            jobs += [(metric, n, [1.0] * k, args.null_runs, 1, None) for k in NULL_CANDIDATES]
            for gain in calibration.GAINS:
                planted = [factors[(metric, gain)]] + [1.0] * (calibration.POWER_CANDIDATES - 1)
                jobs.append((metric, n, planted, args.power_runs, 2, gain))
    chunks = [(*job, c) for job in jobs for c in range(-(-job[3] // CHUNK))]
    chunks.sort(key=lambda c: -c[1])  # the largest settings first, so no worker is left with a long one at the end
    with ProcessPoolExecutor(args.workers) as pool:
        done = merged(list(tqdm(pool.map(run_chunk, chunks), total=len(chunks), desc="chunks of simulated users", mininterval=10)))
    null = [r for r in done if r["gain"] is None]
    power = [r for r in done if r["gain"] is not None]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    plot = Path(args.out).with_name("adapt_designs_power.png")
    power_plot(power, plot)
    write_page(args.out, null, power, plot, time.perf_counter() - started, args.workers)
    for kind, rows in (("null", null), ("planted gain", power)):  # for planning the next run's size
        for n in calibration.SIZES:
            cpu, users = sum(r["cpu_s"] for r in rows if r["n"] == n), sum(len(r["picks"][DESIGNS[0]]) for r in rows if r["n"] == n)
            print(f"{kind}, {n} pairs: {cpu / max(users, 1):.2f} s of CPU a simulated user (every design)", file=sys.stderr)


def shipped_rate(picks: list[int], which) -> dict:
    return calibration.rate(sum(which(p) for p in picks), len(picks))


def power_plot(power: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gains = calibration.GAINS
    fig, axes = plt.subplots(len(calibration.METRICS), len(gains), figsize=(13, 6), sharex=True, sharey=True)
    for row, metric in enumerate(calibration.METRICS):
        for col, gain in enumerate(gains):
            ax = axes[row][col]
            for design in DESIGNS:
                rows = sorted(
                    (r["n"], shipped_rate(r["picks"][design], lambda p: p == 0)["rate"]) for r in power if r["metric"] == metric and r["gain"] == gain
                )
                ax.plot([x for x, _ in rows], [y for _, y in rows], marker="o", label=design)
            ax.axhline(calibration.POWER_TARGET, color="black", linewidth=0.8, linestyle="--")
            ax.set_xscale("log")
            ax.set_xticks(calibration.SIZES, [str(s) for s in calibration.SIZES])
            ax.set_title(f"{metric.replace('_', ' ')}, +{gain:g}", fontsize=9)
            if row == len(calibration.METRICS) - 1:
                ax.set_xlabel("dev pairs")
        axes[row][0].set_ylabel("P(better one shipped)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_page(out: str, null: list[dict], power: list[dict], plot: Path, seconds: float, workers: int) -> None:
    lines = [
        "# Designs for a small dev set: calibration and power (issue 46, item 3)",
        "",
        f"Measured {datetime.now(UTC).date()} ({seconds / 60:.0f} min wall, {workers} worker processes on {os.cpu_count()} CPU cores,"
        f" {platform.machine()}; numpy and scipy only, no model) by:",
        "",
        "```",
        command_line(),
        "```",
        "",
        "Simulated users as on the calibration page (adapt_calibration.md); the designs are described in",
        f"`benchmarks/runners/adapt_designs.py`'s docstring. Every design ships at most one candidate, at p ≤ {LEVEL:g}.",
        "",
        "## No candidate is better: how often one is shipped anyway (a calibrated design: ≤ 5 %)",
        "",
        "| metric | dev pairs | K | " + " | ".join(DESIGNS) + " |",
        "|---|---|---|" + "---|" * len(DESIGNS),
    ]
    for r in sorted(null, key=lambda r: (r["metric"], r["n"], r["k"])):
        cells = " | ".join(calibration.percent(shipped_rate(r["picks"][d], lambda p: p >= 0)) for d in DESIGNS)
        lines.append(f"| {r['metric']} | {r['n']} | {r['k']} | {cells} |")
    lines += [
        "",
        f"## A planted gain: the better candidate shipped (K = {calibration.POWER_CANDIDATES}, one better)",
        "",
        "Each cell: better one shipped; in brackets after the slash, a no-gain one shipped instead.",
        "",
        "| metric | gain | dev pairs | " + " | ".join(DESIGNS) + " |",
        "|---|---|---|" + "---|" * len(DESIGNS),
    ]
    for r in sorted(power, key=lambda r: (r["metric"], r["gain"], r["n"])):
        cells = []
        for d in DESIGNS:
            good, wrong = shipped_rate(r["picks"][d], lambda p: p == 0), shipped_rate(r["picks"][d], lambda p: p > 0)
            cells.append(f"{100 * good['rate']:.1f} % [{100 * good['low']:.1f}, {100 * good['high']:.1f}] / {100 * wrong['rate']:.1f} %")
        lines.append(f"| {r['metric']} | +{r['gain']:g} | {r['n']} | " + " | ".join(cells) + " |")
    lines += ["", f"![power of each design]({plot.name})", ""]
    Path(out).write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
