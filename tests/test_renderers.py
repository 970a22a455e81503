"""The result-page renderers' own arithmetic and bookkeeping (benchmarks/renderers, benchmarks/speed/sg_table6.py):
runs measured the old way shown beside their repeats, paired seed differences, the run a flow row reads. Synthetic
results.json files in a temporary kept-runs folder; no model, no data."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from sentune.analysis import pages
from sentune.data.catalog import group_tasks

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
STS7 = group_tasks("sts")


def load(relative: str):
    """Import a benchmarks script as a module (they are scripts, not a package)."""
    path = BENCH / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    sys.path.insert(0, str(path.parent))  # as `python benchmarks/renderers/X.py` runs it: its folder's modules import
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def sts_run(score: float) -> dict:
    """An evaluation whose 7 STS tasks all score `score` (Spearman and Pearson) under both aggregations."""
    tasks = {t: {"all": {"spearman": score, "pearson": score}} for t in STS7}
    summary = {"sts_tasks": list(STS7), "avg_all_spearman": score, "avg_wmean_spearman": score, "avg_all_pearson": score}
    return {"tasks": tasks, "summary": summary}


def write(root: Path, name: str, result: dict) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    result.setdefault("meta", {}).update(command=f"cmd {name}", date="2026-11-25")
    (root / name / "results.json").write_text(json.dumps(result))


def test_sg_ablation_difference_is_paired_by_seed_and_judged_against_two_standard_errors(tmp_path):
    render_sg = load("renderers/render_sg.py")
    reference = {1: 78.0, 2: 78.5, 3: 77.5}
    ablation = {1: 77.0, 2: 77.6, 3: 76.4}  # below SG-OPT by 1.0, 0.9, 1.1 on the same seeds

    def run(seed, score):
        return {"runs": {"model": sts_run(score)}, "meta": {"recipe": {"training": {"seed": seed}}}}

    text = render_sg._versus([run(s, v) for s, v in ablation.items()], {s: v for s, v in reference.items()})
    diffs = np.array([ablation[s] - reference[s] for s in (1, 2, 3)])
    stderr = diffs.std(ddof=1) / np.sqrt(3)
    assert text == f"{diffs.mean():+.2f} ± {stderr:.2f} (3 seeds; beyond 2 s.e.)"
    noisy = {1: 79.0, 2: 77.0, 3: 78.4}  # +1.0, -1.5, +0.9: the mean is within 2 standard errors of 0
    assert "within 2 s.e." in render_sg._versus([run(s, v) for s, v in noisy.items()], reference)
    assert render_sg._versus([run(1, 77.0)], reference) == "-1.00 (1 seed)"
    assert render_sg._versus([run(4, 77.0)], reference) == "–"  # no SG-OPT run with that seed: nothing to pair


def test_sg_ablation_names_follow_the_runner():
    render_sg = load("renderers/render_sg.py")
    assert render_sg._ablation_names("ablation-opt2") == ["ablation-opt2", "ablation-opt2-s2", "ablation-opt2-s3"]
    assert render_sg._ablation_names("sg-opt") == ["sg-opt-s1", "sg-opt-s2", "sg-opt-s3"]


def test_sed_row_reads_the_flow_run_of_an_eval_and_refuses_two():
    render_sed = load("renderers/render_sed.py")
    plain, flowed = sts_run(70.0), sts_run(75.0)
    result = {"runs": {"model": plain, "model+flow(tasks:STS12,learning_rate=0.001)": flowed}, "meta": {}}
    assert render_sed.result_run(result) is flowed
    assert render_sed.result_run({"runs": {"model": plain}, "meta": {}}) is plain
    with pytest.raises(ValueError, match="more than one flow run"):
        render_sed.result_run({"runs": {"mean+flow(a)": plain, "last2+flow(a)": flowed}, "meta": {"command": "x"}})


def test_cf_shows_a_repeated_run_beside_the_old_one_with_both_numbers(tmp_path):
    render_cf = load("renderers/render_cf.py")
    common = pages
    old_au = {"alignment": 0.3, "uniformity": -3.5}
    new_au = {"alignment": 0.3, "uniformity": -3.6, "uniformity_sentences": 1000, "positive_pairs": 10}
    write(tmp_path, "cf-align-cf-mirror-before-25", {"runs": {"model": {"alignment_uniformity": old_au}}})
    write(tmp_path, "cf-align-cf-mirror", {"runs": {"model": {"alignment_uniformity": new_au}}})
    write(tmp_path, "cf-align-cf-simcse", {"runs": {"model": {"alignment_uniformity": old_au}}})  # not repeated yet
    kept = common.KeptRuns(tmp_path)
    text = "\n".join(render_cf.alignment(kept))
    assert "| Mirror-BERT | 0.300 | -3.600 | 1,000 sentences of every pair |" in text
    assert "| Mirror-BERT (before issue 25) | 0.300 | -3.500 | the duplicates' sentences only |" in text
    assert "Uniformity, before → after: Mirror-BERT -3.500 → -3.600." in text
    assert "not comparable with the others until its run is repeated" in text  # SimCSE's row is still the old way
    assert "cf-align-cf-mirror-before-25" not in kept.missing  # an old run is optional, never listed as missing
    assert "cf-align-cf-flow" in kept.missing


def test_cf_multitask_rows_before_and_after_the_head_scale_fix(tmp_path):
    render_cf = load("renderers/render_cf.py")
    common = pages

    def multitask(sst5):
        metrics = {
            split: {f"multitask-{split}_{k}": v for k, v in (("sst5_acc", sst5), ("qqp_acc", 80.0), ("sts_pearson", 85.0), ("mean", 60.0))}
            for split in ("dev", "test")
        }
        return {"runs": {}, "meta": {"method_metrics": metrics}}

    write(tmp_path, "cf-multitask-untuned", multitask(31.5))
    write(tmp_path, "cf-multitask-untuned-before-25", multitask(30.0))
    text = "\n".join(render_cf.table1(common.KeptRuns(tmp_path)))
    assert "| no tuning (mean pooling) (before issue 25: heads fed the embedding as is) | 30.00 | 80.00 | 85.00 | 60.00 |" in text
    assert "| no tuning (mean pooling) | 31.50 | 80.00 | 85.00 | 60.00 |" in text
    assert "SST-5 test accuracy, before → after: no tuning (mean pooling) 30.00 → 31.50." in text


def test_sg_table6_reads_back_the_page_it_replaces(tmp_path):
    sg_table6 = load("speed/sg_table6.py")
    page = tmp_path / "sg_table6.md"
    page.write_text(
        "# Seed 001, Table 6\n\nDate: 2026-11-22 · STS-B test: 2758 sentences\n\n"
        "| method | training s | inference s |\n|---|---|---|\n| mean pooling | 0.0 | 3.96 |\n| SG-OPT (runs/x) | 971.8 | 4.01 |\n"
    )
    rows, date = sg_table6.previous_page(page)
    assert date == "2026-11-22"
    assert rows == {"mean pooling": ("0.0", "3.96"), "SG-OPT (runs/x)": ("971.8", "4.01")}
    assert sg_table6.previous_page(tmp_path / "absent.md") == ({}, None)


def test_sed_pipeline_change_gives_each_model_before_and_after_on_both_machines(tmp_path):
    render_sed = load("renderers/render_sed.py")
    common = pages
    scores = {
        "sed/nli": 72.0, "sed-gpu/nli": 73.0, "sed/nli-ct": 75.0, "sed-gpu/nli-ct": 75.5,
        "sed/nli-ct-sed-before-25/learner-1": 74.5, "sed-gpu/nli-ct-sed/learner-1": 77.4,
        "sed/nli-ct-sed-flow-before-25": 75.5, "sed-gpu/nli-ct-sed-flow": 76.2,
    }  # fmt: skip
    kept = common.KeptRuns(tmp_path)
    assert render_sed.pipeline_change(kept) == []  # nothing measured: no table, and nothing listed missing
    assert kept.missing == []
    for rel, score in scores.items():
        write(tmp_path, rel, {"runs": {"model": sts_run(score)}})
    lines = render_sed.pipeline_change(kept)
    assert "| NLI | – | 72.00 | 73.00 |" in lines and "| NLI-CT | – | 75.00 | 75.50 |" in lines
    assert "| NLI-CT-SED (learner 1) | 74.50 | not measured | 77.40 |" in lines
    assert "| NLI-CT-SED-Flow | 75.50 | not measured | 76.20 |" in lines
    assert "| NLI-CT-SED (learner 1) started from the NLI model (probe) | – | not measured | – |" in lines
    assert "| Table 8's layers | not measured | not measured |" in lines
    # the same pipeline run on the CPU, and which of its evaluations each machine has measured, read from the kept results
    write(tmp_path, "sed/nli-ct-sed/learner-1", {"runs": {"model": sts_run(76.0)}})
    write(tmp_path, "sed-senteval-nli-ct-sed-learner-1", {"runs": {"model": sts_run(80.0)}})
    write(tmp_path, "sed-layers-gpu-nli-ct-sed-learner-1", {"runs": {"model": sts_run(80.0)}})
    write(tmp_path, "sed-probe-learner-from-nli", {"runs": {"model": sts_run(75.1)}})
    lines = render_sed.pipeline_change(common.KeptRuns(tmp_path))
    assert "| NLI-CT-SED (learner 1) | 74.50 | 76.00 | 77.40 |" in lines
    assert "| NLI-CT-SED (learner 1) started from the NLI model (probe) | – | 75.10 | – |" in lines
    assert "| Table 7's SentEval | measured | not measured |" in lines and "| Table 8's layers | not measured | measured |" in lines
    assert "| Table 3b's dev-chosen pooling | not measured | not measured |" in lines


def layers_result(flow_score: float, null: int | None) -> dict:
    """Table 8's kept run: mean, last2, last3 poolings (78, 75, 72) and their flows (the one-layer flow at flow_score,
    recording `null` missing directions unless None; the others one point below their pooling)."""
    runs = {}
    for pooling, plain in (("mean", 78.0), ("last2", 75.0), ("last3", 72.0)):
        runs[pooling] = sts_run(plain)
        runs[f"{pooling}+flow(tasks:STS12,learning_rate=0.001)"] = sts_run(flow_score if pooling == "mean" else plain - 1)
        if null is not None and pooling == "mean":
            runs[f"{pooling}+flow(tasks:STS12,learning_rate=0.001)"]["fit"] = {"sentences": 10, "null_directions": null}
    return {"runs": runs}


def test_sed_table8_shows_the_flow_fitted_before_the_fix_beside_the_new_one(tmp_path):
    render_sed = load("renderers/render_sed.py")
    common = pages
    write(tmp_path, "sed-layers-default", layers_result(77.0, 3))
    write(tmp_path, "sed-layers-default-before-25", layers_result(56.0, None))
    lines = render_sed.layers(common.KeptRuns(tmp_path), [("no tuning", "default")])
    assert "| no tuning | 78.00 | 75.00 | 72.00 |" in lines
    assert "| no tuning-Flow | 77.00 | 74.00 | 71.00 |" in lines
    assert "| no tuning-Flow, before issue 25's fix | 56.00 | 74.00 | 71.00 |" in lines
    assert "| no tuning | with the fix | 3 | 0.00 |" in lines
    # A model whose flow was not fitted again (no earlier fit kept beside, no null directions recorded) is named as such.
    write(tmp_path, "sed-layers-ct", layers_result(76.0, None))
    lines = render_sed.layers(common.KeptRuns(tmp_path), [("no tuning", "default"), ("CT", "ct")])
    assert "| CT | before the fix (its model is not kept) | not recorded | – |" in lines
    # The same model's full-rank (2- and 3-layer) flows moved between the two fits: the largest change.
    moved = layers_result(56.0, None)
    moved["runs"]["last2+flow(tasks:STS12,learning_rate=0.001)"] = sts_run(74.5)
    write(tmp_path, "sed-layers-default-before-25", moved)
    lines = render_sed.layers(common.KeptRuns(tmp_path), [("no tuning", "default")])
    assert "| no tuning | with the fix | 3 | 0.50 |" in lines
    # A model trained again that differs from the earlier one: the earlier model's rows both shown, marked.
    write(tmp_path, "sed-layers-nli-ct", layers_result(77.5, 3))
    earlier = layers_result(70.0, None)
    earlier["runs"]["mean"] = sts_run(77.0)
    write(tmp_path, "sed-layers-nli-ct-before-25", earlier)
    lines = render_sed.layers(common.KeptRuns(tmp_path), [("NLI-CT", "nli-ct")])
    assert "| NLI-CT | 78.00 | 75.00 | 72.00 |" in lines and "| NLI-CT-Flow | 77.50 | 74.00 | 71.00 |" in lines
    assert "| NLI-CT, earlier training | 77.00 | 75.00 | 72.00 |" in lines
    assert "| NLI-CT-Flow, earlier training, before issue 25's fix | 70.00 | 74.00 | 71.00 |" in lines
    assert "| NLI-CT | with the fix | 3 | – |" in lines
    # A run set aside for its repeat, not yet repeated, keeps its rows, marked, and is named as pending.
    write(tmp_path, "sed-layers-nli-before-25", layers_result(60.0, None))
    lines = render_sed.layers(common.KeptRuns(tmp_path), [("no tuning", "default"), ("NLI", "nli")])
    assert "| NLI | 78.00 | 75.00 | 72.00 |" in lines
    assert "| NLI-Flow, before issue 25's fix | 60.00 | 74.00 | 71.00 |" in lines
    assert "| NLI | to be fitted again (the runner sets it aside and repeats it) | – | – |" in lines
    # Only models whose flow predates the fix: no fit table (the table's rows are the whole of Table 8).
    lines = render_sed.layers(common.KeptRuns(tmp_path), [("CT", "ct")])
    assert lines[-2:] == ["| CT-Flow | 76.00 | 74.00 | 71.00 |", ""]


def test_sed_table8_issue25_row_and_the_one_layer_collapse_table(tmp_path):
    render_sed = load("renderers/render_sed.py")
    common = pages
    assert render_sed.flow_name("NLI-CT-SED, issue 25 (CPU)") == "NLI-CT-SED-Flow, issue 25 (CPU)"
    assert render_sed.flow_name("NLI-CT (H100)", "-SED-Flow") == "NLI-CT-SED-Flow (H100)"
    assert render_sed.flow_name("no tuning") == "no tuning-Flow"

    def seeded_layers(one_layer: dict[int | None, float], null: int | None = 3) -> dict:
        runs = {p: sts_run(v) for p, v in (("mean", 79.0), ("last2", 77.0), ("last3", 74.0))}
        for seed, score in one_layer.items():
            label = "tasks:STS12" + ("" if seed is None else f",seed={seed}") + ",learning_rate=0.001"
            runs[f"mean+flow({label})"] = sts_run(score) | ({"fit": {"null_directions": null}} if null else {})
        for pooling in ("last2", "last3"):
            runs[f"{pooling}+flow(tasks:STS12,learning_rate=0.001)"] = sts_run(75.0)
        return {"runs": runs}

    # The issue-25 learner's kept earlier run is the old pipeline's other model: it has its own row, never 'earlier training'.
    write(tmp_path, "sed-layers-nli-ct-sed-learner-1", seeded_layers({None: 77.4}))
    write(tmp_path, "sed-layers-nli-ct-sed-learner-1-before-25", seeded_layers({None: 56.8}, null=None))
    tags = [("NLI-CT-SED (before issue 25)", "nli-ct-sed-learner-1-before-25"), ("NLI-CT-SED, issue 25 (CPU)", "nli-ct-sed-learner-1", True)]
    kept = common.KeptRuns(tmp_path)
    lines = render_sed.layers(kept, tags)
    assert "| NLI-CT-SED-Flow (before issue 25) | 56.80 | 75.00 | 75.00 |" in lines
    assert "| NLI-CT-SED-Flow, issue 25 (CPU) | 77.40 | 75.00 | 75.00 |" in lines
    assert not any("earlier training" in line for line in lines)
    # Without the no-noise probes there is no collapse table, and the probes are listed as not measured.
    assert not any("| collapses |" in line for line in lines)
    assert "sed-layers-noise0-nli-ct-sed-learner-1" in kept.missing
    write(tmp_path, "sed-layers-noise0-nli-ct-sed-learner-1", seeded_layers({0: 77.2, 1: 78.0}))
    lines = render_sed.layers(common.KeptRuns(tmp_path), tags)
    assert "| NLI-CT-SED-Flow before issue 25 | before the fix | not recorded | 79.00 | 0 | 56.80 | yes |" in lines
    assert "| the paper's learner | no noise | 3 | 79.00 | 0 | 77.20 | no |" in lines
    assert "| the paper's learner | no noise | 3 | 79.00 | 1 | 78.00 | no |" in lines
    assert "| the paper's learner (the table's row) | with the fix | 3 | 79.00 | 0 | 77.40 | no |" in lines
    # The learner started from the NLI model collapses without the noise and not with it.
    write(tmp_path, "sed-layers-noise0-learner-from-nli", seeded_layers({0: 58.0}))
    write(tmp_path, "sed-layers-noise1e-2-learner-from-nli", seeded_layers({0: 76.5}))
    lines = render_sed.layers(common.KeptRuns(tmp_path), tags)
    assert "| the learner started from the NLI model | no noise | 3 | 79.00 | 0 | 58.00 | yes |" in lines
    assert "| the learner started from the NLI model | with the fix | 3 | 79.00 | 0 | 76.50 | no |" in lines


def test_sed_flow_groups_name_the_flow_after_the_method_and_mark_a_partial_group(tmp_path):
    render_sed = load("renderers/render_sed.py")
    common = pages
    flowed = lambda score: {"runs": {"model": sts_run(80.0), "model+flow(tasks:STS12,learning_rate=0.001)": sts_run(score)}}  # noqa: E731
    members, learners = ["sed/ct", "sed/ct-sed/member-2"], ["sed/ct-sed/learner-1"]
    write(tmp_path, "sed-flow/sed-ct", flowed(76.0))
    lines = render_sed.flow_groups(common.KeptRuns(tmp_path), "CT, issue 25 (CPU)", "sed/ct-sed", (members, learners))
    assert lines == ["| CT-Flow, issue 25 (CPU) | members (1 of 2 measured) | 76.00 | – | – | 1 |", "| | (7 tasks) | 76.00 | – | – | 1 |"]
    write(tmp_path, "sed-flow/sed-ct-sed-member-2", flowed(78.0))
    write(tmp_path, "sed-flow/sed-ct-sed-full-ensemble", flowed(79.0))
    write(tmp_path, "sed-flow/sed-ct-sed-learner-1", flowed(77.0))
    lines = render_sed.flow_groups(common.KeptRuns(tmp_path), "CT", "sed/ct-sed", (members, learners))
    assert "| CT-Flow | members | 78.00 | 77.00 | 1.41 | 2 |" in lines
    assert "| CT-Flow | full ensemble | 79.00 | – | – | 1 |" in lines
    assert "| CT-SED-Flow | learners (SED) | 77.00 | – | – | 1 |" in lines


def test_sed_flow_stages_refitted_after_the_fix_show_before_and_after(tmp_path):
    render_sed = load("renderers/render_sed.py")
    common = pages
    flow_stage = {"postprocess": "flow", "fit_on": "tasks:STS12"}
    write(tmp_path, "sed/ct-flow-before-25", {"runs": {"model": sts_run(70.0)}, "meta": {"stage": dict(flow_stage)}})
    write(tmp_path, "sed/ct-flow", {"runs": {"model": sts_run(75.0)}, "meta": {"stage": flow_stage | {"fit": {"steps": 9, "null_directions": 3}}}})
    write(tmp_path, "sed/nli-flow-before-25", {"runs": {"model": sts_run(71.0)}, "meta": {"stage": dict(flow_stage)}})
    lines = render_sed.flow_fix_table(common.KeptRuns(tmp_path), ["sed/ct-flow", "sed/nli-flow", "sed/flow"])
    assert "| sed/ct-flow | 3 | 70.00 | 75.00 | – |" in lines
    assert "| sed/nli-flow | – | 71.00 | not fitted again yet | – |" in lines
    assert not any(line.startswith("| sed/flow ") for line in lines)  # no earlier fit kept: not a row
    # A fit that lacked no direction: the fix does not act, and the move is set against the same flow fitted again.
    learner = "benchmarks/runs/sed/ct-sed/learner-1/model"
    write(tmp_path, "sed/ct-sed-flow-before-25", {"runs": {"model": sts_run(76.0)}, "meta": {"stage": dict(flow_stage)}})
    full_rank = flow_stage | {"input_model": learner, "fit": {"steps": 9}}
    write(tmp_path, "sed/ct-sed-flow", {"runs": {"model": sts_run(75.75)}, "meta": {"stage": full_rank}})
    assert "| sed/ct-sed-flow | 0 | 76.00 | 75.75 | – |" in render_sed.flow_fix_table(common.KeptRuns(tmp_path), ["sed/ct-sed-flow"])
    write(tmp_path, "sed-flow/sed-ct-sed-learner-1", {"runs": {"model": sts_run(78.0), "model+flow(tasks:STS12)": sts_run(75.5)}})
    lines = render_sed.flow_fix_table(common.KeptRuns(tmp_path), ["sed/ct-sed-flow"])
    assert "| sed/ct-sed-flow | 0 | 76.00 | 75.75 | 75.50 (sed-flow/sed-ct-sed-learner-1) |" in lines
    assert render_sed.flow_fix_table(common.KeptRuns(tmp_path), ["sed/flow"]) == []
    # A Flow stage without a fit summary predates the fix; its row says so unless its label already does.
    kept = common.KeptRuns(tmp_path)
    assert render_sed.fitted_before_fix("NLI-Flow", kept.get("sed/nli-flow-before-25")) == " (fitted before issue 25's fix)"
    assert render_sed.fitted_before_fix("NLI-Flow, before issue 25's fix", kept.get("sed/nli-flow-before-25")) == ""
    assert render_sed.fitted_before_fix("CT-Flow", kept.get("sed/ct-flow")) == ""


def test_sed_retrained_stage_is_shown_with_where_its_losses_part_from_the_kept_run(tmp_path):
    render_sed = load("renderers/render_sed.py")
    common = pages

    def losses(rel: str, values: list[float]) -> None:
        lines = [json.dumps({"step": 10 * (i + 1), "loss": v}) for i, v in enumerate(values)] + [json.dumps({"step": 30, "eval_x": 1.0})]
        (tmp_path / rel / "metrics.jsonl").write_text("\n".join(lines) + "\n")

    for rel, score, date in (("sed/nli-before-25", 72.0, "2026-11-22T17:16:29+00:00"), ("sed/nli", 73.5, "2026-11-25T14:30:00+00:00")):
        write(tmp_path, rel, {"runs": {"model": sts_run(score)}})
        result = json.loads((tmp_path / rel / "results.json").read_text())
        result["meta"]["date"] = date
        (tmp_path / rel / "results.json").write_text(json.dumps(result))
    losses("sed/nli-before-25", [1.10, 1.09, 1.08])
    losses("sed/nli", [1.10, 1.05, 1.08])
    write(tmp_path, "sed/nli-ct", {"runs": {"model": sts_run(76.0)}})  # not trained again: no earlier run beside it
    kept = common.KeptRuns(tmp_path)
    lines = render_sed.retrained_table(kept, [("NLI", "sed/nli"), ("NLI-CT", "sed/nli-ct")])
    assert "| NLI | 2026-11-22 | 72.00 | 2026-11-25 | 73.50 | 20 |" in lines
    assert not any(line.startswith("| NLI-CT ") for line in lines)
    losses("sed/nli", [1.10, 1.09, 1.08])
    assert render_sed.first_divergence(kept, "sed/nli-before-25", "sed/nli") is None
    assert "| NLI | 2026-11-22 | 72.00 | 2026-11-25 | 73.50 | none |" in render_sed.retrained_table(kept, [("NLI", "sed/nli")])
    assert render_sed.retrained_table(kept, [("NLI-CT", "sed/nli-ct")]) == []


def test_sed_sts_flow_table_counts_the_tasks_the_flow_lowers(tmp_path):
    render_sed = load("renderers/render_sed.py")
    assert render_sed.sts_flow_table(None, None) == []
    lowered = sts_run(79.0)
    lowered["tasks"]["STS-B"]["all"]["spearman"] = 81.0  # above the model's 80: the one task the flow does not lower
    lowered["summary"]["avg_all_spearman"] = 79.5  # the page reads the summary's average, not the tasks'
    flowed = {"runs": {"model": sts_run(80.0), "model+flow(tasks:STS12)": lowered | {"fit": {"null_directions": 3}}}}
    lines = render_sed.sts_flow_table(flowed, {"runs": {"model": sts_run(80.0), "model+flow(tasks:STS12)": sts_run(70.0)}})
    assert "| without the flow | 80.00 | 80.00 | – | – |" in lines
    assert "| with the flow | 79.50 | 81.00 | 6 of 7 | 3 |" in lines
    assert "| with the flow, before issue 25's fix | 70.00 | 70.00 | 7 of 7 | – |" in lines


def test_cf_noise_scale_table_reads_each_runs_flows_and_fit_losses(tmp_path):
    render_cf = load("renderers/render_cf.py")
    common = pages

    def flowed(scores: list[float], loss: float) -> dict:
        runs = {"mean": sts_run(79.0)}
        for seed, score in enumerate(scores, 1):
            run = sts_run(score)
            for task in run["tasks"].values():
                task["fit"] = {"loss_last": loss}
            runs[f"mean+flow(per-task,seed={seed})"] = run
        return {"runs": runs}

    write(tmp_path, "cf-flow-target", flowed([76.0, 76.5], -50.0))
    assert render_cf.noise_scale(common.KeptRuns(tmp_path)) == []  # one scale alone is no comparison
    write(tmp_path, "cf-flow-target-noise0", flowed([77.0, 78.0], 300.0))
    lines = render_cf.noise_scale(common.KeptRuns(tmp_path))
    assert "| 0 (the fit before the fix) | 77.00, 78.00 | 77.50 ± 0.71 | 300.0 |" in lines
    assert "| 1e-2 (the default) | 76.00, 76.50 | 76.25 ± 0.35 | -50.0 |" in lines


def test_sed_senteval_row_of_a_flow_stage_is_marked_when_its_fit_predates_the_fix(tmp_path):
    render_sed = load("renderers/render_sed.py")
    common = pages
    tasks = {t: {"acc": 80.0} for t in render_sed.SENTEVAL} | {t: {"pearson": 70.0} for t in ("SICK-R-reg", "STS-B-reg")}
    flow_stage = {"postprocess": "flow", "fit_on": "tasks:STS12"}
    for tag in ("ct-sed-flow", "nli-ct-flow"):
        write(tmp_path, f"sed-senteval-{tag}", {"runs": {"model": {"tasks": tasks}}})
    write(tmp_path, "sed/ct-sed-flow", {"runs": {"model": sts_run(70.0)}, "meta": {"stage": dict(flow_stage)}})
    write(tmp_path, "sed/nli-ct-flow", {"runs": {"model": sts_run(70.0)}, "meta": {"stage": flow_stage | {"fit": {"null_directions": 3}}}})
    lines = render_sed.senteval(common.KeptRuns(tmp_path), [("CT-SED-Flow", "ct-sed-flow"), ("NLI-CT-Flow", "nli-ct-flow")])
    assert any(line.startswith("| CT-SED-Flow (fitted before issue 25's fix) | 80.00") for line in lines)
    assert any(line.startswith("| NLI-CT-Flow | 80.00") for line in lines)


def test_cf_multitask_cost_reads_each_runs_training_time_per_step(tmp_path):
    render_cf = load("renderers/render_cf.py")
    common = pages
    assert render_cf.multitask_cost(common.KeptRuns(tmp_path)) == ""  # no run: nothing claimed
    for name, seconds in (("cf-multitask-untuned", 1500.0), ("cf-multitask-cf-mirror", 1800.0)):
        write(tmp_path, name, {"runs": {}, "meta": {"training_seconds": seconds, "training_device": "cpu", "recipe": {"training": {"max_steps": 100}}}})
    write(tmp_path, "cf-multitask-cf-flow", {"runs": {}, "meta": {}})  # kept before training time was recorded: left out
    text = render_cf.multitask_cost(common.KeptRuns(tmp_path))
    assert "Training took 15.0-18.0 s a step here (2 runs, CPU, dev evaluations included)" in text
    assert "5000 steps would take about 21-25 h per encoder" in text


def test_the_shuffled_null_permutes_only_the_selection_labels_of_adapts_own_split():
    """benchmarks/runners/adapt_shuffled_null.py: the selection part (split_dev with the run's seed, as `--seed` makes
    adapt use) gets its own labels in another order; the confirmation part keeps its labels; --all-shuffled permutes all."""
    import numpy as np

    from sentune.adaptation.decide import split_dev
    from sentune.data.readers import Pair, Source

    load("runners/adapt_calibration.py")  # what the script imports from its own folder (a script run adds that folder)
    null = load("runners/adapt_shuffled_null.py")
    rng = np.random.default_rng(0)
    gold = np.round(rng.uniform(0, 5, 120), 1)
    pairs = [Pair(f"a{i}", f"b{i}", float(g), Source("dev.tsv", i + 1)) for i, g in enumerate(gold)]
    for seed in (1, 2):
        rows = null.shuffled_dev(pairs, seed, everything=False)
        split = split_dev(gold, seed=seed)
        labels = np.array([r[2] for r in rows])
        assert [r[:2] for r in rows] == [(p.a, p.b) for p in pairs]
        assert np.array_equal(labels[split.confirm], gold[split.confirm])
        assert sorted(labels[split.select]) == sorted(gold[split.select]) and not np.array_equal(labels[split.select], gold[split.select])
        everything = np.array([r[2] for r in null.shuffled_dev(pairs, seed, everything=True)])
        assert sorted(everything) == sorted(gold) and not np.array_equal(everything[split.confirm], gold[split.confirm])


def test_the_design_study_splits_a_setting_into_chunks_whose_picks_do_not_depend_on_their_order():
    """benchmarks/runners/adapt_designs.py: a setting's simulated users come in chunks, each from its own seeded
    generator; merged in any order they give one record a setting with every user's pick, the same each time."""
    load("runners/adapt_calibration.py")
    designs = load("runners/adapt_designs.py")
    designs.CHUNK = 3
    chunks = [("spearman", 100, [1.0] * 5, 7, 1, None, c) for c in range(3)]  # 3 + 3 + 1 users
    done = [designs.run_chunk(c) for c in chunks]
    assert [len(d["picks"]["half"]) for d in done] == [3, 3, 1]
    forward, backward = designs.merged(done), designs.merged(done[::-1])
    assert len(forward) == 1 and all(len(forward[0]["picks"][d]) == 7 for d in designs.DESIGNS)
    assert sorted(forward[0]["picks"]["max-T"]) == sorted(backward[0]["picks"]["max-T"])
    assert designs.run_chunk(chunks[1])["picks"] == done[1]["picks"]  # seeded: the same users again
    assert all(p in range(-1, 5) for d in designs.DESIGNS for p in forward[0]["picks"][d])


def test_second_model_page_sets_the_pipeline_beside_sentence_transformers_and_lists_what_is_missing(tmp_path):
    render = load("renderers/render_second_model.py")
    common = pages
    kept = common.KeptRuns(tmp_path)
    lines = render.sections(kept, tmp_path / "page.md")
    assert lines.count("Not measured yet.") == 3  # poolings, the pipeline, adapt
    assert {"second-model-sts", "second-model-speed", "second-model-train", "second-model-search"} <= set(kept.missing)
    write(tmp_path, "second-model-sts", {"runs": {"model": sts_run(80.0), "cls": sts_run(60.0)}})
    naive = {t: 80.0 for t in STS7}
    engines = {"sentune PyTorch fp32": 80.004, "sentune ONNX fp32": 80.006, "sentune ONNX int8": 79.5}
    speed = {
        "scores": {"naive": naive, **{e: {t: v for t in STS7} for e, v in engines.items()}},
        "eval_seconds": {"naive": 100.0, **{e: 50.0 for e in engines}},
        "sentences_per_second": {"sentence-transformers": 40.0, **{e: 60.0 for e in engines}},
        "unique_sentences": 1000, "encoded_sentences": 500, "threads": 2, "repeats": 1,
    }  # fmt: skip
    write(tmp_path, "second-model-speed", speed)
    write(tmp_path, "second-model-onnx", {"runs": {"model": sts_run(79.9)}})
    (tmp_path / "second-model-train").mkdir()
    (tmp_path / "second-model-train" / "pytest.txt").write_text("....\n\n22 passed in 60.00s\n")
    lines = render.sections(common.KeptRuns(tmp_path), tmp_path / "page.md")
    assert "| model | " + " | ".join(["80.00"] * 7) + " | 80.00 |" in lines and "| cls | " + " | ".join(["60.00"] * 7) + " | 60.00 |" in lines
    assert "| published (MTEB) | 72.60 | 83.50 | 78.00 | 85.70 | 80.00 | – | – | – |" in lines
    assert "| STS12 | 80.0000 | 80.0040 (+0.0040) | 80.0060 (+0.0060) | 79.5000 (-0.5000) |" in lines
    assert any(line.endswith("sentune's PyTorch pipeline is within 0.01 of it on every task.") for line in lines)
    assert "| sentence-transformers encode | 40.0 | 1.00 | 100 |" in lines and "| sentune ONNX int8 | 60.0 | 1.50 | 50 |" in lines
    assert (
        "| `sentune export --quantize int8 --keep-fp32 ffn-output`, then `sentune eval --backend onnx` | 7-task average 79.90 (the untuned model: 80.00) |"
        in lines
    )
    assert "| every registered method, a few steps (`tests/test_registry.py -k second_model_dir`) | 22 passed in 60.00s |" in lines
    speed["scores"]["sentune PyTorch fp32"]["STS13"] = 80.02  # one task beyond the bound: said so
    write(tmp_path, "second-model-speed", speed)
    lines = render.sections(common.KeptRuns(tmp_path), tmp_path / "page.md")
    assert any(line.endswith("sentune's PyTorch pipeline is NOT within 0.01 of it on every task.") for line in lines)
    assert not any(line.startswith("Machine conditions") for line in lines)
    (tmp_path / "results" / "runs").mkdir(parents=True)  # the conditions file lies beside the page: the kept root's parent
    (tmp_path / "results" / render.CONDITIONS).write_text("eval alone; adapt beside whiten\n")
    lines = render.sections(common.KeptRuns(tmp_path / "results" / "runs"), tmp_path / "page.md")
    assert lines[:2] == ["Machine conditions (as recorded by the person who ran it): eval alone; adapt beside whiten", ""]


def test_second_model_transfer_table_sets_the_default_models_run_beside(tmp_path):
    render = load("renderers/render_second_model.py")
    assert render.transfer(pages.KeptRuns(tmp_path)) == []
    tasks = {"MR": {"acc": 80.0}, "MRPC": {"acc": 70.0, "f1": 75.0}}
    write(tmp_path, "second-model-transfer", {"runs": {"model": {"tasks": tasks}}})
    write(tmp_path, "baselines-transfer-fast", {"runs": {"model": {"tasks": {"MR": {"acc": 76.0}, "MRPC": {"acc": 72.0, "f1": 81.0}}}, "cls": {"tasks": {}}}})
    kept = pages.KeptRuns(tmp_path)
    table = "\n".join(render.transfer(kept))
    assert "| all-mpnet-base-v2 | 80.00 | 70.00 / 75.00 | 75.00 |" in table
    assert "| all-MiniLM-L6-v2 (benchmarks/results/baselines.md) | 76.00 | 72.00 / 81.00 | 74.00 |" in table
    assert set(kept.used) == {"second-model-transfer", "baselines-transfer-fast"}  # both commands listed on the page


def test_second_model_search_section_scores_each_ranking_on_both_query_sets_beside_the_small_models_adapt_run(tmp_path):
    """The search runs' table: the second model's rankings over the judged queries and the adapt example's test
    queries, the default model's adapt test scores in the second column only, and the dense run set beside the
    evaluation's nDCG@10 (said when they differ)."""
    render = load("renderers/render_second_model.py")
    root = tmp_path / "results" / "runs"
    root.mkdir(parents=True)
    assert render.search(pages.KeptRuns(root)) == []
    ranking = {"ndcg@10": 60.0, "ndcg@10_low": 50.0, "ndcg@10_high": 70.0, "mrr@10": 55.0, "recall@10": 70.0, "recall@100": 90.0, "map@100": 50.0}
    write(root, "second-model-retrieval", {"runs": {"model": {"tasks": {"scifact-train": ranking | {"n_queries": 9, "n_documents": 20}}}}})
    runs = {"dense": ranking | {"n_queries": 9}, "bm25": ranking | {"ndcg@10": 65.0, "recall@100": 80.0, "n_queries": 9}}
    example = {system: r | {"ndcg@10": r["ndcg@10"] - 1, "n_queries": 4} for system, r in runs.items()}
    write(root, "second-model-search", {"sets": {"scifact-train": runs, "scifact example test": example}})
    small = {
        name: {"test": {"score": score, "low": score - 5, "high": score + 5}, "chosen": name == "hybrid"}
        for name, score in (("unchanged", 55.0), ("bm25", 64.0), ("hybrid", 66.0))
    }
    (tmp_path / "results" / "adapt" / "scifact").mkdir(parents=True)
    (tmp_path / "results" / "adapt" / "scifact" / "results.json").write_text(json.dumps({"candidates": small}))
    lines = render.search(pages.KeptRuns(root))
    assert "| system | scifact-train: nDCG@10 [95 % CI] (9 queries) | scifact example test: nDCG@10 [95 % CI] (4 queries) | scifact-train: R@100 |" in lines
    assert "| all-mpnet-base-v2, `--system dense` | 60.00 [50.00, 70.00] | 59.00 [50.00, 70.00] | 90.00 |" in lines
    assert "| all-mpnet-base-v2, `--system bm25` | 65.00 [50.00, 70.00] | 64.00 [50.00, 70.00] | 80.00 |" in lines
    assert "| all-MiniLM-L6-v2, `sentune adapt --example scifact`: BM25 | – | 64.00 [59.00, 69.00] | – |" in lines
    assert (
        "| all-MiniLM-L6-v2, `sentune adapt --example scifact`: hybrid (BM25 + the model, weight chosen by adapt) (chosen) | – | 66.00 [61.00, 71.00] | – |"
        in lines
    )
    assert "`sentune eval --tasks retrieval` scored scifact-train at nDCG@10 60.00; the dense run file 60.00 (equal to two decimals)." in lines
    runs["dense"]["ndcg@10"] = 60.5  # a run file that ranks otherwise than the evaluation: said so
    write(root, "second-model-search", {"sets": {"scifact-train": runs, "scifact example test": example}})
    lines = render.search(pages.KeptRuns(root))
    assert "`sentune eval --tasks retrieval` scored scifact-train at nDCG@10 60.00; the dense run file 60.50 (NOT equal to two decimals)." in lines


def test_a_trec_run_is_scored_by_its_rank_column_and_a_judged_query_it_does_not_rank_scores_zero(tmp_path, capsys):
    """benchmarks/runners/score_trec_run.py against the formulas by hand: q1's one relevant document at rank 2
    (nDCG@10 1/log2(3), MRR 1/2), q2 judged and not ranked (0), q3 without a relevant document not counted."""
    score = load("runners/score_trec_run.py")
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"text {i}"}) + "\n" for i in range(1, 5)))
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(1, 4)))
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td1\t2\nq2\td3\t1\nq3\td4\t0\n")
    (tmp_path / "dense.tsv").write_text("q1 Q0 d2 2 0.5 x\nq1 Q0 d1 1 0.9 x\nq3 Q0 d4 1 0.7 x\n")  # out of rank order on purpose
    files = ["--corpus", str(tmp_path / "corpus.jsonl"), "--queries", str(tmp_path / "queries.jsonl"), "--qrels", str(tmp_path / "qrels.tsv")]
    score.main([*files, "--out", str(tmp_path / "out"), str(tmp_path / "dense.tsv")])
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    dense = result["sets"]["qrels"]["dense"]
    assert dense["n_queries"] == 2 and dense["n_ranked"] == 1
    assert dense["ndcg@10"] == pytest.approx(100 * (1 / np.log2(3)) / 2) and dense["mrr@10"] == pytest.approx(25.0)
    assert dense["recall@100"] == pytest.approx(50.0) and result["meta"]["command"].startswith("python benchmarks/runners/score_trec_run.py")
    (tmp_path / "bad.tsv").write_text("q1 Q0 d2 1 0.5 x\nq1 d1 2 0.4\n")
    with pytest.raises(SystemExit) as stop:
        score.main([*files, "--out", str(tmp_path / "bad-out"), str(tmp_path / "bad.tsv")])
    assert stop.value.code == 2 and f"{tmp_path / 'bad.tsv'}:2: not a TREC run line" in capsys.readouterr().err
    assert not (tmp_path / "bad-out").exists()


def test_trec_runs_are_scored_again_over_the_adapt_examples_test_queries(tmp_path):
    """--example scifact: the same runs over the test queries `sentune adapt --example scifact` scores (a subset of the
    queries searched), each query's nDCG@10 as the formula gives it by hand."""
    from test_retrieval import _toy_data_dir

    from sentune.adaptation.examples import write_example
    from sentune.data.beir import read_beir_folder

    score = load("runners/score_trec_run.py")
    data = _toy_data_dir(tmp_path)  # 25 claims, claim i's relevant abstract 1000 + 3i
    folder = data / "retrieval" / "scifact"
    # even claims rank their abstract first, odd ones second, behind abstract 1001 (relevant to no claim)
    lines = [f"{i} Q0 {1000 + 3 * i} 1 2.0 x" if i % 2 == 0 else f"{i} Q0 1001 1 2.0 x\n{i} Q0 {1000 + 3 * i} 2 1.0 x" for i in range(25)]
    (tmp_path / "dense.tsv").write_text("\n".join(lines) + "\n")
    files = ["--corpus", str(folder / "corpus.jsonl"), "--queries", str(folder / "queries.jsonl"), "--qrels", str(folder / "qrels" / "train.tsv")]
    score.main([*files, "--name", "scifact-train", "--example", "scifact", "--data", str(data), "--out", str(tmp_path / "out"), str(tmp_path / "dense.tsv")])
    sets = json.loads((tmp_path / "out" / "results.json").read_text())["sets"]
    test_ids = [q.id for q in read_beir_folder(write_example("scifact", data, tmp_path / "example").test, "test").queries]
    by_hand = {i: 1.0 if i % 2 == 0 else 1 / np.log2(3) for i in range(25)}
    assert list(sets) == ["scifact-train", "scifact example test"] and sets["scifact example test"]["dense"]["n_queries"] == len(test_ids) == 13
    assert sets["scifact-train"]["dense"]["ndcg@10"] == pytest.approx(100 * np.mean(list(by_hand.values())))
    assert sets["scifact example test"]["dense"]["ndcg@10"] == pytest.approx(100 * np.mean([by_hand[int(q)] for q in test_ids]))


def test_machine_conditions_quote_the_file_whole_or_give_nothing(tmp_path):
    path = tmp_path / "conditions.md"
    assert pages.machine_conditions(path) == []
    path.write_text("  ran beside a test run\n\n")
    assert pages.machine_conditions(path) == ["Machine conditions (as recorded by the person who ran it): ran beside a test run"]


def test_retrieval_summary_row_sets_the_supervised_candidates_and_the_label_free_run_beside_the_choice():
    load("renderers/render_adapt.py")  # what the script imports from its own folder (a script run adds that folder)
    render = load("renderers/render_retrieval.py")

    def candidate(kind: str, test: float, dev: float | None = None, seconds: float = 60.0) -> dict:
        row = {"kind": kind, "seconds": seconds, "test": {"score": test}}
        return row | ({"dev_score": dev} if dev is not None else {})

    results = {
        "choice": {"name": "unchanged"},
        "candidates": {
            "unchanged": candidate("unchanged", 65.0, 63.0),
            "bm25": candidate("baseline", 69.0, seconds=600.0),
            "supervised": candidate("supervised", 68.5, 66.25, seconds=120.0),
            "supervised-stacked": candidate("supervised", 67.0, 65.5, seconds=180.0),
        },
    }
    earlier = {"choice": {"name": "hybrid"}, "candidates": {"hybrid": candidate("hybrid", 71.97, seconds=300.0)}}
    row = render.summary_row("scifact", results, earlier)
    assert row[11] == "from unchanged: 66.25 / 68.50; stacked: 65.50 / 67.00"
    assert row[13] == "6"  # 60 + 120 + 180 s: the BM25 baseline's minutes left out
    assert row[14:] == ["`hybrid` 71.97", "5"]
    assert render.summary_row("scifact", results)[14:] == ["—", "—"]


def test_the_query_side_section_sets_each_side_beside_the_other_with_minutes_and_the_differences():
    load("renderers/render_adapt.py")
    render = load("renderers/render_retrieval.py")

    def difference(candidate: float, baseline: float) -> dict:
        return {
            "vs_unchanged": {
                "candidate": candidate,
                "baseline": baseline,
                "difference_low": candidate - baseline - 1.0,
                "difference_high": candidate - baseline + 1.0,
            }
        }

    def row(seconds: float, select: float, confirm: float, test: float) -> dict:
        return {
            "kind": "k",
            "seconds": seconds,
            "select": {"score": select},
            "confirm": difference(confirm, 70.0),
            "test": {"score": test} | difference(test, 65.0),
        }

    meta = {"command": "sentune adapt --example scifact --time 90m", "date": "2026-12-04"}
    results = {
        "choice": {"name": "hybrid-query-side"},
        "meta": meta,
        "candidates": {"query-side": row(120.0, 70.5, 72.0, 66.0), "supervised": row(3000.0, 71.0, 73.0, 67.5)},
    }
    lines = render.query_side_section({"scifact": results, "quora": {"candidates": {"query-side": row(60.0, 1, 1, 1)}}})
    rows = [line for line in lines if line.startswith("| scifact")]
    assert rows == [
        "| scifact | `query-side` | the query encoder only, against the index's document vectors | 2.0 | 70.50 | +2.00 [+1.00, +3.00] | 66.00 | +1.00 [+0.00, +2.00] |",
        "| scifact | `supervised` | both sides (the documents encoded again for every fold and the refit) | 50.0 | 71.00 | +3.00 [+2.00, +4.00] | 67.50 | +2.50 [+1.50, +3.50] |",
    ]
    assert not any(line.startswith("| quora") for line in lines)  # no supervised: not compared
    assert "scifact: `sentune adapt --example scifact --time 90m`, 2026-12-04; chose `hybrid-query-side`." in lines
    assert lines[-4].startswith("| domain |") and lines[-1] == rows[-1]  # each domain its own table, under its command
    assert "Not yet measured" in render.query_side_section({})[-1]


def test_the_retrieval_native_section_lists_what_each_candidate_trained_on_and_cost(tmp_path, monkeypatch):
    load("renderers/render_adapt.py")
    render = load("renderers/render_retrieval.py")
    monkeypatch.setattr(render, "RETRIEVAL_NATIVE_KEPT", tmp_path)
    assert render.retrieval_native_section(["scifact"]) == []  # no kept run: no section
    training = {"recipe": {"training": {"max_steps": 40, "batch_size": 32, "max_seq_length": 128}}, "pseudo_queries": 1280, "pseudo_query_documents": 1280}
    candidates = {
        "unchanged": {"kind": "unchanged", "seconds": 1.0},
        "ict": {"kind": "retrieval-native", "seconds": 600.0, "training_seconds": 240.0, **training},
        "hybrid-distill": {
            "kind": "retrieval-native",
            "seconds": 720.0,
            "training_seconds": 300.0,
            "teacher": "convex, α = 0.35 on the dense scores",
            **training,
        },
        "crop": {"kind": "retrieval-native", "seconds": 0.0, "skipped": "no document gives a crop pseudo-query"},
    }
    later = {"teacher": "convex, α = 0.5 on the dense scores", "teacher_scale": 0.44, "teacher_positive": "passage", "reads_tokens": 256}
    candidates["hybrid-distill-later"] = {**candidates["hybrid-distill"], **later}  # a later record: scaled, taught on the passage
    (tmp_path / "scifact").mkdir()
    (tmp_path / "scifact" / "results.json").write_text(json.dumps({"candidates": candidates}))
    monkeypatch.setattr(render, "domain_section", lambda name, results, images: [f"(the {name} table from {images})"])  # tested with the domains above
    lines = render.retrieval_native_section(["scifact", "quora"])
    rows = [line for line in lines if line.startswith("| scifact")]
    assert rows == [
        "| scifact | `ict` | 1,280 (1,280) | 40 × 32 | 128 | 4.0 | 10.0 | — |",
        "| scifact | `hybrid-distill` | 1,280 (1,280) | 40 × 32 | 128 | 5.0 | 12.0 | convex, α = 0.35 on the dense scores; taught on the whole document |",
        "| scifact | `hybrid-distill-later` | 1,280 (1,280) | 40 × 32 | 256 | 5.0 | 12.0 | convex, α = 0.5 on the dense scores; margins × 0.440 (teacher_scale); taught on the passage |",
    ]
    assert lines[-1] == "(the scifact: retrieval-native candidates table from retrieval-native/scifact)"


def test_the_gpu_scale_section_lists_the_records_a_stopped_run_wrote(tmp_path, monkeypatch):
    load("renderers/render_adapt.py")
    render = load("renderers/render_retrieval.py")
    monkeypatch.setattr(render, "RETRIEVAL_NATIVE_KEPT", tmp_path)
    assert render.gpu_scale_section() == []  # no kept run: no section
    folder = tmp_path / "gpu" / "scifact-1000-steps"
    (folder / "candidates").mkdir(parents=True)
    (folder / "machine.txt").write_text("abc1234\nNVIDIA H200, 143771 MiB\n16\n")
    # readings with a model on the GPU (over 1000 MiB) count: (30 + 10) / 2
    (folder / "gpu_usage.csv").write_text("t, 0 MiB, 0 %\nt, 3919 MiB, 30 %\nt, 5265 MiB, 10 %\nt, 4 MiB, 90 %\n")
    training = {"recipe": {"training": {"max_steps": 1000, "batch_size": 32}}, "pseudo_queries": 32000, "pseudo_query_documents": 5182}
    records = {
        "unchanged": {"kind": "unchanged", "dev_score": 63.0},
        "ict": {"kind": "retrieval-native", "seconds": 180.0, "training_seconds": 150.0, "dev_score": 55.5, **training},
    }
    for name, record in records.items():
        (folder / "candidates" / f"{name}.json").write_text(json.dumps(record))
    lines = render.gpu_scale_section()
    assert "busy 20 % of the time on average (2 readings)" in lines[3]
    assert lines[3].startswith("NVIDIA H200, 143771 MiB;")
    assert lines[-2:] == ["| `unchanged` | — | — | — | — | 63.00 | — |", "| `ict` | 32,000 (5,182) | 1000 × 32 | 2.5 | 3.0 | 55.50 | -7.50 |"]


def test_the_real_null_section_of_the_calibration_page_is_rewritten_from_the_kept_runs_only(tmp_path):
    """adapt_shuffled_null.py fills the calibration page's last section from its kept runs without the simulation:
    added after the page's text the first time, replaced in place after, every other line untouched."""
    calibration = load("runners/adapt_calibration.py")
    page, kept = tmp_path / "adapt_calibration.md", tmp_path / "results.json"
    page.write_text("# Calibration\n\n## No candidate is better\n\n| a | b |\n\nlast line of the simulation's text\n")
    facts = {"meta": {"date": "2026-11-26T17:00:00+00:00", "command": "python null.py --runs 3"}, "runs": 3, "dev_pairs": 100, "example": "sick"}
    kept.write_text(json.dumps(facts | {"shipped": calibration.rate(1, 3)}))
    calibration.put_real_null(page, kept)
    first = page.read_text().splitlines()
    assert first[:7] == ["# Calibration", "", "## No candidate is better", "", "| a | b |", "", "last line of the simulation's text"]
    assert first[7:9] == ["", calibration.REAL_NULL_HEADING]
    assert "**Shipped: 33.3 % [6.1, 79.2] (1/3)** (95 % Wilson interval). Every run's choice and reason:" in first
    assert "python null.py --runs 3" in first and "Measured 2026-11-26 (the adapt code of commit not recorded) by:" in first
    facts["meta"]["code"] = "c520092"
    kept.write_text(json.dumps(facts | {"runs": 73, "shipped": calibration.rate(0, 73)}))
    calibration.put_real_null(page, kept)
    second = page.read_text().splitlines()
    assert second[:9] == first[:9] and second.count(calibration.REAL_NULL_HEADING) == 1
    assert "**Shipped: 0.0 % [0.0, 5.0] (0/73)** (95 % Wilson interval). Every run's choice and reason:" in second
    assert not any("33.3 %" in line for line in second) and "Measured 2026-11-26 (the adapt code of commit c520092) by:" in second
    assert calibration.real_null_section(tmp_path / "none.json")[2].startswith("Not measured yet")


def test_the_shuffled_null_page_comes_from_the_kept_facts_alone():
    """adapt_shuffled_null.py --render-only writes the page from its kept JSON: the rate with its interval, every run."""
    calibration = load("runners/adapt_calibration.py")
    null = load("runners/adapt_shuffled_null.py")
    found = [{"run": r, "chosen": "unchanged" if r != 2 else "supervised", "reason": f"reason {r}", "seconds": 60.0 * r} for r in (1, 2, 3, 4)]
    facts = {"meta": {"command": "python null.py --runs 4", "date": "2026-11-26T18:00:00+00:00", "code": "c520092"}, "example": "sick", "model": "default"}
    facts |= {"dev_pairs": 100, "all_shuffled": False, "runs": 4, "minutes": 5.2, "found": found, "shipped": calibration.rate(1, 4)}
    lines = null.page(facts).splitlines()
    assert lines[2] == "Measured 2026-11-26 (10 min of candidate time over the 4 runs, each one torch thread; runs are read back when run again) by:"
    assert "python null.py --runs 4" in lines
    assert "Example sick, model default, 100 dev pairs a run, the adapt code of commit c520092; the runs are described in" in lines
    assert "**Shipped: 25.0 % [4.6, 69.9] (1/4)** (95 % Wilson interval; a calibrated rule: ≤ 5 %)." in lines
    assert [line for line in lines if line.startswith("| 2 ")] == ["| 2 | supervised | 2.0 | reason 2 |"]
    assert sum(line.startswith("| ") and line[2].isdigit() for line in lines) == 4
    # kept where the calibration page's section reads them; --all-shuffled apart
    assert null.kept_path(False) == calibration.REAL_NULL and calibration.REAL_NULL.parent.name == "adapt-shuffled-null"
    assert null.kept_path(True).parent.name == "adapt-shuffled-null-all" and null.kept_path(True).name == "results.json"


def test_the_shuffled_null_records_the_commit_of_the_sentune_it_imported(tmp_path, monkeypatch):
    """The runs may import another checkout's sentune (PYTHONPATH): the page names that checkout's commit, marked when
    its files differ from it, and nothing outside a git checkout."""
    import subprocess

    import sentune

    null = load("runners/adapt_shuffled_null.py")
    package = tmp_path / "checkout" / "sentune"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(sentune, "__file__", str(package / "__init__.py"))
    assert null.code_commit() is None
    git = ["git", "-C", str(package.parent), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert null.code_commit() == head
    (package / "__init__.py").write_text("x = 1\n")
    assert null.code_commit() == head + "+changes"


def test_the_shuffled_null_with_a_train_set_keeps_only_the_labels_of_adapts_evidence_confirmation_pairs():
    """adapt_shuffled_null.py --train-pairs: a seeded sample of train pairs, its labels permuted among themselves but on
    the pairs adapt's evidence sample (sentune.adaptation.evidence.sample_evidence with the run's seed) puts in its
    confirmation part, which adapt draws again, the same, from the shuffled file."""
    import numpy as np

    from sentune.adaptation.evidence import sample_evidence
    from sentune.data.readers import Pair, Source

    load("runners/adapt_calibration.py")
    null = load("runners/adapt_shuffled_null.py")
    rng = np.random.default_rng(1)
    pairs = [Pair(f"a{i}", f"b{i}", float(g), Source("train.tsv", i + 1)) for i, g in enumerate(np.round(rng.uniform(1, 5, 300), 1))]
    rows = null.shuffled_train(pairs, 120, seed=3)
    chosen = {(r[0], r[1]) for r in rows}
    assert len(rows) == 120 and chosen <= {(p.a, p.b) for p in pairs}
    original = np.array([next(p.score for p in pairs if (p.a, p.b) == r[:2]) for r in rows])
    labels = np.array([r[2] for r in rows])
    indices, split = sample_evidence(labels, seed=3)
    confirm = indices[split.confirm]
    rest = np.setdiff1d(np.arange(120), confirm)
    assert len(confirm) == 30 and np.array_equal(labels[confirm], original[confirm])
    assert sorted(labels[rest]) == sorted(original[rest]) and not np.array_equal(labels[rest], original[rest])


def test_the_train_section_of_the_calibration_page_goes_before_the_real_null_and_is_replaced_in_place(tmp_path):
    calibration = load("runners/adapt_calibration.py")
    page = tmp_path / "adapt_calibration.md"
    page.write_text(f"# Calibration\n\nsimulation\n\n{calibration.REAL_NULL_HEADING}\n\nnull text\n")
    calibration.put_train_section(page, [calibration.TRAIN_HEADING, "", "first", ""])
    lines = page.read_text().splitlines()
    assert lines == ["# Calibration", "", "simulation", "", calibration.TRAIN_HEADING, "", "first", "", calibration.REAL_NULL_HEADING, "", "null text"]
    calibration.put_train_section(page, [calibration.TRAIN_HEADING, "", "second", ""])
    again = page.read_text().splitlines()
    assert again == [line if line != "first" else "second" for line in lines]


def test_the_calibration_rule_with_a_train_set_never_judges_the_supervised_candidate_on_its_training_pairs():
    """adapt_calibration.py's users with a train set: candidate 0 plays the supervised one, its refit trained on the
    evidence selection part and cross-fitted there. Its refit made perfect there and the unchanged model's twin
    everywhere else, it would lead on the selection pairs if the refit judged it; its fold models judge, so no candidate
    is ahead and none is tested."""
    import numpy as np

    from sentune.adaptation.decide import split_dev
    from sentune.adaptation.evidence import EVIDENCE_SEED_OFFSET

    calibration = load("runners/adapt_calibration.py")
    n, m, seed = 100, 400, 7
    gold, unchanged, _ = calibration.simulate(np.random.default_rng(4), n + m, [1.0], "spearman")
    checkpoints = np.broadcast_to(unchanged, (3, calibration.CHECKPOINTS, n + m)).copy()
    trained = n + split_dev(gold[n:], seed=seed + EVIDENCE_SEED_OFFSET).select
    perfect = np.sort(unchanged[trained])[np.argsort(np.argsort(gold[trained], kind="stable"))]  # the gold's order, the model's values
    # the refit (checkpoint 0: all are the unchanged model's twin on the dev pairs, so the first is chosen) trained on
    # them; its fold models (another checkpoint) did not, and they are what judges it there
    checkpoints[0, 0, trained] = perfect
    # (changed with issue 80's rule: train_decision gives the decision, train_rule only the index shipped)
    found = calibration.train_decision(gold, unchanged, checkpoints, "spearman", seed, n, True)
    assert found.name == "unchanged" and not found.safety and calibration.train_rule(gold, unchanged, checkpoints, "spearman", seed, n, True) == -1
    read = checkpoints.copy()
    read[0, 1, trained] = perfect  # fold models that had read the pairs they score would lead: the rule reads them
    assert calibration.train_decision(gold, unchanged, read, "spearman", seed, n, True).best == "0"
    leaky = checkpoints.copy()
    leaky[1] = leaky[0]  # the same predictions from a label-free candidate are judged there: it leads and is tested
    found = calibration.train_decision(gold, unchanged, leaky, "spearman", seed, n, True)
    # its confirmation pairs show the unchanged model's twin: not shipped
    assert found.best == "1" and list(found.safety) == ["1"] and not found.safety["1"].safe and found.name == "unchanged"
    assert calibration.train_rule(gold, unchanged, leaky, "spearman", seed, n, True) == -1


def test_the_train_rows_before_and_after_count_the_confirmation_pairs_and_their_power():
    """Before: the dev confirmation half alone; after: with the train pairs that joined it, and the gain confirmed 80 % of
    the time read from the calibration's table at twice the confirmation pairs (the table counts all dev pairs)."""
    render = load("renderers/render_adapt.py")
    from sentune.adaptation.decide import detectable_gain

    def run(chosen: str, test: float, train: dict | None) -> dict:
        meta = {"dev": {"confirm_pairs": 250}, "test": {"metric": "spearman"}} | ({"train_evidence": train} if train is not None else {})
        vs = {"candidate": test, "baseline": 77.0, "difference_low": 1.0, "difference_high": 2.0, "confidence": 0.99}
        return {"meta": meta, "choice": {"name": chosen}, "candidates": {chosen: {"test": {"score": test, "vs_unchanged": vs}}}}

    before = run("supervised-stacked", 83.5, None)
    after = run("wise", 84.0, {"judges": True, "confirm_pairs": 1000})
    row = render.train_before_after_row("sick-train", before, after)
    assert row[4:6] == ["250 (dev)", f"{detectable_gain('spearman', 500):.2f}"]
    assert row[9:11] == ["1250 (250 dev + 1000 train)", f"≤ {detectable_gain('spearman', 2500):.2f}"]  # past the simulated sizes
    assert row[6:8] == ["`wise`", "84.00"]
    # a train set that failed the shift checks joins nothing; a run without train evidence is not an after
    shifted = run("unchanged", 77.0, {"judges": False, "confirm_pairs": 1000})
    assert render.train_before_after_row("sick-train", before, shifted)[9] == "250 (dev)"
    assert render.train_before_after_row("sick-train", before, before)[6:] == ["not measured", "—", "—", "—", "—"]


def test_search_train_summary_sets_the_chosen_system_of_each_run_beside_its_dense_side_and_wall():
    """The page's summary row: the choice, what its dense side trained on (the hybrid's source record), its test score
    with the interval, its gain over the unchanged model from the recorded difference, the confirmation p and the wall
    seconds of the device script's line for that run."""
    load("renderers/render_adapt.py")  # what the scripts import from their own folder (a script run adds that folder)
    load("renderers/render_gpu_adapt.py")
    render = load("renderers/render_search_train.py")
    test = {"score": 75.5, "low": 70.25, "high": 80.0, "vs_unchanged": {"candidate": 75.5, "baseline": 66.0, "difference_low": 5.5, "difference_high": 13.25}}
    runs = {
        "with-train": {
            "choice": {"name": "hybrid-best", "confirmation": {"p_value": 0.001}},
            "candidates": {"hybrid-best": {"source": "supervised", "test": test}, "supervised": {"trained_on": "--train", "test": test}},
        }
    }
    machines = {"with-train": "NVIDIA H200\nwith-train exit 0 wall 122 s (alone on the GPU; started 22:24:14)\n"}
    rows = render.summary(runs, machines)
    assert rows[2] == "| with-train | `hybrid-best` | --train | 75.50 [70.25, 80.00] | +9.50 [+5.50, +13.25] | 0.001 | 122 s |"


def test_the_summary_names_the_best_tested_candidate_and_leaves_the_reference_recipe_aside():
    """The cell beside the choice: the highest test score among the candidates that reached the test (a raced-out one has
    none), the never-chosen reference recipe not counted even when it scores highest."""
    render = load("renderers/render_adapt.py")
    candidates = {
        "unchanged": {"test": {"score": 77.0}},
        "wise": {"test": {"score": 81.9}},
        "supervised": {"test": None},  # stopped by the race
        "supervised-stacked": {"test": {"score": 82.0}},
        render.REFERENCE: {"test": {"score": 90.0}},
    }
    assert render.best_on_test({"candidates": candidates}) == "`supervised-stacked` 82.00"
    del candidates["supervised-stacked"]
    assert render.best_on_test({"candidates": candidates}) == "`wise` 81.90"


def serving_rounds(rps: list[float]) -> dict:
    """A level measured in rounds, as serve_load.py rounds records it (the median of the rounds on top)."""
    rounds = [{"throughput_rps": r, "p50_ms": 10.0, "p99_ms": 20.0, "shed": 0, "order": i, "idle_servers_cpu_s": 0.0} for i, r in enumerate(rps)]
    return {"throughput_rps": float(np.median(rps)), "rounds": rounds}


def test_the_serving_page_judges_each_level_against_the_earlier_commit_by_an_interval_of_its_paired_rounds():
    render = load("renderers/render_serving.py")

    def server(levels: dict) -> dict:
        return {"levels": [{"endpoint": "embeddings", "clients": c, **serving_rounds(r)} for c, r in levels.items()]}

    measured = {
        # 1: 10 % either way by round (cannot say); 4: 3 % slower in every round; 16: a median 10 % slower, one round 20 %
        # faster (cannot say, where a median rule called it slower); 64: within 1 % every round (shown not slower)
        "sentune-torch": server({1: [100, 90, 110], 4: [97, 97, 97], 16: [90, 120, 90], 64: [99, 101, 100, 100.5, 99.5]}),
        "sentune-torch@abc1234": server({1: [100, 100, 100], 4: [100, 100, 100], 16: [100, 100, 100], 64: [100] * 5}),
        "infinity": server({1: [50, 50, 50], 4: [50, 50, 50], 16: [50, 50, 50], 64: [50] * 5}),
    }
    assert render.servers(measured) == ["sentune-torch", "infinity", "sentune-torch@abc1234"]
    page = render.against_before(measured)
    rows = [line for line in page if line.startswith("| sentune-torch |")]
    assert [row.split(" | ")[-1].rstrip(" |") for row in rows] == ["not shown", "slower", "not shown", "no"]
    # the interval by its formula: exp(mean(log r) ± t(0.975, n-1) · sd(log r) / sqrt(n))
    logs = [math.log(r) for r in (1.0, 0.9, 1.1)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # Student's t, 2 degrees of freedom, 97.5 %
    assert rows[0].split(" | ")[5:8] == ["1.00 0.90 1.10", f"{math.exp(mean):.2f} [{math.exp(mean - half):.2f}, {math.exp(mean + half):.2f}]", "2.00 / 2.00"]
    assert page[-2].startswith("Slower: sentune-torch embeddings at 4. Not shown either way (2 of 4): sentune-torch embeddings at 1, ")
    assert render.settling(measured) == []  # rounds recorded before the wait: no line
    rule = {"window_s": 1.0, "cpu_s": 0.05, "timeout_s": 60.0}
    waits = [(1.0, True), (3.0, True), (60.0, False)]
    for record in measured.values():
        record["quiet_before_each_level"] = rule
        for r, (wait, quiet) in zip(record["levels"][0]["rounds"], waits, strict=True):
            r |= {"settle_s": wait, "settled": quiet}
    line = render.settling(measured)[0]
    assert "each of the 9 measured levels" in line and "under 0.05 CPU s in 1 s" in line
    assert "3.0 s at the median, 60.0 s at most; **3 measured without going quiet** within 60 s." in line


def test_serving_rounds_on_fresh_processes_pair_each_level_seconds_apart_in_a_rotated_order(monkeypatch, tmp_path):
    """`serve_load.py rounds --fresh`: every round starts every server anew (each alone, the order rotated), measures
    every level of every server back to back (the order rotated too) and stops them; the records keep every round."""
    serve_load = load("speed/serve_load.py")
    events: list[tuple] = []

    class FakeServer:
        def __init__(self, entry: dict) -> None:
            self.label, self.endpoints, self.model, self.embeddings_path = entry["label"], ["embeddings"], "m", "/v1/embeddings"
            self.host, self.record, self.running = entry["label"], {"levels": [], "idle_cpu_s": 0.0}, False

        def start(self, log_folder, timeout, first=True):
            events.append(("start", self.label, first))
            self.running = True

        def stop(self):
            if self.running:
                events.append(("stop", self.label))
            self.running = False

        def cpu(self):
            return 0.0

    def fake_wrk(host, path, bodies, clients, seconds, api_key):
        assert all(s.running for s in servers)
        events.append(("wrk", host, clients, seconds))
        return {"throughput_rps": 100.0 if host == "a" else 50.0, "p50_ms": 1.0, "p99_ms": 2.0, "shed": 0, "generator": "wrk", "clients": clients,
                **{k: 0 for k in serve_load.SUMMED}, **{k: 1.0 for k in serve_load.MEDIAN[3:]}, "mean_ms": 1.0, "other_statuses": {}, "socket_errors": {}}  # fmt: skip

    servers: list = []
    monkeypatch.setattr(serve_load, "Served", lambda entry: servers.append(FakeServer(entry)) or servers[-1])
    monkeypatch.setattr(serve_load, "wrk_level", fake_wrk)
    monkeypatch.setattr(serve_load, "QUIET_WINDOW_S", 0.0)
    (tmp_path / "servers.json").write_text(json.dumps([{"label": "a", "command": ["x"]}, {"label": "b", "command": ["y"]}]))
    (tmp_path / "texts.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    args = argparse.Namespace(servers=str(tmp_path / "servers.json"), texts=str(tmp_path / "texts.jsonl"), max_texts=10, rounds=2,
                              clients="1,4", seconds=6.0, fresh=True, startup_timeout=1.0, out=str(tmp_path / "load.json"))  # fmt: skip
    serve_load.run_rounds(args)
    starts = [e[1:] for e in events if e[0] == "start"]
    assert starts == [("a", True), ("b", True), ("b", False), ("a", False)]  # each round anew, the order rotated
    measured = [(e[1], e[2]) for e in events if e[0] == "wrk" and e[3] == 6.0]
    assert measured == [("a", 1), ("b", 1), ("a", 4), ("b", 4), ("b", 1), ("a", 1), ("b", 4), ("a", 4)]
    assert [e[0] for e in events].count("stop") == 4  # both stopped after each round
    saved = json.loads((tmp_path / "load.json").read_text())
    assert [len(level["rounds"]) for level in saved["a"]["levels"]] == [2, 2] and saved["a"]["fresh_processes"] is True
    assert [r["round"] for r in saved["b"]["levels"][0]["rounds"]] == [0, 1]
    assert all(r["settled"] for level in saved["a"]["levels"] for r in level["rounds"])  # idle fakes: quiet at once


def test_a_level_is_measured_only_once_no_server_still_works_off_the_load_before(monkeypatch):
    """serve_load.settle: a server that spends CPU after its load ended (infinity computing the requests of dropped
    connections) is waited for, window by window, until all servers together spend less than QUIET_CPU_S in one; one
    that never goes quiet is given up on at QUIET_TIMEOUT_S and the level says so."""
    serve_load = load("speed/serve_load.py")
    clock = {"now": 0.0}
    monkeypatch.setattr(serve_load.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(serve_load.time, "sleep", lambda seconds: clock.__setitem__("now", clock["now"] + seconds))

    class Busy:
        def __init__(self, busy_until: float, rate: float) -> None:
            self.busy_until, self.rate = busy_until, rate

        def cpu(self) -> float:  # CPU seconds so far: `rate` a second until busy_until, then none
            return self.rate * min(clock["now"], self.busy_until)

    draining, idle = Busy(busy_until=3.0, rate=0.5), Busy(busy_until=0.0, rate=0.0)
    assert serve_load.settle([idle, draining]) == (4.0, True)  # windows 0-1, 1-2, 2-3 busy; 3-4 quiet
    clock["now"] = 0.0
    steady = Busy(busy_until=100.0, rate=1.5 * serve_load.QUIET_CPU_S / serve_load.QUIET_WINDOW_S)  # above the limit
    assert serve_load.settle([steady, idle]) == (serve_load.QUIET_TIMEOUT_S, False)


def test_a_level_measured_in_rounds_keeps_the_median_rates_and_the_summed_counts():
    serve_load = load("speed/serve_load.py")
    samples = [
        {
            "generator": "wrk",
            "clients": 4,
            "requests": n,
            "seconds": 6.0,
            "shed": s,
            "shed_with_retry_after": s,
            "errors": 0,
            "load_generator_cpu_s": 0.1,
            "throughput_rps": n / 6.0,
            "p50_ms": p,
            "p99_ms": 2 * p,
            "mean_ms": p,
            "shed_p50_ms": 1.0 if s else None,
            "shed_p99_ms": 2.0 if s else None,
            "other_statuses": {"500": 1} if s else {},
            "socket_errors": {},
            "order": i,
            "idle_servers_cpu_s": 0.0,
        }
        for i, (n, p, s) in enumerate([(600, 10.0, 0), (900, 30.0, 2), (660, 20.0, 0)])
    ]
    level = serve_load.median_level(samples)
    assert level["requests"] == 2160 and level["seconds"] == 18.0 and level["shed"] == 2
    assert level["throughput_rps"] == 110.0 and level["p50_ms"] == 20.0 and level["p99_ms"] == 40.0
    assert level["shed_p50_ms"] == 1.0  # the rounds without a 503 are left out of that median
    assert level["other_statuses"] == {"500": 1}
    assert [r["throughput_rps"] for r in level["rounds"]] == [100.0, 150.0, 110.0]


def test_the_default_budget_table_reads_old_and_new_runner_rows_and_checks_the_regret(tmp_path):
    render = load("renderers/render_default_budget.py")
    measured = 'Measured by `EXAMPLES="{0}" bash benchmarks/runners/default_budget.sh` at commit abc1234, finished 2026-12-02 08:00 UTC, 2 cores, load average after 1 1 1; conditions: idle. Target (issue 72): x'
    old = tmp_path / "default_budget-sick.md"
    old.write_text(measured.format("sick") + "\n\n| example | a | b | c | d |\n|---|---|---|---|---|\n| sick | 6.7 | 5.5 | none | `unchanged` 77.15 |\n")
    rows = "".join(
        f"| {name} | 9.0 | {minutes} | {minutes / 30:.0%} | none | none | `wise` {chosen} | `sed` {best:.2f} | {best - chosen:.2f} |{why}\n"
        for name, minutes, chosen, best, why in (
            ("stsb", 24.0, 83.0, 83.3, ""),
            ("mrpc", 12.0, 86.0, 86.9, " `sed` +0.90 on 250 confirmation pairs, p = 0.100 |"),
        )
    )
    new = tmp_path / "default_budget-stsb-mrpc.md"
    new.write_text(measured.format("stsb mrpc") + "\n\n| example | 9 columns |\n|---|\n" + rows)
    page = render.render([old, new])
    assert "**Regret within 0.5 on 1 of 2 examples that recorded it** (of 3); the largest: mrpc, 0.90." in page
    by_example = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in page.splitlines() if line.startswith("| ") and " | 2026" not in line[:3]}
    assert by_example["stsb"][3] == "80%" and by_example["stsb"][7] == "`sed` 83.30" and by_example["stsb"][8] == "0.30"
    assert by_example["sick"][3] == "—" and by_example["sick"][8] == "—"
    assert by_example["mrpc"][9] == "`sed` +0.90 on 250 confirmation pairs, p = 0.100" and by_example["stsb"][9].startswith("— (not recorded")


def test_the_best_tested_candidates_confirmation_says_why_it_is_not_the_choice(monkeypatch):
    render = load("renderers/render_adapt.py")
    monkeypatch.setattr(render, "detectable_gain", lambda metric, units: {("spearman", 500): 3.05}.get((metric, units)))
    superiority = {"candidate": 80.31, "baseline": 79.51, "p_value": 0.188, "permutations": 1000, "pairs": 250}
    results = {
        "meta": {"dev": {"unit": "pairs", "pairs": 500, "metric": "spearman"}},
        "choice": {"name": "unchanged", "safety": {"supervised": {"safe": False, "superiority": superiority}}},
        "candidates": {"unchanged": {"test": {"score": 77.15}}, "supervised": {"test": {"score": 78.71}}, "sed": {"test": {"score": 77.9}}},
    }
    assert render.best_tested_confirmation(results) == (
        "`supervised` +0.80 on 250 confirmation pairs, p = 0.188; the rule confirms +3.05 80 % of the time at 500 dev pairs"
    )
    results["choice"]["safety"] = {"sed": {"safe": True, "superiority": superiority}}  # testing stopped before supervised
    assert render.best_tested_confirmation(results).startswith("`supervised` not tested (behind the unchanged model")
    results["meta"]["dev"] = {"unit": "queries", "queries": 400, "metric": "ndcg@10"}  # no detectable gain known: not said
    results["choice"]["safety"] = {"supervised": {"safe": True, "superiority": superiority}}
    assert render.best_tested_confirmation(results) == "`supervised` +0.80 on 250 confirmation queries, p = 0.188, safe"
    results["choice"]["name"] = "supervised"
    assert render.best_tested_confirmation(results) == "—"
    del results["choice"]["safety"]
    results["choice"]["name"] = "unchanged"
    assert render.best_tested_confirmation(results) == "— (not recorded by this run's adapt)"


def test_the_default_budget_table_keeps_the_newest_row_of_each_example(tmp_path):
    """qqp measured on two pages, the later at a newer commit: its row is the later page's, the other example's row
    stays its own page's."""
    render = load("renderers/render_default_budget.py")
    measured = 'Measured by `EXAMPLES="{0}" bash benchmarks/runners/default_budget.sh` at commit {1}, finished {2}, 2 cores, load average after 1 1 1; conditions: idle. Target (issue 72): x'
    row = "| {0} | 9.0 | 6.0 | 20% | none | none | `unchanged` {1} | `unchanged` {1} | 0.00 |\n"
    older = tmp_path / "default_budget-qqp-quora.md"
    older.write_text(
        measured.format("qqp quora", "aaa1111", "2026-12-03 14:57 UTC")
        + "\n\n| example | 9 columns |\n|---|\n"
        + row.format("qqp", "83.55")
        + row.format("quora", "75.00")
    )
    newer = tmp_path / "default_budget-qqp.md"
    newer.write_text(measured.format("qqp", "bbb2222", "2026-12-03 16:10 UTC") + "\n\n| example | 9 columns |\n|---|\n" + row.format("qqp", "84.40"))
    page = render.render([newer, older], adapt=tmp_path / "none")
    lines = [line for line in page.splitlines() if line.startswith("| qqp |") or line.startswith("| quora |")]
    assert len(lines) == 2
    assert "`unchanged` 84.40" in lines[0] and "bbb2222" in lines[0] and "aaa1111" in lines[1] and "75.00" in lines[1]


def test_the_default_budget_table_gives_the_regret_to_the_best_of_the_examples_full_run_too(tmp_path):
    """stsb's default run stopped supervised after its first fold and chose the unchanged model: no regret to its own best
    tested candidate hid 1.95 points to the full run's supervised."""
    render = load("renderers/render_default_budget.py")
    measured = 'Measured by `EXAMPLES="stsb" bash benchmarks/runners/default_budget.sh` at commit abc1234, finished 2026-12-02 08:00 UTC, 2 cores, load average after 1 1 1; conditions: idle. Target (issue 72): x'
    page = tmp_path / "default_budget-stsb.md"
    page.write_text(
        measured + "\n\n| example | 9 columns |\n|---|\n| stsb | 32.6 | 29.9 | 100% | none | none | `unchanged` 82.03 | `unchanged` 82.03 | 0.00 |\n"
    )
    adapt = tmp_path / "adapt"
    (adapt / "stsb").mkdir(parents=True)
    candidates = {
        "unchanged": {"eligible": True, "test": {"score": 82.03}},
        "supervised": {"eligible": True, "test": {"score": 83.98}},
        "st-simcse": {"eligible": False, "test": {"score": 90.0}},  # the paper's recipe, reported, never chosen: not missed
        "simcse": {"eligible": True, "test": None},
    }
    (adapt / "stsb" / "results.json").write_text(json.dumps({"candidates": candidates}))
    row = next(line for line in render.render([page], adapt=adapt).splitlines() if line.startswith("| stsb |")).split(" | ")
    assert row[10:12] == ["`supervised` 83.98", "1.95"]
    # one a race stopped (or a search reference, BM25 say) that tested higher is missed all the same
    candidates["sg-opt"] = {"eligible": False, "test": {"score": 84.5}}
    (adapt / "stsb" / "results.json").write_text(json.dumps({"candidates": candidates}))
    row = next(line for line in render.render([page], adapt=adapt).splitlines() if line.startswith("| stsb |")).split(" | ")
    assert row[10:12] == ["`sg-opt` 84.50", "2.47"]
    row = next(line for line in render.render([page], adapt=tmp_path / "none").splitlines() if line.startswith("| stsb |")).split(" | ")
    assert row[10:12] == ["— (no full run kept)", "—"]
    assert row[9] == "— (not recorded by this page's runner)"  # a 9-column page


def test_the_default_budget_table_counts_a_run_as_leaving_out_only_what_it_did_not_bring_back():
    render = load("renderers/render_default_budget.py")
    cell = "query-side (brought back: expected 6.0 min, 13.1 min left); hybrid-query-side (brought back: expected 0.2 min, 7.0 min left)"
    assert render.left_parts(cell) == [
        "query-side (brought back: expected 6.0 min, 13.1 min left)",
        "hybrid-query-side (brought back: expected 0.2 min, 7.0 min left)",
    ]
    row = lambda left, minutes: {"left_out": left, "candidate": minutes}  # noqa: E731
    assert render.leaving([row(cell, 20.0), row("none", 5.0)]) == ""
    found = render.leaving([row(cell, 20.0), row("sed (expected 18.7 min; 13.6 min left, --time 36m); " + cell, 25.0)])
    assert found == " 1 of them left candidates out while taking at most 25.0 candidate minutes."
