"""results.json, results.md and report.html of `sentune adapt`: the choice and why, a table of every candidate's dev and
test score with its 95 % interval and its comparison with the unchanged model, the time each took, the dev curve of
every trained candidate and a plot of the scores with their intervals. Everything is rendered from results.json and
the candidates' metrics.jsonl, so the page can always be rebuilt; and the interpolated candidate's dev score against its mix."""

from __future__ import annotations

import json
from pathlib import Path

from sentune.adaptation.names import UNCHANGED
from sentune.analysis.report import markdown_to_html
from sentune.core.metrics import METRICS
from sentune.core.plots import save_figure
from sentune.core.results import write_atomic


def _interval(row: dict | None) -> str:
    return "—" if not row else f"{row['score']:.2f} [{row['low']:.2f}, {row['high']:.2f}]"


def _versus(row: dict | None) -> str:
    if not row or "vs_unchanged" not in row:
        return "—"
    v = row["vs_unchanged"]
    return f"{v['candidate'] - v['baseline']:+.2f} [{v['difference_low']:+.2f}, {v['difference_high']:+.2f}], {v['confidence']:.0%}"


DEV_PARTS = {"select": "selection", "confirm": "confirmation"}  # the two halves of the dev pairs (sentune.adaptation.decide)


def dev_parts(results: dict) -> list[str]:
    """The dev rows a run has: its two halves, or 'dev' for a run made before the choice was split (no meta.rule)."""
    return list(DEV_PARTS) if results["meta"].get("rule") else ["dev"]


def candidate_table(results: dict) -> str:
    has_test = results["meta"]["test"] is not None
    binary = METRICS[results["meta"]["dev"]["metric"]].binary_labels  # accuracy is reported beside 0/1 labels
    parts = dev_parts(results)
    header = ["candidate"]
    for part in parts:
        label = DEV_PARTS.get(part, part)
        header += [f"{label} [95 % CI]", f"{label} vs unchanged [CI], P(better)"]
    if has_test:
        header += ["test [95 % CI]", "test vs unchanged [CI], P(better)"] + (["test accuracy"] if binary else [])
    header += ["minutes", "note"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, c in results["candidates"].items():
        note = "**chosen**" if c["chosen"] else ("reference, never chosen" if baseline(c) else c.get("skipped", ""))
        if c.get("stopped"):
            note = f"stopped by the race at step {c['stopped']['at_step']}{race_check(c)} (best so far: step {c['stopped']['best_step']}): {c['stopped']['reason']}"
        elif c.get("best_checkpoint"):
            note += f"{'; ' if note else ''}step {c['best_checkpoint']['step']}"
        judged = c.get("judged_on") or {}
        if any(judged.get(part, {}).get("train") for part in ("select", "confirm")):
            note += f"{'; ' if note else ''}judged on {judged['select']['train']} + {judged['confirm']['train']} train pairs too (select + confirm)"
        mix = wise_mix(c)
        if mix is not None:
            note += f"{'; ' if note else ''}{1 - mix:g}·unchanged + {mix:g}·{c['source']}"
        if fuses_bm25(c):
            note += f"{'; ' if note else ''}BM25 + {c['source']}, {c['setting']}"
        row = [f"`{name}`"]
        for part in parts:
            row += [_interval(c[part]), _versus(c[part])]
        if has_test:
            row += [_interval(c["test"]), _versus(c["test"])]
            if binary:
                row.append(f"{c['test']['accuracy']:.2f}" if c["test"] else "—")
        row += [f"{c['seconds'] / 60:.1f}", note]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def race_check(candidate: dict) -> str:
    """When and on what the race stopped a candidate: the steps it had planned and the dev and train pairs that round
    read (sentune.adaptation.race's detail `race`; files written before it have none)."""
    race = candidate.get("race")
    if not race:
        return ""
    rows = race["rows"]
    read = f"{rows['dev']} dev" + (f" + {rows['train']} train" if rows["train"] else "")
    return f" of {race['steps']}, after round {race['round']}, on {read} selection {race.get('unit', 'pairs')}"


def train_evidence_lines(evidence: dict | None) -> list[str]:
    """What the page says of --train's pairs as judges (sentune.adaptation.evidence); nothing without --train."""
    if not evidence:
        return []
    if not evidence["judges"]:
        return [f"Train: {evidence['train_pairs']} pairs, which only train: the dev pairs alone select and confirm ({evidence['shift']}).", ""]
    return [
        f"Train: {evidence['train_pairs']} pairs; {evidence['evidence_pairs']} of them judge every candidate that never trained on them too: "
        f"{evidence['select_pairs']} join the selection pairs, {evidence['confirm_pairs']} the confirmation pairs (the supervised candidates "
        "train without those). The note says which train pairs judged each candidate.",
        "",
    ]


def time_lines(planned: dict | None) -> list[str]:
    """The candidates the time plan left out, at planning or at their turn, and those it stopped after a first look
    (sentune.adaptation.time_plan), each with why and the --time that would include it: a run without --time says what
    its default left out; those left out and then run with the time left say so."""
    if not planned or not (planned.get("left_out") or planned.get("stopped") or planned.get("brought_back")):
        return []
    limit = f"--time {planned['limit_s'] / 60:g}m" + (", the default" if planned.get("default") else "")
    including = planned.get("time_to_include_min", {})
    left = [f"`{name}` ({why}" + (f"; --time {including[name]}m includes it)" if name in including else ")") for name, why in planned["left_out"].items()]
    stopped = [f"`{name}` ({why})" for name, why in planned.get("stopped", {}).items()]
    lines = [f"Left out by {limit}: " + "; ".join(left) + "."] if left else []
    lines += [f"Stopped after a first look by {limit}: " + "; ".join(stopped) + "."] if stopped else []
    back = [f"`{name}` ({why})" for name, why in planned.get("brought_back", {}).items()]
    lines += [f"Brought back by {limit}: " + "; ".join(back) + "."] if back else []
    return [*lines, ""]


def baseline(candidate: dict) -> bool:
    """A baseline, reported and never chosen: its class is not eligible (results.json's `eligible` is also false for a
    candidate the race stopped, whose note says so instead). Files without `dense` say it by their kind."""
    return not candidate["eligible"] if "dense" in candidate else candidate["kind"] == "baseline"


def fuses_bm25(candidate: dict) -> bool:
    """A hybrid: BM25 fused with a dense candidate (its source), the system that ranks when it is chosen."""
    return not candidate.get("dense", candidate["kind"] != "hybrid") and bool(candidate.get("fusion")) and "source" in candidate


def wise_mix(candidate: dict) -> float | None:
    """The wise candidate's mix of the tuned weights (None for the other kinds); results.json files written before it
    had that name call it `alpha`."""
    return candidate.get("mix", candidate.get("alpha"))


def counted(part: dict) -> int:
    """How many pairs (or queries) a dev or test set of results.json holds: the key is its unit; files written before
    call it `pairs` either way."""
    unit = part.get("unit", "pairs")
    return int(part[unit] if unit in part else part["pairs"])


def render_markdown(results: dict, plots: list[tuple[str, str]]) -> str:
    meta = results["meta"]
    dev = meta["dev"]
    parts = ["# sentune adapt" + (f" — example `{meta['example']}`" if meta.get("example") else ""), ""]
    if meta.get("command"):
        parts += ["Command:", "", "```", meta["command"], "```", ""]
    budget = meta["budget"]
    limits = ", ".join(
        filter(None, [f"{budget['steps']} steps" if budget["steps"] else "one pass over the corpus", f"{budget['minutes']:g} min" if budget["minutes"] else ""])
    )
    unit = dev.get("unit", "pairs")
    pool = ", each ranked against the selection pool: its relevant documents and the unchanged model's top 30" if unit == "queries" else ""
    parts += [
        f"Date: {meta['date']} · sentune {meta['sentune_version']} · model `{meta['model']}` · corpus {meta['corpus']['sentences']} sentences · "
        f"budget per candidate: {limits}",
        "",
        f"Dev: {dev['label']}, {counted(dev)} {unit}, {METRICS[dev['metric']].label}: {dev.get(f'select_{unit}', dev.get('select_pairs'))} select "
        f"(every checkpoint, mix and candidate is chosen on them{pool}), {dev.get(f'confirm_{unit}', dev.get('confirm_pairs'))} confirm the one chosen "
        "(read by nothing else)."
        + (f" Test: {counted(meta['test'])} {unit}, {METRICS[meta['test']['metric']].label} (never used for the choice)." if meta["test"] else " No test set."),
        "",
        *train_evidence_lines(meta.get("train_evidence")),
        f"**Choice: `{results['choice']['name']}`** — {results['choice']['reason']}.",
        "",
        *time_lines(meta.get("time")),
        f"The rule: a candidate is safe when a one-sided paired permutation test on the confirmation pairs shows it better than the "
        f"unchanged model at p ≤ {meta['confirmation'].get('level', meta['confirmation'].get('alpha')):g} "
        f"({meta['confirmation']['permutations']:,} permutations; for search also not worse than rrf by more than its margin), "
        "and of the safe candidates the one with the best expected gain on all the dev pairs is shipped, so a candidate "
        "no better than the unchanged model is shipped in at most 5 % of runs (benchmarks/results/adapt_calibration.md; sentune/adaptation/decide.py). "
        f"Intervals: 95 % percentile bootstrap over 1,000 resamples of the {unit}; 'vs unchanged' is the paired difference and the "
        "share of resamples where the candidate scores higher. They describe, they do not decide: on the selection pairs they "
        "flatter the candidates chosen there.",
        "",
        candidate_table(results),
        "",
    ]
    for title, image in plots:
        parts += [f"## {title}", "", f"![{title}]({image})", ""]
    return "\n".join(parts)


def dev_curves(results: dict, out: Path) -> Path | None:
    """Dev score (the selection pairs) against training rows seen (steps × batch) for every trained candidate, the
    unchanged model's as a dashed line."""
    curves = {}
    for name, c in results["candidates"].items():
        metrics = out / c["run"] / "metrics.jsonl" if c.get("run") else None
        if metrics and metrics.is_file():
            key = f"eval_dev_{results['meta']['dev']['metric']}"
            batch = c["recipe"]["training"]["batch_size"]  # methods differ in batch size: compare them by sentences seen
            points = [(m["step"] * batch, m[key]) for m in map(json.loads, metrics.read_text().splitlines()) if key in m]
            if points:
                curves[name] = points
    if not curves:
        return None
    return _dev_plot(results, curves, "training rows seen (steps × batch size)", out / "dev_curves.png", size=(7, 4))


def wise_curve(results: dict, out: Path) -> Path | None:
    """The interpolated candidate's dev score (the selection pairs) against its mix (1: the tuned candidate it starts from)."""
    wise = next((c for c in results["candidates"].values() if c.get("curve")), None)
    if wise is None:
        return None
    return _dev_plot(results, {f"(1 − mix)·unchanged + mix·{wise['source']}": wise["curve"]}, "mix", out / "wise_curve.png", size=(6, 3.5))


def _dev_plot(results: dict, curves: dict[str, list], xlabel: str, path: Path, size: tuple[float, float]) -> Path:
    """Dev score curves, the unchanged model's score as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size)
    for name, points in curves.items():
        ax.plot(*zip(*points, strict=True), marker="o", markersize=3, label=name)
    part = dev_parts(results)[0]
    ax.axhline(results["candidates"][UNCHANGED][part]["score"], color="black", linestyle="--", linewidth=1, label="unchanged")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{DEV_PARTS.get(part, part)} {METRICS[results['meta']['dev']['metric']].label}")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def score_plot(results: dict, out: Path) -> Path:
    """Each candidate's dev (and test) score with its 95 % interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = dev_parts(results)
    rows = [(n, c) for n, c in results["candidates"].items() if c[parts[0]]]
    splits = parts + (["test"] if results["meta"]["test"] else [])
    fig, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits), 0.35 * len(rows) + 1.5), squeeze=False)
    for ax, split in zip(axes[0], splits, strict=True):
        for y, (_, c) in enumerate(rows):
            r = c.get(split)
            if not r:  # a candidate the race stopped has selection scores only
                continue
            color = "#c44e52" if c["chosen"] else ("#999999" if not c["eligible"] else "#4c72b0")
            ax.errorbar(r["score"], y, xerr=[[r["score"] - r["low"]], [r["high"] - r["score"]]], fmt="o", color=color, capsize=3)
        ax.axvline(results["candidates"][UNCHANGED][split]["score"], color="black", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(rows)), [n for n, _ in rows])
        ax.set_xlabel(f"{DEV_PARTS.get(split, split)} {METRICS[results['meta']['test' if split == 'test' else 'dev']['metric']].label}")
    return save_figure(fig, out / "scores.png")


def write_results(results: dict, out: Path, command: str | None) -> None:
    if command:
        results["meta"]["command"] = command
    write_atomic(out / "results.json", json.dumps(results, indent=2))
    plots = [("Scores with 95 % intervals (chosen in red, the reference in grey)", score_plot(results, out).name)]
    curves = dev_curves(results, out)
    if curves:
        plots.append(("Dev curves of the trained candidates", curves.name))
    interpolation = wise_curve(results, out)
    if interpolation:
        plots.append(("Weight interpolation with the unchanged model (wise): dev score against the mix", interpolation.name))
    markdown = render_markdown(results, plots)
    write_atomic(out / "results.md", markdown)
    write_atomic(out / "report.html", markdown_to_html(markdown))
