"""Render benchmarks/results/sed.md (seeds 003/004 on the default model) from the kept results of
benchmarks/runners/sed_experiments.sh. Rows whose runs have not finished are listed as missing, never filled in;
every number comes from a results.json; the commands are listed at the end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from sentune.analysis.pages import BEFORE_25, KeptRuns, markdown_table, render_kept_page, sts7_average
from sentune.core.plots import save_figure
from sentune.data.catalog import group_tasks
from sentune.methods.sed import LAYER_POOLING, choose_layers
from sentune.methods.sts_regression import best_lower_bound  # the runner's rule (benchmarks/best_lower_bound.py)

STS5 = group_tasks("sts12-16")  # the catalog's groups
STS7 = group_tasks("sts")
SENTEVAL = ("CR", "MR", "MPQA", "SUBJ", "SST2", "SST5", "TREC", "MRPC", "SICK-E")  # the paper's column order
assert set(SENTEVAL) == set(group_tasks("transfer")), "the catalog's transfer group changed: update the column order"


def avg(run: dict, tasks=STS5, metric: str = "spearman") -> float:
    """The 7-task average from the run's summary; the STS12-16 one (the paper's measure, not in the summary) from its tasks."""
    if tuple(tasks) == tuple(STS7):
        return sts7_average(run, metric)
    return float(np.mean([run["tasks"][t]["all"][metric] for t in tasks]))


def sts_row(label: str, run: dict) -> str:
    cells = [f"{run['tasks'][t]['all']['pearson']:.2f} / {run['tasks'][t]['all']['spearman']:.2f}" for t in STS5]
    return (
        f"| {label} | " + " | ".join(cells) + f" | **{avg(run, STS5, 'pearson'):.2f} / {avg(run):.2f}** | "
        f"{run['tasks']['STS-B']['all']['spearman']:.2f} | {run['tasks']['SICK-R']['all']['spearman']:.2f} | {avg(run, STS7):.2f} | "
        f"{sts7_average(run, aggregation='wmean'):.2f} |"
    )


STS_HEADER = "| model | " + " | ".join(STS5) + " | avg (5) | STS-B | SICK-R | avg (7, Spearman) | avg (7, wmean) |\n|" + "---|" * 11


def sts_table(kept: KeptRuns, title: str, rows: list[tuple[str, str]], baseline: dict | None) -> list[str]:
    out = [
        f"## {title}",
        "",
        "Pearson / Spearman ×100 ('all' aggregation, cosine); avg (5) over STS12-16 as the paper; "
        "STS-B test and SICK-R Spearman and the 7-task Spearman average added, and the same average with each task's subsets "
        "weighted by size ('wmean', the aggregation some of the papers' rows used).",
        "",
        STS_HEADER,
    ]
    if baseline:
        out.append(sts_row("no tuning (the model's own pooling)", baseline["runs"]["model"]))
    for label, rel, *optional in rows:  # a third item, True: a row that need not exist (not listed as missing)
        result = kept.get(rel, optional=bool(optional))
        if result:
            out.append(sts_row(label + fitted_before_fix(label, result), result["runs"]["model"]))
    return out + [""]


def fitted_before_fix(label: str, result: dict) -> str:
    """A pipeline Flow stage fitted before issue 25's null-direction fix records no fit summary (meta.stage.fit): say so
    on a row whose label does not already."""
    stage = result["meta"].get("stage") or {}
    if stage.get("postprocess") == "flow" and "fit" not in stage and "before issue 25" not in label:
        return " (fitted before issue 25's fix)"
    return ""


def spread(values: list[float]) -> str:
    if len(values) == 1:  # one model (a full ensemble): no mean or spread to show
        return f"{values[0]:.2f} | – | – | 1"
    return f"{max(values):.2f} | {np.mean(values):.2f} | {np.std(values, ddof=1):.2f} | {len(values)}"


def flow_name(label: str, stages: str = "-Flow") -> str:
    """A labelled model's later stages: `stages` after the method's name, before any note ('NLI-CT-SED, issue 25 (CPU)'
    -> 'NLI-CT-SED-Flow, issue 25 (CPU)'; 'NLI-CT (H100)' -> 'NLI-CT-Flow (H100)')."""
    cut = min((i for i in (label.find(", "), label.find(" (")) if i >= 0), default=len(label))
    return f"{label[:cut]}{stages}{label[cut:]}"


def spread_rows(label: str, group: str, evaluations: list[dict]) -> list[str]:
    """Table 3's two rows for a group of models: the STS12-16 average's max/mean/std/count, then the 7-task one."""
    return [
        f"| {label} | {group} | {spread([avg(e) for e in evaluations])} |",
        f"| | (7 tasks) | {spread([avg(e, STS7) for e in evaluations])} |",
    ]


def stability_plot(points: dict[str, dict[str, list[float]]], path: Path) -> Path:
    """One row per ensemble: members, learners and the full ensemble on the 7-task average axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 0.8 * len(points) + 1.2))
    for y, (_label, groups) in enumerate(points.items()):
        for (group, values), (colour, marker, offset) in zip(
            groups.items(), (("tab:grey", "o", 0.15), ("tab:blue", "D", -0.15), ("tab:red", "*", 0.0)), strict=False
        ):
            ax.scatter(
                values, [y + offset] * len(values), color=colour, marker=marker, s=60 if marker == "*" else 30, label=group if y == 0 else None, alpha=0.8
            )
    ax.set_yticks(range(len(points)), list(points))
    ax.set_xlabel("average of the 7 STS tasks, Spearman ×100")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save_figure(fig, path)


def verdict(label: str, m7: list[float], l7: list[float]) -> str:
    """The must-show: do the learners beat the members' mean and match the best member (7-task average)?"""
    std = lambda values: np.std(values, ddof=1) if len(values) > 1 else 0.0  # noqa: E731
    return (
        f"- {label}, 7-task average: learners' mean {np.mean(l7):.2f} vs members' mean {np.mean(m7):.2f} "
        f"({'beats' if np.mean(l7) > np.mean(m7) else 'does not beat'} it) and best member {max(m7):.2f} "
        f"({'matches or beats' if np.mean(l7) >= max(m7) else 'below'}); std learners {std(l7):.2f} vs members {std(m7):.2f}."
    )


def ensemble_models(kept: KeptRuns, stage: str, optional: bool = False) -> tuple[list[str], list[str]] | None:
    """(member stage paths, learner stage paths) of an SED stage, from its kept members.json and learner folders."""
    members_file = kept.root / stage / "members.json"
    if not members_file.is_file():
        if not optional:
            kept.missing.append(f"{stage}/members.json")
        return None
    root = Path(stage).parent  # members.json paths are relative to the pipeline folder
    members = [str(root / rel) for rel in json.loads(members_file.read_text())]
    learners = [f"{stage}/learner-{k}" for k in range(1, 11) if (kept.root / stage / f"learner-{k}").is_dir()]
    return members, learners


def dev_chosen(result: dict) -> tuple[int, dict]:
    """(layers, run) of the pooling with the best STS-B dev Spearman (ties: fewer layers) in a sed-pool result."""
    runs = result["runs"]
    layers = choose_layers({n: runs[pooling]["tasks"]["STS-B-dev"]["all"]["spearman"] for n, pooling in LAYER_POOLING.items()})
    return layers, runs[LAYER_POOLING[layers]]


def stability_dev_pooling(kept: KeptRuns, ensembles: list[tuple[str, str]], baseline: dict | None) -> list[str]:
    untuned = (
        (
            f" (untuned: {avg(baseline['runs']['last2'], STS7):.2f} with two layers vs {avg(baseline['runs']['mean'], STS7):.2f} "
            "with one on the 7 tasks, baselines.md)"
        )
        if baseline
        else ""
    )
    out = [
        "## Table 3b: the same, each model with the pooling chosen on STS-B dev",
        "",
        "Every member and learner evaluated with the mean of its last 1, 2 and 3 layers (`benchmarks/runners/sed_pooling.sh`); each "
        "model keeps the one with the best STS-B dev Spearman, one rule for members and learners. Table 3 uses the paper's "
        "fixed rule (members: last layer; learners: last two layers), chosen on BERT-Large; on the default model, trained for "
        f"last-layer mean pooling, two layers score lower{untuned}.",
        "",
        "| ensemble | group | max | mean | std | runs | layers chosen |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for label, stage, *optional in ensembles:
        found = ensemble_models(kept, stage, bool(optional))
        if not found:
            continue
        scores = {}
        for group, stages in zip(("members", "learners (SED)"), found, strict=False):
            chosen = [dev_chosen(r) for r in (kept.get(f"sed-pool/{s.replace('/', '-')}") for s in stages) if r]
            if chosen:
                layers = ", ".join(str(n) for n, _ in chosen)
                out.append(f"| {label} | {group} | {spread([avg(run) for _, run in chosen])} | {layers} |")
                scores[group] = [avg(run, STS7) for _, run in chosen]
                out.append(f"| | (7 tasks) | {spread(scores[group])} | |")
        if len(scores) == 2:
            verdicts.append(verdict(label, scores["members"], scores["learners (SED)"]))
    return out + [""] + (["What the must-show asks, as measured with this rule:", ""] + verdicts + [""] if verdicts else [])


def stability(kept: KeptRuns, ensembles: list[tuple[str, str]], figure: Path | None = None) -> list[str]:
    out = [
        "## Table 3: members, full ensemble and distillation learners",
        "",
        "Spearman ×100 averaged over STS12-16 (the paper's measure) and, in the '(7 tasks)' row under it, over the 7 tasks. "
        "Members: the ensemble's models (seeds 1..N); full ensemble: the average of their embeddings as one model; "
        "learners: SED learners distilled from that ensemble with seeds 1..K.",
        "",
        "| ensemble | group | max | mean | std | runs |",
        "|---|---|---|---|---|---|",
    ]
    verdicts, points = [], {}
    for label, stage, *optional in ensembles:
        found = ensemble_models(kept, stage, bool(optional))
        if not found:
            continue
        members, learners = ([r for r in map(kept.get, stages) if r] for stages in found)
        full = kept.get(f"{stage}/full-ensemble")
        for group, runs in (("members", members), ("learners (SED)", learners)):
            if runs:
                out += spread_rows(label, group, [r["runs"]["model"] for r in runs])
        if full:
            out.append(f"| {label} | full ensemble | {avg(full['runs']['model']):.2f} | – | – | 1 |")
            out.append(f"| | (7 tasks) | {avg(full['runs']['model'], STS7):.2f} | – | – | 1 |")
        points[label] = {
            group: [avg(r["runs"]["model"], STS7) for r in runs]
            for group, runs in (("members", members), ("learners", learners), ("full ensemble", [full] if full else []))
        }
        if members and learners:
            verdicts.append(verdict(label, [avg(r["runs"]["model"], STS7) for r in members], [avg(r["runs"]["model"], STS7) for r in learners]))
        if stage in FLOW_GROUPS:
            out += flow_groups(kept, label, stage, found)
    if figure and any(any(g.values()) for g in points.values()):
        out += ["", f"![members, learners and full ensemble]({stability_plot(points, figure).name})"]
    return out + [""] + (["What the must-show asks, as measured:", ""] + verdicts + [""] if verdicts else [])


FLOW_GROUPS = ("sed/ct-sed", "sed/nli-ct-sed", "sed-gpu/nli-ct-sed")  # the ensembles whose -Flow groups seed 003's Table 3 shows


def sed_flow_rel(stage: str) -> str:
    """Where sed_pooling.sh keeps a pipeline stage's model with a flow fitted on the STS12-16 sentences."""
    return f"sed-flow/{stage.replace('/', '-')}"


def flow_groups(kept: KeptRuns, label: str, stage: str, found: tuple[list[str], list[str]]) -> list[str]:
    """Seed 003 Table 3's -Flow groups: each member, the full ensemble and each learner with a flow fitted on the STS12-16
    sentences (benchmarks/runners/sed_pooling.sh, kept as sed-flow/<model path with '-' for '/'>)."""
    members, learners = found
    out = []
    for group, stages in (("members", members), ("full ensemble", [f"{stage}/full-ensemble"]), ("learners (SED)", learners)):
        runs = [r for r in (kept.get(sed_flow_rel(s)) for s in stages) if r]
        if runs:
            name = flow_name(label, "-SED-Flow" if group.startswith("learners") else "-Flow")
            shown = group if len(runs) == len(stages) else f"{group} ({len(runs)} of {len(stages)} measured)"  # never read as the group
            out += spread_rows(name, shown, [result_run(r) for r in runs])
    return out


PIPELINE_TEXT = (
    "**Changed (issue 25):** seed 003 §4 trains every ensemble member through NLI and then CT with its own seed and starts "
    "the learners from the pre-trained model; before, the pipeline trained one NLI model that every member's CT started "
    "from, and the learners started from that NLI model. The table sets the earlier CPU pipeline beside the pipeline as "
    "the paper describes it, on the CPU (`JOBS=2 PIPELINES=nli-ct-sed-flow STS=0 bash benchmarks/runners/sed_experiments.sh`) "
    "and on a lent NVIDIA H100 (fp32; `benchmarks/runners/sed_nli_gpu.sh`). NLI and NLI-CT did not change: their two "
    "columns are the same recipe and seed on two machines, what the hardware alone moves, so rows of one machine are "
    "compared with each other first. The probe starts learner 1 (its recipe and targets) from the NLI model, as the old "
    "pipeline's learners were: which of the two changes moved the learner."
)
# (label, before issue 25 on the CPU, the paper's pipeline on the CPU, the same on the H100): 7-task averages
PIPELINE_ROWS = [
    ("NLI", None, "sed/nli", "sed-gpu/nli"),
    ("NLI-CT", None, "sed/nli-ct", "sed-gpu/nli-ct"),
    ("NLI-CT-SED (learner 1)", f"sed/nli-ct-sed{BEFORE_25}/learner-1", "sed/nli-ct-sed/learner-1", "sed-gpu/nli-ct-sed/learner-1"),
    ("NLI-CT-SED (learner 1) started from the NLI model (probe)", None, "sed-probe-learner-from-nli", None),
    ("NLI-CT-SED-Flow", f"sed/nli-ct-sed-flow{BEFORE_25}", "sed/nli-ct-sed-flow", "sed-gpu/nli-ct-sed-flow"),
]
# what each machine's run of the new pipeline feeds beyond Table 2: (evaluation, its kept run on the CPU, on the H100)
PIPELINE_EVALUATIONS = [
    ("Table 3b's dev-chosen pooling", "sed-pool/sed-nli-ct-sed-learner-1", "sed-pool/sed-gpu-nli-ct-sed-learner-1"),
    ("the NLI-CT -Flow groups", "sed-flow/sed-nli-ct-sed-learner-1", "sed-flow/sed-gpu-nli-ct-sed-learner-1"),
    ("Table 7's SentEval", "sed-senteval-nli-ct-sed-learner-1", "sed-senteval-gpu-nli-ct-sed-learner-1"),
    ("Table 8's layers", "sed-layers-nli-ct-sed-learner-1", "sed-layers-gpu-nli-ct-sed-learner-1"),
]


def pipeline_change(kept: KeptRuns) -> list[str]:
    """Issue 25's NLI-CT-SED pipeline change as data: each model's 7-task average before (the earlier CPU pipeline) and
    after (the paper's, on the CPU and on the H100), and which evaluations each machine's new pipeline has measured.
    Nothing when the H100 pipeline and the earlier one are not both kept."""
    if not (kept.get(f"sed/nli-ct-sed{BEFORE_25}/learner-1", optional=True) and kept.get("sed-gpu/nli-ct-sed/learner-1", optional=True)):
        return []

    def cell(rel: str | None) -> str:
        result = kept.get(rel, optional=True)
        return "–" if rel is None else (f"{avg(result['runs']['model'], STS7):.2f}" if result else "not measured")

    rows = [[label, *(cell(rel) for rel in rels)] for label, *rels in PIPELINE_ROWS]
    measured = lambda rel: "measured" if kept.get(rel, optional=True) else "not measured"  # noqa: E731
    return [
        PIPELINE_TEXT,
        "",
        *markdown_table(["7-task average", "before issue 25 (CPU)", "issue 25 (CPU)", "issue 25 (H100)"], rows),
        "",
        *markdown_table(["the new pipeline's", "CPU", "H100"], [[what, measured(cpu), measured(gpu)] for what, cpu, gpu in PIPELINE_EVALUATIONS]),
        "",
    ]


FLOW_FIX_TEXT = (
    "**Changed (issue 25):** a flow now adds noise in the directions its fit embeddings do not span (sentune.postprocess.flow, "
    "flow_null_directions.md), so each Flow stage was fitted again; the earlier fit is the row marked 'before issue 25's fix'. "
    "Where the fit lacked no direction the fix leaves it as it was, and its move is set against the same flow fitted again on "
    "the same model by Table 3's -Flow group, its sentences encoded in other batches (flow_input_sensitivity.md)."
)


def flow_fix_table(kept: KeptRuns, stages: list[str]) -> list[str]:
    """Issue 25's null-direction fix on the pipelines' Flow stages: how many directions each fit's embeddings lacked
    (the stage's results.json, meta.stage.fit), its 7-task average before and after, and for a fit the fix leaves as it
    was, the same flow refitted; a stage not fitted again yet says so. Nothing when no stage has an earlier fit kept."""
    rows = []
    for stage in stages:
        before = kept.get(f"{stage}{BEFORE_25}", optional=True)
        if not before:
            continue
        after = kept.get(stage, optional=True)
        if not after:
            rows.append([stage, "–", f"{avg(before['runs']['model'], STS7):.2f}", "not fitted again yet", "–"])
            continue
        null = (after["meta"].get("stage") or {}).get("fit", {}).get("null_directions", 0)
        refit = refitted(kept, after) if null == 0 else None
        rows.append(
            [
                stage,
                str(null),
                f"{avg(before['runs']['model'], STS7):.2f}",
                f"{avg(after['runs']['model'], STS7):.2f}",
                f"{refit[1]:.2f} ({refit[0]})" if refit else "–",
            ]
        )
    if not rows:
        return []
    header = ["Flow stage", "null directions", "7-task average, before the fix", "after", "the same flow refitted"]
    return [FLOW_FIX_TEXT, "", *markdown_table(header, rows), ""]


def refitted(kept: KeptRuns, stage: dict) -> tuple[str, float] | None:
    """For a Flow stage: the same flow fitted again on the same model by Table 3's -Flow group (sed-flow/<input model's
    stage>) and its 7-task average, or None when that group is not kept: what a refit alone moves."""
    model = (stage["meta"].get("stage") or {}).get("input_model", "")
    rel = sed_flow_rel(model.removeprefix("benchmarks/runs/").removesuffix("/model"))
    again = kept.get(rel, optional=True) if model else None
    refit_run = flow_run(again) if again else None
    return (rel, avg(refit_run, STS7)) if refit_run else None


def first_divergence(kept: KeptRuns, earlier: str, later: str) -> int | None:
    """The first logged training step whose loss differs between two runs of one recipe (their metrics.jsonl), or None
    when every step both logged agrees: where a repeat stopped reproducing the earlier run."""
    import json

    def losses(rel: str) -> dict[int, float]:
        path = kept.root / rel / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
        return {row["step"]: row["loss"] for row in rows if "loss" in row}

    a, b = losses(earlier), losses(later)
    return next((step for step in sorted(a.keys() & b.keys()) if not np.isclose(a[step], b[step], rtol=1e-6)), None)


RETRAINED_TEXT = (
    "**Trained again (issue 25):** fitting a Flow stage again needs its input model, which a checkout does not keep, so "
    "these stages were trained again with the same recipe, seed and thread count and did not reproduce the kept run: the "
    "code between the two reads the `nli` set split by split (SNLI dev, XNLI-en dev, SNLI test) where it had read it file "
    "by file (SNLI dev, SNLI test, XNLI-en dev), the same pairs in another order, so the seeded shuffle draws other "
    "batches, and a stage trained on the NLI model follows it. Runs since record a digest of their training rows in order "
    "(results.json's meta.training_data). Each -Flow row is fitted on the model of the row above it; a row marked 'earlier "
    "training' is the earlier model, and the 'before issue 25's fix' flow was fitted on it."
)


def retrained_table(kept: KeptRuns, stages: list[tuple[str, str]]) -> list[str]:
    """Stages trained again so that their Flow stage could be fitted again whose repeat did not reproduce the kept run:
    each run's date and 7-task average and the first logged step whose loss differs. Nothing when none was."""
    rows = []
    for label, stage in stages:
        before, after = kept.get(f"{stage}{BEFORE_25}", optional=True), kept.get(stage, optional=True)
        if not (before and after):
            continue
        step = first_divergence(kept, f"{stage}{BEFORE_25}", stage)
        rows.append(
            [
                label,
                before["meta"]["date"][:10],
                f"{avg(before['runs']['model'], STS7):.2f}",
                after["meta"]["date"][:10],
                f"{avg(after['runs']['model'], STS7):.2f}",
                "none" if step is None else str(step),
            ]
        )
    if not rows:
        return []
    header = ["stage", "earlier run", "7-task average", "trained again", "7-task average", "first step whose loss differs"]
    return [RETRAINED_TEXT, "", *markdown_table(header, rows), ""]


def side_by_side(kept: KeptRuns) -> list[str]:
    ours, lib = kept.get("sed/ct"), kept.get("sed-st-ct")
    if not (ours and lib):
        return []
    return [
        "## Side by side: sentune CT vs sentence-transformers ContrastiveTensionLoss",
        "",
        "Same model, wiki sentences, steps, batch, optimiser, rate schedule and seed (005-ct.yaml vs 005-st-ct.yaml); the library's "
        "loss sums the BCE, keeps dropout and always keeps its second tower.",
        "",
        STS_HEADER,
        sts_row("sentune ct", ours["runs"]["model"]),
        sts_row("st ContrastiveTensionLoss", lib["runs"]["model"]),
        "",
    ]


def lower_bound_plot(grid: dict[float, dict[str, float]], best: float, path: Path) -> Path:
    """STS-B dev and test Spearman against the lower bound (the grid's shape: where the choice sits)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lbs = sorted(grid)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(lbs, [grid[lb]["dev"] for lb in lbs], "o-", label="STS-B dev ρ (selects lb)")
    ax.plot(lbs, [grid[lb]["test_rho"] for lb in lbs], "s--", label="STS-B test ρ")
    ax.axvline(best, color="grey", linestyle=":", label=f"chosen lb {best:g}")
    ax.set_xlabel("lower bound lb of the cosine target")
    ax.set_ylabel("Spearman ×100")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def supervised(kept: KeptRuns, figure: Path | None = None) -> list[str]:
    grid = sorted(p.name for p in kept.root.glob("sed-sts-lb*") if (p / "results.json").is_file())
    if not grid:
        kept.missing.append("sed-sts-lb*")
        return []
    by_lb: dict[float, list[tuple[float, dict]]] = {}
    for name in grid:
        result = kept.get(name)
        lb = float(result["meta"]["recipe"]["params"]["lower_bound"])
        by_lb.setdefault(lb, []).append((result["meta"]["best_checkpoint"]["dev_spearman"], result))
    grid = {
        lb: {
            "runs": len(items),
            "dev": np.mean([d for d, _ in items]),
            "test_r": np.mean([r["runs"]["model"]["tasks"]["STS-B"]["all"]["pearson"] for _, r in items]),
            "test_rho": np.mean([r["runs"]["model"]["tasks"]["STS-B"]["all"]["spearman"] for _, r in items]),
        }
        for lb, items in sorted(by_lb.items())
    }
    best = best_lower_bound({lb: row["dev"] for lb, row in grid.items()})
    out = [
        "## Table 4: supervised STS-B (regression to a cosine target in [lb, 1])",
        "",
        "Lower-bound grid (runs per value and epochs as in benchmarks/runners/sed_experiments.sh); lb chosen by the mean STS-B dev Spearman.",
        "",
        "| lb | runs | STS-B dev ρ (mean) | STS-B test r / ρ (mean) |",
        "|---|---|---|---|",
    ]
    for lb, row in grid.items():
        mark = " **(chosen)**" if lb == best else ""
        out.append(f"| {lb:g}{mark} | {row['runs']} | {row['dev']:.2f} | {row['test_r']:.2f} / {row['test_rho']:.2f} |")
    if figure:
        out += ["", f"![STS-B dev and test against the lower bound]({lower_bound_plot(grid, best, figure).name})"]
    out += [
        "",
        f"The ensemble trained with the chosen lb ({best:g}); its members and learners are also in Tables 3 and 3b.",
        "",
        "| model | epochs | STS-B dev ρ (model selection) | STS-B test r / ρ | avg (7, Spearman) |",
        "|---|---|---|---|---|",
    ]
    for label, rel in (
        ("STS (member 1)", "sed-sts/sts"),
        ("STS full ensemble", "sed-sts/sts-sed/full-ensemble"),
        ("STS-SED (learner 1)", "sed-sts/sts-sed/learner-1"),
        ("STS-SED-Flow", "sed-sts/sts-sed-flow"),
        ("STS-Flow (member 1 with a flow fitted on STS12-16)", "sed-sts-flow"),
        ("STS-Flow before issue 25's null-direction fix", f"sed-sts-flow{BEFORE_25}"),
    ):
        result = kept.get(rel, optional=rel.endswith(BEFORE_25))
        if result:
            run, training = result_run(result), (result["meta"].get("recipe") or {}).get("training", {})
            t, dev = run["tasks"]["STS-B"]["all"], (result["meta"].get("best_checkpoint") or {}).get("dev_spearman")
            out.append(
                f"| {label}{fitted_before_fix(label, result)} | {training.get('epochs', '–')} | {'–' if dev is None else f'{dev:.2f}'} | "
                f"{t['pearson']:.2f} / {t['spearman']:.2f} | {avg(run, STS7):.2f} |"
            )
    out += sts_flow_table(kept.get("sed-sts-flow", optional=True), kept.get(f"sed-sts-flow{BEFORE_25}", optional=True))
    return out + [""]


STS_FLOW_TEXT = (
    "STS-Flow, seed 003 Table 4's BERT-L-Flow row: the ensemble's member 1 (the grid's seed-1 run at the chosen bound, the "
    "same model) with a flow fitted on the STS12-16 sentences as every -Flow row here. **Changed (issue 25):** this "
    "model's embeddings (mean of the last layer, no Normalize module) span fewer dimensions than they have over the fit "
    "sentences, and a flow fitted on them was unstable from seed to seed (flow_null_directions.md); the flow now adds noise "
    "in those directions while it fits (sentune.postprocess.flow), and the earlier fit is the last row."
)


def sts_flow_table(flowed: dict | None, before: dict | None) -> list[str]:
    """STS-Flow as data: the model without and with its flow (7-task average, STS-B, how many of the 7 tasks the flow
    lowers, the directions its fit lacked), and the flow fitted before issue 25's fix when kept."""
    if not flowed:
        return []
    plain = flowed["runs"]["model"]

    def row(label: str, run: dict) -> list[str]:
        lowered = sum(run["tasks"][t]["all"]["spearman"] < plain["tasks"][t]["all"]["spearman"] for t in STS7)
        null = (run.get("fit") or {}).get("null_directions")
        cells = [f"{avg(run, STS7):.2f}", f"{run['tasks']['STS-B']['all']['spearman']:.2f}"]
        return [label, *cells, "–" if run is plain else f"{lowered} of 7", "–" if null is None else str(null)]

    rows = [row("without the flow", plain), row("with the flow", result_run(flowed))]
    if before:
        rows.append(row("with the flow, before issue 25's fix", result_run(before)))
    header = ["STS-Flow", "7-task average", "STS-B", "tasks the flow lowers", "directions the fit lacked"]
    return ["", STS_FLOW_TEXT, "", *markdown_table(header, rows)]


def flow_run(result: dict) -> dict | None:
    """An eval's one flow run (`sentune eval --flow`: '<pooling>+flow(...)', beside the same pooling without it), or None."""
    flowed = [run for key, run in result["runs"].items() if "+flow(" in key]
    if len(flowed) > 1:
        raise ValueError(f"{result['meta'].get('command')}: more than one flow run; a row shows one")
    return flowed[0] if flowed else None


def result_run(result: dict) -> dict:
    """The run a row shows: an eval's flow run when it fitted one, else the trained model's evaluation ('model')."""
    return flow_run(result) or result["runs"]["model"]


def senteval(kept: KeptRuns, tags: list[tuple[str, str]]) -> list[str]:
    out = [
        "## Table 7: SentEval (accuracy; SICK-R and STS-B: Pearson of SentEval's supervised regressor)",
        "",
        "| model | " + " | ".join(SENTEVAL) + " | SICK-R | STS-B | avg |",
        "|" + "---|" * (len(SENTEVAL) + 4),
    ]
    for label, tag, *optional in tags:
        result = kept.get(f"sed-senteval-{tag}", optional=bool(optional))
        if result:
            run = result["runs"]["model"]
            cells = [run["tasks"][t]["acc"] for t in SENTEVAL] + [run["tasks"][t]["pearson"] for t in ("SICK-R-reg", "STS-B-reg")]
            # a Flow stage's model: marked as Tables 1-2 mark it when its kept stage was fitted before issue 25's fix
            stage = kept.get(f"sed-gpu/{tag[4:]}" if tag.startswith("gpu-") else f"sed/{tag}", optional=True) if "flow" in tag else None
            label += fitted_before_fix(label, stage) if stage else ""
            out.append(f"| {label} | " + " | ".join(f"{c:.2f}" for c in cells) + f" | **{np.mean(cells):.2f}** |")
    preset = "fast"
    out += ["", f"Transfer preset `{preset}` (5-fold); see benchmarks/results/baselines.md for the protocol.", ""]
    return out + senteval_standard(kept)


def senteval_standard(kept: KeptRuns) -> list[str]:
    """Added (issue 25): SentEval as seed 003 ran it (10-fold, the `standard` preset) for the untuned model (baselines.sh)
    and seed 003's best model on the fast preset, the CT-SED learner."""
    rows = [("no tuning (the model's own pooling)", "baselines-transfer-standard"), ("CT-SED (learner 1)", "sed-senteval-standard-ct-sed-learner-1")]
    found = [(label, result) for label, rel in rows if (result := kept.get(rel))]
    if not found:
        return []
    out = [
        "Added (issue 25): the `standard` preset (10-fold cross-validation, SentEval's own setting, as the paper ran it) for the "
        "untuned model and this page's best model on the fast preset, the CT-SED learner:",
        "",
        "| model | " + " | ".join(SENTEVAL) + " | avg |",
        "|" + "---|" * (len(SENTEVAL) + 2),
    ]
    for label, result in found:
        cells = [result["runs"]["model"]["tasks"][t]["acc"] for t in SENTEVAL]
        out.append(f"| {label} | " + " | ".join(f"{c:.2f}" for c in cells) + f" | **{np.mean(cells):.2f}** |")
    return out + [""]


LAYER_FIT_TEXT = (
    "**Changed (issue 25):** mean pooling of the last layer spans fewer dimensions than the embeddings have, and the flow "
    "now fits with noise in those directions (sentune.postprocess.flow, flow_null_directions.md); rows marked 'before issue "
    "25's fix' are the flow fitted the old way. The 2- and 3-layer flows' embeddings span every direction, so the fix "
    "leaves their fit as it was; where they moved, the model was trained again for the refit and agrees with the kept one "
    "only to float rounding."
)


def layers(kept: KeptRuns, tags: list[tuple[str, str]]) -> list[str]:
    out = [
        "## Table 8: pooling over the last 1, 2, 3 layers (Spearman ×100, average of STS12-16)",
        "",
        "Mean pooling of the last layer, of the mean of the last two, of the last three; '+ Flow' fits a flow on the STS12-16 "
        "sentences for each pooling (lr 1e-3, 1 epoch).",
        "",
        "| model | 1 | 2 | 3 |",
        "|---|---|---|---|",
    ]
    fits: list[list[str]] = []  # (model, its one-layer flow's fit, directions lacking at one layer, 2-/3-layer flows moved by)
    own_rows = {tag for _, tag, *_ in tags}
    for label, tag, *optional in tags:
        result = kept.get(f"sed-layers-{tag}", optional=bool(optional))
        # A set-aside run that is a row of its own is another model (NLI-CT-SED before the pipeline's fix), not this
        # row's earlier fit or training.
        before = None if f"{tag}{BEFORE_25}" in own_rows else kept.get(f"sed-layers-{tag}{BEFORE_25}", optional=True)
        flow_label = flow_name(label)
        if not result:
            # A run set aside for its repeat keeps its rows until the repeat is measured (it stays listed as not measured
            # yet).
            if before:
                out += layer_rows(before["runs"], (("", label), ("+flow", f"{flow_label}, before issue 25's fix")))
                fits.append([label, "to be fitted again (the runner sets it aside and repeats it)", "–", "–"])
            continue
        out += layer_rows(result["runs"], (("", label), ("+flow", flow_label)))
        moved = "–"
        if before and layer_rows(before["runs"], (("", ""),)) != layer_rows(result["runs"], (("", ""),)):
            # the model itself was trained again and differs (the 'Trained again' table): both of its rows
            out += layer_rows(before["runs"], (("", f"{label}, earlier training"), ("+flow", f"{flow_label}, earlier training, before issue 25's fix")))
        elif before:  # the same model measured before issue 25's null-direction fix: only its flow row differs
            out += layer_rows(before["runs"], (("+flow", f"{flow_label}, before issue 25's fix"),))
            moved = f"{full_rank_flow_change(before['runs'], result['runs']):.2f}"
        null = one_layer_null_directions(result)
        fitted = before or null
        fits.append([label, "with the fix" if fitted else "before the fix (its model is not kept)", str(null) if fitted else "not recorded", moved])
    if not any(row[1] != "before the fix (its model is not kept)" for row in fits):
        return out + [""]
    header = ["model", "one-layer flow fitted", "directions lacking at one layer", "2-/3-layer flows moved by"]
    return out + ["", *one_layer_collapse(kept), LAYER_FIT_TEXT, "", *markdown_table(header, fits), ""]


COLLAPSE_TEXT = (
    "**The one-layer collapse (issue 25):** NLI-CT-SED-Flow before issue 25 collapsed at one layer; its flow was fitted "
    "before the fix, recorded no fit summary, and its model is not kept to fit again. The probes (sed_experiments.sh) fit "
    "one-layer flows the old way (`null_noise=0`) on the learner of the pipeline as the paper describes it (several flow "
    "seeds) and on the same learner's recipe and targets started from the NLI model, as the old pipeline's learners were, "
    "each beside the fix. A flow that costs the pooling more than 10 points collapses."
)


def one_layer_collapse(kept: KeptRuns) -> list[str]:
    """Issue 25's one-layer collapse as data: the old model's one-layer flow and each probe's (directions lacking, the
    pooling without the flow, each flow seed's STS12-16 average, whether it collapses). Nothing before the probes run."""
    old = kept.get(f"sed-layers-nli-ct-sed-learner-1{BEFORE_25}", optional=True)
    new = kept.get("sed-layers-nli-ct-sed-learner-1", optional=True)
    if not (old and new):
        return []
    names = ("sed-layers-noise0-nli-ct-sed-learner-1", "sed-layers-noise0-learner-from-nli", "sed-layers-noise1e-2-learner-from-nli")
    seeded, from_nli, from_nli_fixed = (kept.get(name) for name in names)  # listed as not measured until they are
    if not seeded:
        return []
    probes = [
        ("NLI-CT-SED-Flow before issue 25", "before the fix", old, "not recorded"),
        ("the paper's learner", "no noise", seeded, None),
        ("the paper's learner (the table's row)", "with the fix", new, None),
        ("the learner started from the NLI model", "no noise", from_nli, None),
        ("the learner started from the NLI model", "with the fix", from_nli_fixed, None),
    ]
    rows = []
    for model, fit, result, lacking in probes:
        if not result:
            continue
        plain = avg(result["runs"]["mean"])
        for key, run in result["runs"].items():
            if key.startswith("mean+flow"):
                seed = re.search(r"seed=(\d+)", key)
                score = avg(run)
                lack = lacking or str(one_layer_null_directions(result))
                collapses = "yes" if plain - score > 10 else "no"
                rows.append([model, fit, lack, f"{plain:.2f}", seed.group(1) if seed else "0", f"{score:.2f}", collapses])
    header = ["model", "one-layer flow", "directions lacking", "without the flow", "flow seed", "with the flow", "collapses"]
    return [COLLAPSE_TEXT, "", *markdown_table(header, rows), ""]


def full_rank_flow_change(before: dict, after: dict) -> float:
    """The largest change, in points of the STS12-16 average, of the 2- and 3-layer flows between two layers runs."""
    changes = [0.0]
    for pooling in ("last2", "last3"):
        keys = [next((k for k in runs if k.startswith(pooling + "+flow")), None) for runs in (before, after)]
        if all(keys):
            changes.append(abs(avg(before[keys[0]]) - avg(after[keys[1]])))
    return max(changes)


def one_layer_null_directions(result: dict) -> int:
    """How many directions the one-layer (mean) flow's fit embeddings lacked, as its results.json records (0: none, or a
    fit from before issue 25's fix, which did not record them)."""
    fits = [run.get("fit") or {} for key, run in result["runs"].items() if key.startswith("mean+flow")]
    return int(fits[0].get("null_directions", 0)) if fits else 0


def layer_rows(runs: dict, variants) -> list[str]:
    """Table 8 rows: for each (suffix, label), the pooling by its exact name ('') or its flow variant by prefix ('+flow':
    its key also names the flow's settings), over the last 1, 2 and 3 layers."""
    out = []
    for suffix, name in variants:
        keys = [next((k for k in runs if (k.startswith(p + suffix) if suffix else k == p)), None) for p in ("mean", "last2", "last3")]
        if all(keys):
            out.append(f"| {name} | " + " | ".join(f"{avg(runs[k]):.2f}" for k in keys) + " |")
    return out


ROWS = Path(__file__).with_name("sed_rows.yaml")  # the tables' rows, as data


def sections(kept: KeptRuns, out: Path) -> list[str]:
    import yaml

    rows = yaml.safe_load(ROWS.read_text())
    baseline = json.loads((kept.root / "baselines-sts" / "results.json").read_text()) if (kept.root / "baselines-sts" / "results.json").is_file() else None
    parts: list[str] = []
    parts += sts_table(kept, "Table 1: unsupervised", rows["table1"], baseline) + flow_fix_table(kept, rows["table1_flow_stages"])
    parts += sts_table(kept, "Table 2: with NLI labels", rows["table2"], None) + flow_fix_table(kept, rows["table2_flow_stages"])
    parts += retrained_table(kept, rows["retrained"]) + pipeline_change(kept)
    ensembles = rows["ensembles"]
    parts += stability(kept, ensembles, out.with_name("sed_stability.png")) + stability_dev_pooling(kept, ensembles, baseline)
    parts += side_by_side(kept) + supervised(kept, out.with_name("sed_lower_bound.png"))
    return parts + senteval(kept, rows["senteval"]) + layers(kept, rows["layers"])


def main() -> None:
    render_kept_page(
        __doc__,
        "benchmarks/results/sed.md",
        "Seeds 003/004 (Contrastive Tension, NLI, Flow, Sentence Ensemble Distillation) on the default model",
        "benchmarks/runners/sed_experiments.sh",
        sections,
        "benchmarks/runners/sed_experiments.sh`; the runs named gpu, on a CUDA machine: `bash benchmarks/runners/sed_nli_gpu.sh",
        lambda kept: (
            ", whose header states the CPU scale (ensemble size, CT steps, distillation "
            "sentences, grid runs). The default model is all-MiniLM-L6-v2 (6 layers, 384-d, already trained for sentence "
            "similarity), not BERT-Large; NLI uses the 22k NLI pairs of the data directory, not SNLI+MNLI's 1M."
        ),
    )


if __name__ == "__main__":
    main()
