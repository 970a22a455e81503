"""Render benchmarks/results/cf.md (seed 002 on the default model) from the kept results of
benchmarks/runners/cf_experiments.sh. A row whose run has not finished is listed as missing, never filled in;
every number comes from a results.json (or pairs.json), every run names its command."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sentune.analysis.pages import BEFORE_25, KeptRuns, render_kept_page, sts7_average
from sentune.data.catalog import group_tasks

STS7 = group_tasks("sts")  # the catalog's 7 STS tasks
ENCODERS = (  # (label, training run, multitask run, alignment run)
    ("no tuning (mean pooling)", None, "cf-multitask-untuned", "cf-align-untuned"),
    ("SimCSE", "cf-simcse", "cf-multitask-cf-simcse", "cf-align-cf-simcse"),
    ("Mirror-BERT", "cf-mirror", "cf-multitask-cf-mirror", "cf-align-cf-mirror"),
    ("flow (encoder frozen, trained on wiki)", "cf-flow", "cf-multitask-cf-flow", "cf-align-cf-flow"),
    ("BERT-CF (Mirror → joint flow)", "cf-bert-cf", "cf-multitask-cf-bert-cf", "cf-align-cf-bert-cf"),
)


def dev_rho(result: dict) -> float | None:
    best = result["meta"].get("best_checkpoint") or {}
    return best.get("dev_spearman")


def fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}" if len(values) > 1 else fmt(values[0])


def table1(runs: KeptRuns) -> list[str]:
    baseline = runs.get("cf-flow-target")
    out = [
        "## Table 1: unsupervised (STS-B dev ρ, 7-task average) and supervised dev metrics after multitask fine-tuning",
        "",
        "Unsupervised: Spearman ×100, cosine, 'all' aggregation; a trained encoder's dev ρ is that of its selected "
        "checkpoint. Supervised (§5.2, multitask fine-tuning of each encoder, dev split): SST-5 accuracy, QQP accuracy "
        "at the (1 + h_para)/2 threshold, STS-B Pearson after rescaling to [0, 5], and their mean. QQP: the data directory "
        "has no QQP train split, so the heads train on its dev.tsv (10,000 pairs) and its test.tsv is halved into dev "
        "and test, stratified by label with a fixed seed (5,000 pairs each, half duplicates).",
        "",
        "| encoder | STS-B dev ρ | 7-task avg | 7-task avg (wmean) | SST-5 dev acc | QQP dev acc | STS-B dev r | mean |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, train, multitask, _ in ENCODERS:
        if train is None:
            if not baseline:
                continue
            evaluated = baseline["runs"]["mean"]
            dev = evaluated["tasks"].get("STS-B-dev", {}).get("all", {}).get("spearman")
        else:
            result = runs.get(train)
            if not result:
                continue
            evaluated, dev = result["runs"]["model"], dev_rho(result)
        avg, wavg = sts7_average(evaluated), sts7_average(evaluated, aggregation="wmean")
        sup = runs.get(multitask)
        out.append(f"| {label} | {fmt(dev)} | {fmt(avg)} | {fmt(wavg)} | " + supervised_cells(sup, "dev") + " |")
        old = runs.get(multitask + BEFORE_25, optional=True)
        if old:
            out.append(f"| {label}{HEADS_BEFORE_25} | – | – | – | " + supervised_cells(old, "dev") + " |")
    out += [
        "",
        "### Table 2: test metrics after multitask fine-tuning",
        "",
        "| encoder | SST-5 test acc | QQP test acc | STS-B test r | mean |",
        "|---|---|---|---|---|",
    ]
    changed = []
    for label, _, multitask, _ in ENCODERS:
        sup, old = runs.get(multitask), runs.get(multitask + BEFORE_25, optional=True)
        if sup:
            out.append(f"| {label} | " + supervised_cells(sup, "test") + " |")
        if old:
            out.append(f"| {label}{HEADS_BEFORE_25} | " + supervised_cells(old, "test") + " |")
        if sup and old:
            before, after = (r["meta"]["method_metrics"]["test"].get("multitask-test_sst5_acc") for r in (old, sup))
            changed.append(f"{label} {fmt(before)} → {fmt(after)}")
    if changed:
        out += [
            "",
            "Changed (issue 25): the heads read the L2-normalised embedding (`head_input: unit` in 002-multitask.yaml), one "
            "scale whatever the encoder; they used to read it as is: the untuned model's unit vectors, the trained encoders' "
            "unnormalised ones, a flow's of norm about √384, to which the sentiment head's linear layer is sensitive (the "
            "cosine heads are not). The paper runs 5000 multitask steps; the old and the new runs here both take the steps "
            "stated at the top. The untuned model ends in its own Normalize module, so its old and new runs must agree (a check "
            "of the change). SST-5 test accuracy, before → after: " + "; ".join(changed) + "." + multitask_cost(runs),
        ]
    return out + [""]


HEADS_BEFORE_25 = " (before issue 25: heads fed the embedding as is)"


def supervised_cells(result: dict | None, split: str) -> str:
    """SST-5 accuracy, QQP accuracy, STS-B Pearson and their mean from a multitask run's `split` metrics."""
    metrics = result["meta"]["method_metrics"][split] if result else {}
    return " | ".join(fmt(metrics.get(f"multitask-{split}_{k}")) for k in ("sst5_acc", "qqp_acc", "sts_pearson", "mean"))


def flow_target(runs: KeptRuns) -> list[str]:
    names = ("cf-flow-target", "cf-flow-target-cls")
    results = [(r, "") for r in map(runs.get, names) if r]
    if not results:
        return []
    # Issue 25: the same evaluations before the flow's null-direction fix, kept beside (benchmarks/runners/cf_experiments.sh)
    before = [(r, ", before issue 25's fix") for r in (runs.get(n + BEFORE_25, optional=True) for n in names) if r]
    out = [
        "## Flow fitted on the target sentences (BERT-flow's 'target' setting), untuned default model",
        "",
        "Each task's own sentences fit the flow (encoder frozen), 3 seeds; next to the same pooling without it: mean of "
        "the last layer (seed 002's pooling), first-last average (BERT-flow's) and [CLS].",
        "",
        "| pooling | without flow | with flow, seeds | with flow, mean ± std | change |",
        "|---|---|---|---|---|",
    ]
    verdicts, null = [], {}
    order = [p for r, _ in results for p in r["meta"]["poolings"]]  # each pooling's earlier fit right under it
    pairs = sorted(
        ((r, p, n) for r, n in results + before for p in r["meta"]["poolings"]), key=lambda x: (order.index(x[1]) if x[1] in order else len(order), x[2])
    )
    for result, pooling, note in pairs:
        plain = sts7_average(result["runs"][pooling])
        flowed = [run for key, run in result["runs"].items() if key.startswith(f"{pooling}+flow(")]
        seeded = [sts7_average(run) for run in flowed]
        if seeded:
            out.append(
                f"| {pooling}{note} | {plain:.2f} | " + ", ".join(f"{v:.2f}" for v in seeded) + f" | {mean_std(seeded)} | {np.mean(seeded) - plain:+.2f} |"
            )
            if note:
                continue  # the verdicts are the current fit's
            # a per-task flow records its fit under each task (sentune.tasks.evaluate)
            fits = [t.get("fit") or {} for run in flowed for t in run["tasks"].values()]
            null[pooling] = max(f.get("null_directions", 0) for f in fits)
            raised = sum(v > plain for v in seeded)
            verdicts.append(
                f"- {pooling}: the flow {'raises' if np.mean(seeded) > plain else 'does NOT raise'} the 7-task average "
                f"({plain:.2f} → {np.mean(seeded):.2f}; {raised} of {len(seeded)} seeds above the plain pooling)."
            )
    if before:
        out += [
            "",
            "**Changed (issue 25):** a flow now adds noise in the directions its fit embeddings do not span "
            "(sentune.postprocess.flow, flow_null_directions.md); rows marked 'before issue 25's fix' are the flows fitted the "
            "old way. Directions missing from the fit embeddings (the most over a pooling's per-task fits): "
            + ", ".join(f"{p} {n}" for p, n in null.items())
            + ".",
        ]
    out += noise_scale(runs)
    whitened = runs.get("baselines-sts")
    if whitened:  # the linear counterpart of the flow, fitted on the same sentences (benchmarks/runners/baselines.sh)
        pairs = [
            f"{p} {sts7_average(whitened['runs'][p]):.2f} → {sts7_average(whitened['runs'][p + '+whiten(per-task)']):.2f}"
            for p in ("mean", "first-last", "cls")
            if p + "+whiten(per-task)" in whitened["runs"]
        ]
        out += ["", "Whitening fitted on the same per-task sentences, for comparison: " + "; ".join(pairs) + "."]
    return out + ["", "Must show (the flow fitted on the target sentences raises the untuned model's average under the same pooling):", ""] + verdicts + [""]


NOISE_RUNS = (
    ("0 (the fit before the fix)", "cf-flow-target-noise0"),
    ("1e-3", "cf-flow-target-noise1e-3"),
    ("1e-2 (the default)", "cf-flow-target"),
    ("1e-1", "cf-flow-target-noise1e-1"),
)


def noise_scale(runs: KeptRuns) -> list[str]:
    """Issue 25: the mean-pooling target flows with the null-direction noise at several scales (Flow(null_noise=...),
    × the largest direction's scale), each with the loss its fits end at (mean over the tasks' fits and the seeds)."""
    rows, seeds = [], {}
    for label, name in NOISE_RUNS:
        result = runs.get(name, optional=True)
        flowed = [run for key, run in (result or {}).get("runs", {}).items() if key.startswith("mean+flow(")]
        if not flowed:
            continue
        seeded = seeds[name] = [sts7_average(run) for run in flowed]
        losses = [t["fit"]["loss_last"] for run in flowed for t in run["tasks"].values() if "loss_last" in (t.get("fit") or {})]
        rows.append(f"| {label} | " + ", ".join(f"{v:.2f}" for v in seeded) + f" | {mean_std(seeded)} | {np.mean(losses):.1f} |")
    if len(rows) < 2:
        return []
    earlier = runs.get("cf-flow-target" + BEFORE_25, optional=True)
    repeat = ""
    if earlier and "cf-flow-target-noise0" in seeds:
        old = [sts7_average(run) for key, run in earlier["runs"].items() if key.startswith("mean+flow(")]
        gap = max(abs(a - b) for a, b in zip(old, seeds["cf-flow-target-noise0"], strict=True))
        repeat = (
            f" null_noise 0 takes the code path of the fit before the fix; its seeds differ from the kept earlier run's by at "
            f"most {gap:.2f}. The cause: that run, of {earlier['meta']['date'][:10]}, encoded other sentences with them (its tasks "
            "included STS-B dev), so its embeddings differ in the last float bits (sentence-transformers pads each batch of "
            "length-sorted sentences), and a fit without the noise does not converge and carries such differences into its "
            "scores; a fit with the noise does not (flow_input_sensitivity.md: the same sentences encoded alone and with "
            "others, flows of three seeds fitted on each, with and without the noise)."
        )
    return [
        "",
        "The noise's scale, mean pooling (the same flows and seeds; null_noise × the largest direction's scale):",
        "",
        "| null_noise | 7-task average, seeds | mean ± std | fit loss at the end (mean over fits) |",
        "|---|---|---|---|",
        *rows,
        "",
        "Without the noise the fits end at a far higher loss: data on fewer dimensions than the space has no maximum-likelihood "
        "density, and the fit does not converge. The noise's scale changes the end loss but not the scores. Here the "
        "converged flow scores lower than the unconverged one, and every mean-pooling flow in this section scores below the "
        "plain mean pooling; on seed 003's supervised model (flow_null_directions.md) the unconverged flows varied from seed "
        "to seed and the converged ones did not." + repeat,
    ]


SIDE_BY_SIDE = (("sentune simcse (τ 0.05)", "cf-simcse"), ("st MultipleNegativesRankingLoss (scale 20)", "cf-st-mnrl"))


def side_by_side(runs: KeptRuns) -> list[str]:
    found = {label: runs.get(name) for label, name in SIDE_BY_SIDE}
    if not all(found.values()):
        return []
    out = [
        "## Side by side: sentune SimCSE vs sentence-transformers MultipleNegativesRankingLoss on (s, s) pairs",
        "",
        "Same model, wiki sentences, steps, batch, learning rate, seed and checkpoint selection (002-simcse.yaml vs 002-st-mnrl.yaml).",
        "",
        "| loss | seed | STS-B dev ρ | " + " | ".join(STS7) + " | avg |",
        "|" + "---|" * (len(STS7) + 4),
    ]
    out += [
        f"| {label} | {r['meta']['recipe']['training']['seed']} | {fmt(dev_rho(r))} | "
        + " | ".join(f"{r['runs']['model']['tasks'][t]['all']['spearman']:.2f}" for t in STS7)
        + f" | **{sts7_average(r['runs']['model']):.2f}** |"
        for label, r in found.items()
    ]
    ours, lib = (sts7_average(r["runs"]["model"]) for r in found.values())
    return out + ["", noise_verdict(ours - lib, runs), ""]


def noise_verdict(diff: float, runs: KeptRuns) -> str:
    """Ours − library (one seed each) against the seed-to-seed spread of the same trainer on the same model and
    evaluation: SG-OPT's 3 seeds (benchmarks/runners/sg_experiments.sh)."""
    seeds = [sts7_average(r["runs"]["model"]) for r in (runs.get(f"sg-opt-s{s}") for s in (1, 2, 3)) if r]
    if len(seeds) < 2:
        return f"Difference (ours − library): {diff:+.2f}; no seed spread measured to compare it with."
    spread = float(np.std(seeds, ddof=1))
    verdict = "within noise (no worse than 2 standard deviations) or better" if diff >= -2 * spread else "WORSE than noise allows"
    return (
        f"Must show (ours within noise or better): difference (ours − library) {diff:+.2f} points of 7-task average, one "
        f"seed each; noise: the seed standard deviation of SG-OPT on this model and evaluation, {spread:.2f} "
        f"({len(seeds)} seeds). Ours is {verdict}."
    )


def ablations(runs: KeptRuns) -> list[str]:
    out = ["## §6.1 ablations (STS-B dev ρ of the selected checkpoint; 7-task average)", "", "| encoder | STS-B dev ρ | 7-task avg |", "|---|---|---|"]
    for label, name in (
        ("SimCSE", "cf-simcse"),
        ("SimCSE-joint", "cf-simcse-joint"),
        ("Mirror", "cf-mirror"),
        ("Mirror-joint (BERT-CF)", "cf-bert-cf"),
        ("MinBERT-joint as written (from the untuned model; encoder learns from L_mirror only at 1e-4, the flow at 3e-4)", "cf-minbert-joint-paper"),
        ("MinBERT-joint before issue 25 (from the Mirror model; L_flow also into the encoder; everything at 1e-5)", "cf-minbert-joint"),
        ("Mirror-flow (no contrastive term in stage 2)", "cf-mirror-flow"),
    ):
        result = runs.get(name)
        if result:
            out.append(f"| {label} | {fmt(dev_rho(result))} | {sts7_average(result['runs']['model']):.2f} |")
    paper, before = runs.get("cf-minbert-joint-paper"), runs.get("cf-minbert-joint")
    if paper and before:
        out += [
            "",
            "Changed (issue 25): MinBERT-joint is now run as seed 002 §6.1 describes it, the flow learned jointly with the "
            "contrastive term while the encoder is unfrozen for the contrastive update only: from the untuned model, L_flow's "
            "gradient kept out of the encoder, the flow at its own rate of 3e-4 (the encoder at 1e-4). It used to start from "
            f"the stage-1 Mirror model with L_flow's gradient in the encoder, everything at 1e-5: STS-B dev "
            f"{fmt(dev_rho(before))} → {fmt(dev_rho(paper))}, 7-task {sts7_average(before['runs']['model']):.2f} → "
            f"{sts7_average(paper['runs']['model']):.2f}. Both rows are kept.",
        ]
    return out + [""]


def alignment(runs: KeptRuns) -> list[str]:
    out = [
        "## Table 7: alignment over QQP's duplicate pairs, uniformity over the sentences of every pair (lower is better)",
        "",
        "| encoder | alignment | uniformity | uniformity over |",
        "|---|---|---|---|",
    ]
    old_way, unrepeated, changed = False, False, []
    for label, _, _, name in ENCODERS:
        new, old = runs.get(name), runs.get(name + BEFORE_25, optional=True)
        for result, note in ((new, ""), (old, " (before issue 25)")):
            if result:
                au = result["runs"]["model"]["alignment_uniformity"]
                covered = f"{au['uniformity_sentences']:,} sentences of every pair" if "uniformity_sentences" in au else "the duplicates' sentences only"
                old_way |= "uniformity_sentences" not in au
                out.append(f"| {label}{note} | {au['alignment']:.3f} | {au['uniformity']:.3f} | {covered} |")
        if new and "uniformity_sentences" not in new["runs"]["model"]["alignment_uniformity"]:
            unrepeated = True
        elif new and old:
            before, after = (r["runs"]["model"]["alignment_uniformity"]["uniformity"] for r in (old, new))
            changed.append(f"{label} {before:.3f} → {after:.3f}")
    if old_way:
        out += [
            "",
            "Changed (issue 25): seed 002 §6.3 takes uniformity over the data D = P ∪ N, every sentence of every QQP pair; "
            "sentune used to take it over the sentences of the duplicate pairs P only. Rows marked 'the duplicates' "
            "sentences only' were measured that way; alignment, over P, is the same computation in both."
            + (" Uniformity, before → after: " + "; ".join(changed) + "." if changed else "")
            + (
                " A row measured the old way with no repeat beside it is not comparable with the others until its run is "
                "repeated (`bash benchmarks/runners/cf_experiments.sh`)."
                if unrepeated
                else ""
            ),
        ]
    return out + [""]


def pairs(root: Path, missing: list[str]) -> list[str]:
    path = root / "cf-pairs" / "pairs.md"
    if not path.is_file():
        missing.append("cf-pairs")
        return []
    return ["## Tables 3-6 style: sentence pairs before and after", "", path.read_text(), ""]


def multitask_cost(runs: KeptRuns) -> str:
    """Why the multitask runs stop where they do: their recorded training time per step (results.json's
    training_seconds over the recipe's max_steps, dev evaluations included) and what the paper's 5000 steps would take."""
    per_step, devices = [], set()
    for _, _, multitask, _ in ENCODERS:
        meta = (runs.get(multitask, optional=True) or {}).get("meta", {})
        if meta.get("training_seconds"):
            per_step.append(meta["training_seconds"] / meta["recipe"]["training"]["max_steps"])
            devices.add(str(meta.get("training_device", "device not recorded")).upper())
    if not per_step:
        return ""
    low, high = min(per_step), max(per_step)
    return (
        f" Training took {low:.1f}-{high:.1f} s a step here ({len(per_step)} runs, {'/'.join(sorted(devices))}, dev evaluations included), so the "
        f"paper's 5000 steps would take about {5000 * low / 3600:.0f}-{5000 * high / 3600:.0f} h per encoder: the runs keep the "
        "steps stated at the top."
    )


def run_scale(runs: KeptRuns) -> str:
    """Steps and batch as the kept runs recorded them (the paper: 10^4 contrastive steps, 5000 multitask steps)."""
    parts = []
    for label, name in (("contrastive stages", "cf-simcse"), ("joint flow stages", "cf-bert-cf"), ("multitask fine-tuning", "cf-multitask-untuned")):
        result = runs.get(name)
        if result:
            training = result["meta"]["recipe"]["training"]
            parts.append(f"{label} {training['max_steps']} steps at batch {training['batch_size']}")
    return ("; ".join(parts) + " (the paper: 10^4 contrastive steps, 5000 multitask steps).") if parts else "(no run finished yet)."


def main() -> None:
    render_kept_page(
        __doc__,
        "benchmarks/results/cf.md",
        "Seed 002 (contrastive flows, multitask fine-tuning) on the default model",
        "benchmarks/runners/cf_experiments.sh",
        lambda runs, out: table1(runs) + flow_target(runs) + side_by_side(runs) + ablations(runs) + alignment(runs) + pairs(runs.root, runs.missing),
        "benchmarks/runners/cf_experiments.sh",
        lambda runs: (
            ". The default model is all-MiniLM-L6-v2 (6 layers, 384-d, already trained for "
            "sentence similarity), not the paper's MinBERT; CPU scale: " + run_scale(runs) + " STS-B dev plays the paper's "
            "'STS-13 dev' role (STS-13 has no dev split here). The default model's card lists its training data, among them "
            "Quora Question Triplets (103,663) and AllNLI: its QQP accuracies are those of a model that has seen Quora duplicates."
        ),
    )


if __name__ == "__main__":
    main()
