"""SG-OPT training speed: the cached-view path against the two-model reference loop, in one run.

Each configuration trains the same recipe (001-sg-opt) on the same fixed random N training sentences in a fresh
subprocess (so peak memory is its own): (1) two-model loop (BERT_F forward every step), (2) cached views
(computed once, memory-mapped; the cache build is included in its time), (3) and (4) the same two loops
without evaluation overhead (dev evaluation pushed past the end). Reports wall seconds, seconds per
training step, seconds per epoch extrapolated to the full STS-B sentence set, and peak RSS.
Target: cached path <= 0.75x the two-model loop.

Usage: python benchmarks/sg_speed.py [--sentences 1600] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from common import emit  # noqa: E402  (benchmarks/common.py)

CONFIGS = [
    ("two-model loop, with dev evaluation", ["params.cached_views=false"]),
    ("cached views, with dev evaluation", ["params.cached_views=true"]),
    ("two-model loop, no evaluation", ["params.cached_views=false", "training.eval_steps=100000"]),
    ("cached views, no evaluation", ["params.cached_views=true", "training.eval_steps=100000"]),
]

CHILD = """
import json, resource, sys, time
from pathlib import Path
from sentune.recipe import load_recipe
from sentune.tasks.catalog import resolve_data_dir
from sentune import train as t
recipe = load_recipe("001-sg-opt", sys.argv[2:])
recipe.eval.tasks = "STS-B-dev"  # the final evaluation is not what is timed
start = time.perf_counter()
t.train(recipe, Path(sys.argv[1]), data_dir=resolve_data_dir(None))
print(json.dumps({"seconds": time.perf_counter() - start, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=1600)
    parser.add_argument("--out")
    args = parser.parse_args()
    from sentune.data.corpora import load_sentences
    from sentune.tasks.catalog import resolve_data_dir

    total = len(load_sentences("stsb", resolve_data_dir(None)))
    steps = -(-args.sentences // 16)
    rows = []
    for label, overrides in CONFIGS:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-c", CHILD, str(Path(tmp) / "run"), f"training.max_sentences={args.sentences}", "training.patience=0", *overrides]
            # No shared cache: each cached-view row must build its views itself (that cost is part of the path).
            env = {k: v for k, v in os.environ.items() if k != "SENTUNE_CACHE"}
            out = subprocess.run(cmd, capture_output=True, text=True, env={**env, "HF_HUB_OFFLINE": "1"})
            if out.returncode != 0:
                sys.exit(f"{label} failed:\n{out.stderr[-3000:]}")
            measured = json.loads(out.stdout.strip().splitlines()[-1])
        per_step = measured["seconds"] / steps
        rows.append((label, overrides, measured["seconds"], per_step, per_step * total / 16, measured["peak_rss_mb"]))
        print(rows[-1], flush=True)
    two_model, cached = rows[0][2], rows[1][2]
    lines = [
        "# SG-OPT training speed: cached views vs the two-model loop", "",
        f"Date: {datetime.now(timezone.utc).date()} · recipe `001-sg-opt` (batch 16, 4096-d head) on a fixed random {args.sentences} of the "
        f"STS-B sentences ({steps} steps), one subprocess per row · per-epoch seconds extrapolated to all {total} unique STS-B sentences", "",
        "Command:", "", "```", "python " + " ".join(sys.argv), "```", "",
        "| configuration | overrides | wall s | s / step | s / epoch (extrapolated) | peak RSS MB |", "|---|---|---|---|---|---|",
    ]
    lines += [f"| {r[0]} | `{' '.join(r[1])}` | {r[2]:.1f} | {r[3]:.3f} | {r[4]:.0f} | {r[5]:.0f} |" for r in rows]
    lines += ["", f"Cached / two-model (with evaluation): **{cached / two_model:.3f}** (target ≤ 0.75); "
              f"without evaluation: **{rows[3][2] / rows[2][2]:.3f}**."]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
