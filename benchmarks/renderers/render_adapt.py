"""Render benchmarks/results/adapt.md from the kept results of benchmarks/runners/adapt_experiments.sh: the runs with the rule
of issue 27 (select on half of the dev pairs, confirm on the other half; training candidates raced) in
benchmarks/results/adapt/NAME/results.json, and the runs of the rule before it (one bootstrap on all dev pairs, every
candidate its whole budget; sentune d042c59) in benchmarks/results/adapt/before/NAME/results.json, side by side. A
domain whose run has not finished is listed as missing, never filled in; every number comes from a results.json, and
each domain names the command that produced it."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from sentune.adaptation.context import EVALUATIONS, PATIENCE
from sentune.adaptation.crossfit import FOLDS
from sentune.adaptation.decide import DETECTABLE, detectable_gain
from sentune.adaptation.examples import example_names
from sentune.adaptation.names import REFERENCE, UNCHANGED
from sentune.adaptation.report import candidate_table, time_lines
from sentune.analysis.pages import machine_conditions
from sentune.core.metrics import METRICS
from sentune.tasks.permutation import LEVEL

KEPT = Path(__file__).parents[1] / "results" / "adapt"
BEFORE = KEPT / "before"


LABEL_FREE = KEPT / "label-free"  # the runs before the supervised candidates (issue 46): their choices and minutes
DEV_JUDGED = KEPT / "dev-judged"  # the --example-train runs whose candidates the dev pairs alone judged (issue 59's before)
SUPERVISED = ("supervised", "supervised-stacked")


def _load(folder: Path, train: bool = False) -> dict[str, dict]:
    """The kept runs by domain; `train`: also each domain's run with --example-train (kept as NAME-train)."""
    names = [n for d in example_names(retrieval=False) for n in ([d, f"{d}-train"] if train else [d])]
    return {n: json.loads((folder / n / "results.json").read_text()) for n in names if (folder / n / "results.json").is_file()}


def _pm(row: dict) -> str:
    v = row["vs_unchanged"]
    return f"{v['candidate'] - v['baseline']:+.2f} [{v['difference_low']:+.2f}, {v['difference_high']:+.2f}], P(better) {v['confidence']:.1%}"


def minutes(results: dict, reference: bool) -> float:
    """Minutes of the candidates (reference=False) or of the reference run alone."""
    return sum(c["seconds"] for n, c in results["candidates"].items() if (n == REFERENCE) == reference) / 60


def test_versus(results: dict) -> str:
    chosen = results["choice"]["name"]
    return "— (unchanged kept)" if chosen == UNCHANGED else _pm(results["candidates"][chosen]["test"])


def supervised_cell(results: dict) -> str:
    """Each supervised candidate's selection score (out of fold when it trained on the selection part) and test score."""
    found = []
    for name in SUPERVISED:
        c = results["candidates"].get(name)
        if c and "dev_score" in c and c.get("test"):
            found.append(f"{name.removeprefix('supervised').strip('-') or 'from unchanged'}: {c['dev_score']:.2f} / {c['test']['score']:.2f}")
    return "; ".join(found) or "—"


def best_tested(results: dict) -> tuple[str, float] | None:
    """The candidate with the highest test score and that score (None: none was tested): what a choice that read the
    test set would have shipped, beside what adapt shipped without reading it. Every tested candidate counts (a search
    reference, one a race stopped), but the paper's reference recipe, which adapt runs beside and never chooses. The
    one rule of every page's "best tested" and regret (adapt.md, default_budget.md and its runner)."""
    tested = {n: c["test"]["score"] for n, c in results["candidates"].items() if n != REFERENCE and (c.get("test") or {}).get("score") is not None}
    if not tested:
        return None
    best = max(tested, key=lambda n: tested[n])
    return best, float(tested[best])


def best_tested_confirmation(results: dict) -> str:
    """Why the best tested candidate is not the choice, as the run's decision saw it: its confirmation against the
    unchanged model (the gain, the units, the p-value; whether it was safe), or that it was not tested (behind the
    unchanged model on the selection part, or after the first candidate that failed: fixed-sequence testing), beside
    the gain the rule confirms 80 % of the time at the run's dev size (sentune.adaptation.decide.detectable_gain).
    "—" when the best tested candidate is the choice or nothing was tested."""
    best = best_tested(results)
    if best is None or best[0] == results["choice"]["name"]:
        return "—"
    safety = results["choice"].get("safety")
    if safety is None:
        return "— (not recorded by this run's adapt)"
    dev = results["meta"]["dev"]
    found = safety.get(best[0])
    if found is None:
        said = f"`{best[0]}` not tested (behind the unchanged model on the selection part, or after the first that failed)"
    else:
        s = found["superiority"]
        said = f"`{best[0]}` {s['candidate'] - s['baseline']:+.2f} on {s['pairs']} confirmation {dev['unit']}, p = {s['p_value']:.3f}" + (
            ", safe" if found["safe"] else ""
        )
    units = dev.get(dev["unit"])
    detectable = detectable_gain(dev["metric"], units) if units else None
    return said + (f"; the rule confirms +{detectable:.2f} 80 % of the time at {units} dev {dev['unit']}" if detectable is not None else "")


def best_on_test(results: dict) -> str:
    best = best_tested(results)
    return "—" if best is None else f"`{best[0]}` {best[1]:.2f}"


def summary_row(name: str, results: dict, label_free: dict | None) -> list[str]:
    c = results["candidates"]
    chosen = results["choice"]["name"]
    confirmation = results["choice"].get("confirmation")
    reference = c.get(REFERENCE, {}).get("test")
    earlier = label_free["choice"]["name"] if label_free else None
    return [
        name.replace("-train", ", --train"),
        METRICS[results["meta"]["test"]["metric"]].label,
        f"{c[UNCHANGED]['test']['score']:.2f}",
        f"`{chosen}`",
        f"{c[chosen]['test']['score']:.2f}",
        test_versus(results),
        best_on_test(results),
        f"{confirmation['p_value']:.3f} ({results['choice']['best_on_selection']})" if confirmation else "—",
        supervised_cell(results),
        f"{reference['score']:.2f}" if reference else "—",
        f"{minutes(results, reference=False):.0f}",
        f"`{earlier}` {label_free['candidates'][earlier]['test']['score']:.2f}" if label_free and earlier else "—",
        f"{minutes(label_free, reference=False):.0f}" if label_free else "—",
    ]


def before_after_row(name: str, before: dict | None, after: dict | None) -> list[str]:
    def side(results: dict | None) -> list[str]:
        if results is None:
            return ["not measured", "—", "—"]
        chosen = results["choice"]["name"]
        return [f"`{chosen}`", f"{results['candidates'][chosen]['test']['score']:.2f}", test_versus(results)]

    return [name, *side(before), *side(after)]


def confirmation_pairs(results: dict) -> tuple[int, int]:
    """The pairs that confirm the choice: the dev pairs' confirmation half, and the train pairs that joined it."""
    train = results["meta"].get("train_evidence") or {}
    return results["meta"]["dev"]["confirm_pairs"], train.get("confirm_pairs", 0) if train.get("judges") else 0


def power_cell(results: dict) -> str:
    """The gain the confirmation confirms 80 % of the time with this many pairs (the calibration's simulation,
    sentune.adaptation.decide.detectable_gain); past its largest simulated size, that size's gain bounds it from above."""
    dev, train = confirmation_pairs(results)
    metric = results["meta"]["test"]["metric"]
    gain = detectable_gain(metric, 2 * (dev + train))
    if gain is None:
        return "not simulated"
    largest = max(int(n) for n in json.loads(DETECTABLE.read_text())["gains"][metric])
    return f"{'≤ ' if 2 * (dev + train) > largest else ''}{gain:.2f}"


def train_before_after_row(name: str, before: dict | None, after: dict | None) -> list[str]:
    def side(results: dict | None) -> list[str]:
        if results is None:
            return ["not measured", "—", "—", "—", "—"]
        chosen = results["choice"]["name"]
        dev, train = confirmation_pairs(results)
        pairs = f"{dev + train} ({dev} dev + {train} train)" if train else f"{dev} (dev)"
        return [f"`{chosen}`", f"{results['candidates'][chosen]['test']['score']:.2f}", test_versus(results), pairs, power_cell(results)]

    judged_by_train = after if after is not None and "train_evidence" in after["meta"] else None
    return [name, *side(before), *side(judged_by_train)]


def hindsight(results: dict) -> list[str]:
    """What the test set says about candidates the dev pairs could not separate (read after the choice, never by it)."""
    helped = [
        f"`{n}` ({_pm(c['test'])})"
        for n, c in results["candidates"].items()
        if c["kind"] != "baseline" and c.get("test") and "vs_unchanged" in c["test"] and c["test"]["vs_unchanged"]["confidence"] >= 0.95 and not c["chosen"]
    ]
    if not helped:
        return []
    return [f"Better than unchanged on test with ≥ 95 % bootstrap confidence but not chosen: {', '.join(helped)}.", ""]


def domain_section(name: str, results: dict, images: str) -> list[str]:
    meta = results["meta"]
    lines = ["", f"## {name}", "", f"Command ({meta['date']}):", "", "```", meta.get("command", "?"), "```", ""]
    lines += [f"**Choice: `{results['choice']['name']}`** — {results['choice']['reason']}.", "", *hindsight(results)]
    lines += [*time_lines(meta.get("time")), candidate_table(results), ""]  # what the time plan left out, as the run's own page says
    usage = meta.get("process")  # recorded from 2026-11-24 on: the last invocation's CPU use
    if usage:
        lines += [
            f"Its last invocation: {usage['wall_seconds'] / 60:.1f} min wall, {usage['cpu_seconds'] / 60:.1f} min of CPU, "
            f"{usage['cores_used']} of {usage['cpu_count']} cores used on average ({usage['torch_threads']} torch threads); "
            f"load average at the end {usage['load_average_1min']}"
            + (f"; peak resident memory {usage['peak_resident_mib'] / 1024:.2f} GiB." if "peak_resident_mib" in usage else "."),
            "",
        ]
    lines += [line for text in machine_conditions(KEPT / images / "conditions.md") for line in (text, "")]
    for plot, title in (("scores.png", "scores"), ("dev_curves.png", "dev curves"), ("wise_curve.png", "wise: dev score against α")):
        if (KEPT / images / plot).is_file():
            lines += [f"![{title}]({'adapt/' + images + '/' + plot})", ""]
    return lines


def render() -> str:
    after, before, label_free = _load(KEPT, train=True), _load(BEFORE), _load(LABEL_FREE)
    lines = [
        "# `sentune adapt` on four domains (issues 15, 27, 46)",
        "",
        f"Rendered {datetime.now(UTC).date()} by `python {' '.join(sys.argv)}` from benchmarks/results/adapt/NAME/results.json (the rule "
        "of issue 27) and benchmarks/results/adapt/before/NAME/results.json (the rule before it); the runs: "
        "`bash benchmarks/runners/adapt_experiments.sh` (each domain's exact command and date below).",
        "",
        f"Default model (all-MiniLM-L6-v2), default budget (one pass over the corpus per candidate, dev evaluated {EVALUATIONS} times, early "
        f"stop after {PATIENCE} without a new best), 2 CPU cores. The rule now: every choice (checkpoints, the race, wise's α, the best "
        "candidate) reads the selection half of the dev pairs; the chosen candidate replaces the unchanged model only when a "
        f"one-sided paired permutation test on the other half gives p ≤ {LEVEL:g} (calibrated: benchmarks/results/adapt_calibration.md). "
        "The training candidates are raced (rounds at 1/8, 1/4, 1/2 of their steps; one behind the unchanged model or the "
        "leader with 95 % stops, at most half go on). `st-simcse` is sentence-transformers' own SimCSE recipe (`--reference`), "
        "reported beside the candidates and never chosen; its minutes are counted apart. Before: the best candidate on all dev "
        "pairs, shipped when a bootstrap on the same pairs gave ≥ 95 %, every candidate trained its whole budget.",
        "",
        "## Summary (test set)",
        "",
        "| domain | metric | unchanged | chosen | chosen's score | chosen − unchanged [95 % CI] | best candidate on test (tested ones) "
        "| confirmation p (best on selection) | supervised: selection / test | ST SimCSE | candidate minutes | label-free run: chosen, test | its minutes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(summary_row(d, r, label_free.get(d.removesuffix("-train")))) + " |" for d, r in after.items()]
    lines += [
        "",
        "`supervised` fine-tunes the unchanged model on the labels, `supervised-stacked` the best label-free trained "
        "candidate (sentune.adaptation.candidates.Supervised): on the selection half of the dev pairs, its selection score then "
        f"out of fold ({FOLDS}-fold cross-fitting, 5-fold in the runs before commit 5253da5, refit on the whole half), or with `--train` (rows `, --train`: the example's "
        "labelled train split, `--example-train`) on those pairs, the dev pairs then only selecting and confirming (in "
        "runs with the train pairs as judges, `meta.train_evidence` in results.json, the supervised candidates train without "
        "the train pairs that confirm, and every candidate is also judged on the train pairs it never read: the section "
        "after the next). The "
        "label-free run is the same domain's run before the supervised candidates existed (benchmarks/results/adapt/"
        "label-free/NAME/results.json, its command in it): its choice's test score and candidate minutes.",
    ]
    missing = [d for d in example_names(retrieval=False) if d not in after]
    if missing:
        lines += [
            "",
            f'Not yet measured with the new rule: {", ".join(missing)} (run `EXAMPLES="{" ".join(missing)}" bash benchmarks/runners/adapt_experiments.sh`).',
        ]
    lines += [
        "",
        "## Before and after: the choices and their test scores",
        "",
        "| domain | before: chosen | test | − unchanged [95 % CI] | after: chosen | test | − unchanged [95 % CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(before_after_row(d, before.get(d), after.get(d))) + " |" for d in example_names(retrieval=False)]
    dev_judged = {n: r for n, r in _load(DEV_JUDGED, train=True).items() if n.endswith("-train")}
    lines += [
        "",
        "## With --train: judged on the dev pairs alone, then on the train pairs too",
        "",
        "Before: the runs whose candidates the dev pairs alone selected and confirmed (benchmarks/results/adapt/dev-judged/NAME-train, "
        "their sections at the end). After: a sample of the train pairs (sentune.adaptation.evidence) joins the dev pairs as judges "
        "of every candidate that never trained on them. The last column of each side is the confirmation's power: the gain "
        "it confirms 80 % of the time with that many pairs (the calibration's simulation, benchmarks/results/adapt_calibration.md; "
        "'≤': more pairs than it simulated, so a smaller gain).",
        "",
        "| domain | before: chosen | test | − unchanged [95 % CI] | confirmation pairs | gain confirmed 80 % | "
        "after: chosen | test | − unchanged [95 % CI] | confirmation pairs | gain confirmed 80 % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    names = [f"{d}-train" for d in example_names(retrieval=False) if f"{d}-train" in dev_judged or f"{d}-train" in after]
    lines += ["| " + " | ".join(train_before_after_row(d, dev_judged.get(d), after.get(d))) + " |" for d in names]
    for name, results in after.items():
        lines += domain_section(name, results, name)
    if dev_judged:
        lines += ["", "# Before: --train's pairs judged nothing (the dev pairs alone selected and confirmed)", ""]
        for name, results in dev_judged.items():
            lines += domain_section(name, results, f"dev-judged/{name}")
    if before:
        lines += ["", "# Before: the rule of sentune d042c59", ""]
        for name, results in before.items():
            lines += domain_section(name, results, f"before/{name}")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(Path(__file__).parents[1] / "results" / "adapt.md"))
    args = parser.parse_args()
    text = render()
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
