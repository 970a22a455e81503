"""SG-OPT training speed: the cached-view path against the two-model reference loop, in one run.

Each configuration trains the same recipe (001-sg-opt) on the same fixed random N training sentences in a fresh
subprocess (so peak memory is its own): the two-model loop (BERT_F forward every step) and the cached-view
path (BERT_F's pooled views computed once, memory-mapped) with and without evaluation overhead (dev
evaluation pushed past the end). The cached path is timed cold (it builds its views: the cost of a single
one-epoch run, the paper's setting) and warm (views already in SENTUNE_CACHE: every later epoch, and every
seed or ablation of a sweep sharing the cache), each also with the fused AdamW kernel. A breakdown of one
step's time by component gives the ceiling: caching can save at most BERT_F's forward share.
Reports wall seconds, seconds per training step, seconds per epoch extrapolated to the full STS-B
sentence set, and peak RSS. Target: cached path <= 0.75x the two-model loop. Run it on an idle machine.

Usage: python benchmarks/speed/sg_speed.py [--sentences 1600] [--repeats 2] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sentune.analysis.pages import command_block, emit

NO_EVAL = "training.eval_steps=100000"
FUSED = "training.optimizer=adamw_torch_fused"
CONFIGS = [  # (label, overrides, cache: None = none shared, "cold" = a fresh shared cache, "warm" = the one the cold row filled)
    ("two-model loop, with dev evaluation", ["params.cached_views=false"], None),
    ("cached views (cold), with dev evaluation", ["params.cached_views=true"], None),
    ("two-model loop, no evaluation", ["params.cached_views=false", NO_EVAL], None),
    ("cached views (cold), no evaluation", ["params.cached_views=true", NO_EVAL], "cold"),
    ("cached views (warm), no evaluation", ["params.cached_views=true", NO_EVAL], "warm"),
    ("two-model loop, no evaluation, fused AdamW", ["params.cached_views=false", NO_EVAL, FUSED], None),
    ("cached views (warm), no evaluation, fused AdamW", ["params.cached_views=true", NO_EVAL, FUSED], "warm"),
]

CHILD = """
import json, resource, sys, time
from pathlib import Path
from sentune.training.recipe import load_recipe
from sentune.data.catalog import resolve_data_dir
from sentune.training import trainer as t
recipe = load_recipe("001-sg-opt", sys.argv[2:])
recipe.eval.tasks = "STS-B-dev"  # the final evaluation is not what is timed
start = time.perf_counter()
t.train(recipe, Path(sys.argv[1]), data_dir=resolve_data_dir(None))
print(json.dumps({"seconds": time.perf_counter() - start, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

# One SG-OPT step (two-model path, batch 16) split into its parts, timed over `steps` steps after 5 warm-up steps.
BREAKDOWN = """
import json, sys, time
import numpy as np, torch
from sentune.modules.build import with_pooling
from sentune.data.catalog import load_sentences
from sentune.methods.sg import SelfGuidedLoss
from sentune.core.models import load_model
from sentune.training.recipe import load_recipe
from sentune.data.catalog import resolve_data_dir
steps = int(sys.argv[1])
sentences = load_sentences("stsb", resolve_data_dir(None))
model = with_pooling(load_model("default"), "cls")
recipe = load_recipe("001-sg-opt", [])
loss = SelfGuidedLoss(model, temperature=recipe.params["temperature"], reg_weight=recipe.params["reg_weight"])
lr, betas = recipe.training.learning_rate, (recipe.training.adam_beta1, recipe.training.adam_beta2)
params = [p for p in loss.parameters() if p.requires_grad]
optimizers = {"optimizer step (AdamW, foreach)": torch.optim.AdamW(params, lr=lr, betas=betas),
              "optimizer step (AdamW, fused)": torch.optim.AdamW(params, lr=lr, betas=betas, fused=True)}
parts = ["tokenize", "BERT_F forward (views)", "BERT_T forward", "head + L^opt3", "L^reg", "backward", *optimizers]
seconds = dict.fromkeys(parts, 0.0)
rng = np.random.default_rng(0)
for step in range(steps + 5):
    if step == 5:
        seconds = dict.fromkeys(parts, 0.0)
    timings = []
    def mark(part):
        timings.append((part, time.perf_counter()))
    mark(None)
    features = model.preprocess([sentences[i] for i in rng.integers(0, len(sentences), 16)]); mark("tokenize")
    views = loss.batch_views(features, None, torch.device("cpu")); mark("BERT_F forward (views)")
    c = model(dict(features))["sentence_embedding"]; mark("BERT_T forward")
    value = loss.contrastive(c, views); mark("head + L^opt3")
    value = value + loss.regularizer(); mark("L^reg")
    value.backward(); mark("backward")
    for name, optimizer in optimizers.items():  # both timed on the same gradients; only one step's update is kept
        state = [p.detach().clone() for p in params]
        optimizer.step(); mark(name)
        with torch.no_grad():
            for p, s in zip(params, state):
                p.copy_(s)
        timings.append((None, time.perf_counter()))
    loss.zero_grad()
    for (_, t0), (part, t1) in zip(timings, timings[1:]):
        if part is not None:
            seconds[part] += t1 - t0
print(json.dumps({part: s / steps for part, s in seconds.items()}))
"""


def run_child(code: str, args: list[str], env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env={**env, "HF_HUB_OFFLINE": "1"})
    if out.returncode != 0:
        sys.exit(f"benchmark child failed ({' '.join(args)}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def breakdown_lines(per_part: dict) -> tuple[list[str], float]:
    """Markdown table of one step's parts (foreach AdamW in the total) and BERT_F's share of that step."""
    total = sum(v for k, v in per_part.items() if "fused" not in k)
    lines = ["| part of one step | ms | share of the step (foreach AdamW) |", "|---|---|---|"]
    lines += [
        f"| {part} | {1000 * s:.1f} | " + ("(instead of the foreach step)" if "fused" in part else f"{100 * s / total:.1f} %") + " |"
        for part, s in per_part.items()
    ]
    frozen = per_part["BERT_F forward (views)"] / total
    return lines + [f"| total | {1000 * total:.1f} | 100 % |"], frozen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=1600)
    parser.add_argument("--breakdown-steps", type=int, default=20)
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="runs per configuration; the fastest is reported (timeit's rule: "
        "slower repeats measure other load, e.g. disk writeback of a checkpoint, not the code)",
    )
    parser.add_argument("--out")
    args = parser.parse_args()
    from sentune.data.catalog import load_sentences, resolve_data_dir

    total = len(load_sentences("stsb", resolve_data_dir(None)))
    steps = -(-args.sentences // 16)
    base_env = {k: v for k, v in os.environ.items() if k != "SENTUNE_CACHE"}
    rows = []
    with tempfile.TemporaryDirectory() as shared_cache:
        for label, overrides, cache in CONFIGS:
            # Without a shared cache each cached-view row builds its views itself (that cost is part of the path).
            walls, peaks = [], []
            for _ in range(args.repeats):
                if cache == "cold":  # every repeat of a cold row starts from an empty shared cache
                    shutil.rmtree(shared_cache)
                    Path(shared_cache).mkdir()
                env = base_env if cache is None else {**base_env, "SENTUNE_CACHE": shared_cache}
                with tempfile.TemporaryDirectory() as tmp:
                    measured = run_child(CHILD, [str(Path(tmp) / "run"), f"training.max_sentences={args.sentences}", "training.patience=0", *overrides], env)
                walls.append(measured["seconds"])
                peaks.append(measured["peak_rss_mb"])
            per_step = min(walls) / steps
            rows.append((label, overrides, min(walls), per_step, per_step * total / 16, max(peaks), walls))
            print(rows[-1], flush=True)
    part_lines, frozen_share = breakdown_lines(run_child(BREAKDOWN, [str(args.breakdown_steps)], base_env))
    seconds = {row[0]: row[2] for row in rows}

    def ratio(cached: str, reference: str) -> str:
        return f"**{seconds[cached] / seconds[reference]:.3f}**"

    lines = [
        "# SG-OPT training speed: cached views vs the two-model loop",
        "",
        f"Date: {datetime.now(UTC).date()} · recipe `001-sg-opt` (batch 16, 4096-d head) on a fixed random {args.sentences} of the "
        f"STS-B sentences ({steps} steps), one subprocess per row · per-epoch seconds extrapolated to all {total} unique STS-B sentences. "
        "Cold: the cached row builds its views (one forward per sentence, as the two-model loop does once per epoch); warm: the "
        "views are already in the shared cache (later epochs, and every seed or ablation after the first in a sweep).",
        "",
        *command_block(),
        f"Each row ran {args.repeats} times; wall s is the fastest (every run listed), the per-step and per-epoch columns follow from it.",
        "",
        "| configuration | overrides | wall s | every run, s | s / step | s / epoch (extrapolated) | peak RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {r[0]} | `{' '.join(r[1])}` | {r[2]:.1f} | {', '.join(f'{w:.1f}' for w in r[6])} | {r[3]:.3f} | {r[4]:.0f} | {r[5]:.0f} |" for r in rows]
    lines += [
        "",
        "Cached / two-model (target ≤ 0.75):",
        "",
        f"- cold, with evaluation (one epoch, the paper's setting): {ratio(CONFIGS[1][0], CONFIGS[0][0])}",
        f"- cold, no evaluation: {ratio(CONFIGS[3][0], CONFIGS[2][0])}",
        f"- warm, no evaluation: {ratio(CONFIGS[4][0], CONFIGS[2][0])}",
        f"- warm, no evaluation, both with fused AdamW: {ratio(CONFIGS[6][0], CONFIGS[5][0])}",
        f"- warm with fused AdamW against the two-model loop as the recipe runs it (foreach AdamW): {ratio(CONFIGS[6][0], CONFIGS[2][0])}",
        "",
        f"## Where one step's time goes (two-model path, {args.breakdown_steps} steps after 5 warm-up steps, default model)",
        "",
        *part_lines,
        "",
        f"BERT_F's forward is {100 * frozen_share:.1f} % of a step, so a view cache that costs nothing can at best bring a step to "
        f"{1 - frozen_share:.2f}× the two-model loop; the 4096-d head, BERT_T's backward and the optimizer are what remains.",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
