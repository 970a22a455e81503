"""Resident memory of CPU training: freed memory released or kept, and gradient checkpointing (sentune.core.memory,
training.gradient_checkpointing, `sentune adapt --low-memory`).

`sentune adapt --example scifact` held 4.96 GB resident with 0.38 GB in use by malloc during its SED training, and its
--reference run of sentence-transformers' SimCSE recipe (batch 64 at the model's 256 tokens) 6.6 GB of live activations
(issue 23 asks for under 2 GB). Here each recipe adapt trains on the passages (adapt/simcse, mirror, ct, sg-opt, tsdae,
adapt/sed distilling two copies of the model, and adapt/st-simcse, the reference) runs STEPS steps on the SciFact
passages, cut as adapt cuts them, in a fresh process each (with a fresh cache: SED computes its members' targets and
SG-OPT its views, as adapt does), under each setting: the default (freed memory released after every step); 'kept'
(the release switched off: glibc keeps what PyTorch frees), for --without's recipes; 'low-memory' (gradient
checkpointing and large blocks unmapped when freed, as --low-memory trains). Reports peak resident memory (/usr/bin/time), the seconds of a training step
(dev evaluation pushed past the end) and the process's seconds. Run it on an idle machine.

Usage: python benchmarks/speed/training_memory.py [--data DIR] [--model default] [--steps 150] [--methods simcse,...]
                                                  [--settings default,kept,low-memory] [--without mirror,sed] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sentune.analysis.pages import command_block, cpu_name, emit
from sentune.data.beir import read_corpus_jsonl
from sentune.data.catalog import resolve_data_dir
from sentune.data.passages import passages

# every adapt recipe that trains on the passages, and sentence-transformers' SimCSE recipe that --reference adds
METHODS = ("simcse", "mirror", "ct", "sg-opt", "tsdae", "sed", "st-simcse")
SETTINGS = {  # setting: (label, the child's trim switch, recipe overrides)
    "default": ("freed memory released after every step", "on", []),
    "kept": ("freed memory kept by glibc", "off", []),
    "low-memory": ("gradient checkpointing and large blocks unmapped when freed (--low-memory), released", "mapped", ["training.gradient_checkpointing=true"]),
}

# argv: run folder, "on"/"off"/"mapped", recipe name, overrides...; prints the seconds of each step after the first 5.
CHILD = """
import json, sys, time
from pathlib import Path
from transformers import TrainerCallback
from sentune.core import memory
from sentune.data.catalog import resolve_data_dir
from sentune.training.recipe import load_recipe
from sentune.training.trainer import train

if sys.argv[2] == "off":
    memory._TRIM = None
if sys.argv[2] == "mapped":  # as `sentune adapt --low-memory` does before any candidate
    memory.map_large_allocations()

class StepTimer(TrainerCallback):
    def __init__(self):
        self.seconds = []
    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()
    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self.started)

timer = StepTimer()
recipe = load_recipe(sys.argv[3], sys.argv[4:])
train(recipe, Path(sys.argv[1]), data_dir=resolve_data_dir(None), callbacks=[timer], show_progress=False)
steady = timer.seconds[5:]
print("STEP-SECONDS " + json.dumps(sum(steady) / len(steady)))
"""


def corpus_file(data_dir: Path, folder: Path) -> tuple[Path, int]:
    """The SciFact abstracts cut into passages as `sentune adapt` cuts a retrieval corpus (title and text)."""
    documents = read_corpus_jsonl(data_dir / "retrieval" / "scifact" / "corpus.jsonl")
    texts = passages([d.text for d in documents])
    path = folder / "corpus.txt"
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path, len(texts)


def model_folder(name: str) -> str:
    from sentune.core.models import resolve_model_name

    return str(resolve_model_name(name))


def run(method: str, setting: str, model: str, corpus: Path, steps: int, folder: Path) -> dict:
    overrides = [f"model={model}", f"train_data=file:{corpus}", f"training.max_steps={steps}", "training.eval_steps=100000", "training.device=cpu"]
    overrides += ["eval.dev=STS-B-dev", *SETTINGS[setting][2]]
    if method != "st-simcse":  # adapt trains its candidates on the model's token pooling (the reference keeps its own)
        overrides.append("pooling=mean")
    if method == "sed":
        overrides.append(f"params.members=[{model},{model}]")
    command = [sys.executable, "-c", CHILD, str(folder), SETTINGS[setting][1], f"adapt/{method}", *overrides]
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "peak-kb %M", *command],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "SENTUNE_CACHE": str(folder / "cache")},
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{method} ({setting}) failed:\n{done.stderr[-3000:]}")
    peak_kb = int(next(line for line in done.stderr.splitlines() if line.startswith("peak-kb")).split()[1])
    step = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("STEP-SECONDS")).split(maxsplit=1)[1])
    return {"peak_mib": peak_kb / 1024, "step_seconds": step, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="data directory (default: SENTUNE_DATA)")
    parser.add_argument("--model", default="default")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated adapt recipes (default: {', '.join(METHODS)})")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, of: {', '.join(SETTINGS)}")
    parser.add_argument("--without", default="mirror,sed", help="the recipes that the 'kept' setting runs (glibc keeps what PyTorch frees)")
    parser.add_argument("--note", help="the machine's conditions, printed on the page (e.g. what else ran)")
    parser.add_argument("--out", help="write the Markdown page here")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data)
    model = model_folder(args.model)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sentune-training-memory-") as root:
        corpus, count = corpus_file(data_dir, Path(root))
        for method in args.methods.split(","):
            for setting in args.settings.split(","):
                if setting == "kept" and method not in args.without.split(","):
                    continue
                label = SETTINGS[setting][0]
                print(f"{method}: {label} ...", flush=True)
                rows.append((method, label, run(method, setting, model, corpus, args.steps, Path(root) / f"{method}-{setting}")))
                print(f"  {rows[-1][2]}", flush=True)
    lines = [
        "# Resident memory of CPU training: freed memory released or kept, gradient checkpointing (issue 23)",
        "",
        f"Measured {datetime.now(UTC).date()} on {cpu_name()}, {os.cpu_count()} CPU cores ({platform.machine()}); model `{args.model}`; "
        f"{args.steps} steps of each recipe on the {count} passages of the SciFact abstracts; a fresh process each (model loading included).",
        "",
        *([f"Conditions: {args.note}", ""] if args.note else []),
        *command_block(),
        "| recipe | freed memory | peak resident (MiB) | seconds a step (after the first 5) | process seconds |",
        "|---|---|---|---|---|",
        *(f"| adapt/{m} | {label} | {r['peak_mib']:.0f} | {r['step_seconds']:.3f} | {r['seconds']:.1f} |" for m, label, r in rows),
        "",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
