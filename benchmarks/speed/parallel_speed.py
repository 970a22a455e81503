"""Throughput of one training run with all cores against several one-thread runs side by side.

Trains the same short SG-OPT recipe (001-sg-opt on the first N STS-B sentences, no dev evaluation):
(1) one run with OMP_NUM_THREADS = the core count, (2) `--workers` runs at once with one thread each.
Reports steps per second of each run and in total: what benchmarks/lib.sh's JOBS=2 relies on. Run it on
an otherwise idle machine.

Usage: python benchmarks/speed/parallel_speed.py [--sentences 960] [--workers 2] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sentune.analysis.pages import command_block, emit


def _start(out: Path, sentences: int, threads: int, seed: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "SENTUNE_CACHE"}
    env.update(OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1")
    cmd = [
        "sentune",
        "train",
        "001-sg-opt",
        f"training.max_sentences={sentences}",
        "training.eval_steps=100000",
        "training.patience=0",
        "eval.tasks=STS-B",
        f"training.seed={seed}",
        "--out",
        str(out),
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _steps_per_second(run: Path, proc: subprocess.Popen) -> float:
    _, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"training in {run} failed:\n{err[-3000:]}")
    final = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if "train_runtime" in line][-1]
    return final["train_steps_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=960)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        single = _steps_per_second(Path(tmp) / "single", _start(Path(tmp) / "single", args.sentences, cores, 1))
        runs = [Path(tmp) / f"worker-{i}" for i in range(args.workers)]
        procs = [_start(run, args.sentences, 1, i + 1) for i, run in enumerate(runs)]
        parallel = [_steps_per_second(run, proc) for run, proc in zip(runs, procs, strict=False)]
    lines = [
        "# One all-core training run against one-thread runs side by side",
        "",
        f"Date: {datetime.now(UTC).date()} · {cores} cores · recipe `001-sg-opt` on {args.sentences} STS-B sentences, no dev evaluation",
        "",
        *command_block(),
        "| configuration | steps/s per run | steps/s in total |",
        "|---|---|---|",
        f"| 1 run, {cores} threads | {single:.3f} | {single:.3f} |",
        f"| {args.workers} runs at once, 1 thread each | " + ", ".join(f"{v:.3f}" for v in parallel) + f" | {sum(parallel):.3f} |",
        "",
        f"Total throughput ratio (parallel / single): **{sum(parallel) / single:.2f}**.",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
