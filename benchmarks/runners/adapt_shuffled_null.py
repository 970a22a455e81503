"""A real null for the supervised candidate (issue 46): `sentune adapt` on a small example whose selection labels are
shuffled, so there is nothing to learn from them, run with N seeds; a calibrated adapt ships the supervised candidate in
≤ 5 % of the runs.

Each run r: the example's dev pairs (a seeded sample of `--dev-pairs` from the example's dev set), split by adapt's own
split (sentune.adaptation.decide.split_dev with seed r, which `--seed r` makes adapt use); the labels of the selection part
are permuted among themselves (seed r), the confirmation part keeps its labels, and `sentune adapt --methods
supervised --seed r` runs on it: the supervised candidate fine-tunes on the shuffled selection labels (cross-fitted),
is scored out of fold there, and is confirmed or not on the untouched half. `--all-shuffled` permutes every dev
label instead (then no model can be better on either half). Finished runs are read back (resumable).

`--train-pairs N` (users with a train set): run r also gives adapt `--train`, a seeded sample of N pairs of the
example's train split whose labels are permuted among themselves except on the train pairs adapt's evidence sample
puts in its confirmation part (sentune.adaptation.evidence.sample_evidence with seed r: the supervised candidate never trains
on those, and they confirm beside the dev confirmation half). Everything the supervised candidate trains on, and every
selection label, is then noise; the confirmation pairs, dev and train, keep their labels. Its runs are kept apart
(adapt-shuffled-null-train) and its page is adapt_shuffled_null_train.md.

    python benchmarks/runners/adapt_shuffled_null.py --runs 73

Its runs are kept in benchmarks/results/runs/adapt-shuffled-null/results.json, and the calibration page's last section
(adapt_calibration.md) is rewritten from them. With 73 runs and none shipped, the interval's upper end is at 5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import adapt_calibration as calibration  # its own folder (rates with Wilson intervals)
import numpy as np

from sentune.adaptation.decide import split_dev
from sentune.adaptation.evidence import sample_evidence
from sentune.adaptation.examples import write_example
from sentune.analysis.pages import command_line, machine_conditions
from sentune.data.catalog import resolve_data_dir
from sentune.data.user_data import read_scored_pairs, write_scored_pairs


def shuffled_dev(pairs: list, seed: int, everything: bool) -> list[tuple[str, str, float]]:
    gold = np.array([p.score for p in pairs])
    split = split_dev(gold, seed=seed)
    where = np.arange(len(pairs)) if everything else split.select
    labels = gold.copy()
    labels[where] = np.random.default_rng(seed).permutation(gold[where])
    return [(p.a, p.b, float(y)) for p, y in zip(pairs, labels, strict=True)]


def shuffled_train(pairs: list, size: int, seed: int) -> list[tuple[str, str, float]]:
    """A seeded sample of `size` train pairs, labels permuted among themselves except on the evidence confirmation
    pairs adapt draws with this seed (sentune.adaptation.evidence: which pairs they are depends only on how many there are,
    for graded labels)."""
    chosen = [pairs[i] for i in sorted(random.Random(seed).sample(range(len(pairs)), size))]
    gold = np.array([p.score for p in chosen])
    indices, split = sample_evidence(gold, seed=seed)
    kept = set(indices[split.confirm].tolist())
    noise = np.array([i for i in range(size) if i not in kept])
    labels = gold.copy()
    labels[noise] = np.random.default_rng(seed).permutation(gold[noise])
    again, again_split = sample_evidence(labels, seed=seed)  # adapt draws the same evidence from the shuffled file (0/1 labels may not)
    assert again.tolist() == indices.tolist() and again_split.confirm.tolist() == split.confirm.tolist(), "use an example with graded labels"
    return [(p.a, p.b, float(y)) for p, y in zip(chosen, labels, strict=True)]


def one_run(run: int, args, example, runs: Path) -> dict:
    out = runs / f"run-{run}"
    done = out / "results.json"
    if not done.is_file():
        out.mkdir(parents=True, exist_ok=True)
        pairs = read_scored_pairs(example.dev).pairs
        sample = sorted(random.Random(run).sample(range(len(pairs)), args.dev_pairs))
        dev = out.parent / f"dev-{run}.tsv"
        write_scored_pairs(dev, shuffled_dev([pairs[i] for i in sample], run, args.all_shuffled))
        command = ["sentune", "adapt", "--model", args.model, "--corpus", str(example.corpus), "--dev", str(dev)]
        if args.train_pairs:
            assert example.train is not None, f"--example {args.example} has no train split"
            train = out.parent / f"train-{run}.tsv"
            write_scored_pairs(train, shuffled_train(read_scored_pairs(example.train).pairs, args.train_pairs, run))
            command += ["--train", str(train)]
        command += ["--methods", "supervised", "--seed", str(run), "--prune", "--quiet", "--out", str(out)]  # keep no fold models
        # one torch thread a run: two runs of two threads each on two cores wait on each other's spinning threads
        threads = {"OMP_NUM_THREADS": "1"} if args.workers > 1 else {}
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ | threads)
    results = json.loads(done.read_text())
    return {
        "run": run,
        "chosen": results["choice"]["name"],
        "reason": results["choice"]["reason"],
        "seconds": sum(c["seconds"] for c in results["candidates"].values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--example", default="sick", help="a pair example of `sentune adapt --example` (default sick: graded, CoSENT)")
    parser.add_argument("--dev-pairs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1, help="runs at a time (with more than one, each run gets one torch thread: OMP_NUM_THREADS=1)")
    parser.add_argument("--render-only", action="store_true", help="write the pages again from the kept runs (no adapt run)")
    parser.add_argument("--model", default="default")
    parser.add_argument("--all-shuffled", action="store_true", help="permute every dev label, not only the selection part's")
    parser.add_argument("--train-pairs", type=int, default=0, help="also give adapt --train: this many train pairs, shuffled but for the confirming ones")
    parser.add_argument("--data", help="data directory (default: $SENTUNE_DATA)")
    parser.add_argument("--runs-dir", default="benchmarks/runs/adapt-shuffled-null")
    parser.add_argument("--out", help="the page (default benchmarks/results/adapt_shuffled_null.md, _all.md with --all-shuffled)")
    parser.add_argument(
        "--calibration-page", default="benchmarks/results/adapt_calibration.md", help="whose real-null section these runs fill (selection labels shuffled only)"
    )
    args = parser.parse_args()
    kept = kept_path(args.all_shuffled, bool(args.train_pairs))
    if args.render_only:
        facts = json.loads(kept.read_text())
    else:
        started = time.perf_counter()
        runs = Path(args.runs_dir) / (("all" if args.all_shuffled else "selection") + (f"-train-{args.train_pairs}" if args.train_pairs else ""))
        example = write_example(args.example, resolve_data_dir(args.data), runs / "example")
        with ThreadPoolExecutor(args.workers) as pool:  # each run is an `sentune adapt` process of its own
            found = list(pool.map(lambda r: one_run(r, args, example, runs), range(1, args.runs + 1)))
        # "meta" as every kept results.json has it (the renderers that scan benchmarks/results/runs read it)
        facts = {"meta": {"command": command_line(), "date": datetime.now(UTC).isoformat(timespec="seconds"), "code": code_commit()}}
        facts["example"] = args.example
        facts |= {"model": args.model, "dev_pairs": args.dev_pairs, "all_shuffled": args.all_shuffled, "runs": len(found), "train_pairs": args.train_pairs}
        facts |= {"minutes": (time.perf_counter() - started) / 60, "found": found}
        facts["shipped"] = calibration.rate(sum(f["chosen"] != "unchanged" for f in found), len(found))
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(facts, indent=2) + "\n")
    train = bool(facts.get("train_pairs"))
    out = Path(args.out or f"benchmarks/results/adapt_shuffled_null{'_all' if facts['all_shuffled'] else ''}{'_train' if train else ''}.md")
    out.write_text(page(facts, machine_conditions(kept.parent / "conditions.md")), encoding="utf-8")
    print(f"wrote {out}: shipped {facts['shipped']['hits']} of {facts['runs']}")
    calibration_page = Path(args.calibration_page)
    if not facts["all_shuffled"] and not train and calibration_page.is_file():
        calibration.put_real_null(calibration_page, kept)
        print(f"updated {calibration_page}: {calibration.REAL_NULL_HEADING[3:]}")


def code_commit() -> str | None:
    """The commit of the sentune package these runs imported (adapt runs it; PYTHONPATH may name another checkout), with
    '+changes' when its files differ from that commit; None outside a git checkout."""
    import sentune

    folder = Path(sentune.__file__).parent

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        return git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain", "--", ".") else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def kept_path(all_shuffled: bool, train: bool = False) -> Path:
    """Where the runs are kept: the calibration page reads the selection-shuffled ones without a train set (REAL_NULL)."""
    folder = calibration.REAL_NULL.parent
    if train:
        return folder.with_name(folder.name + ("-all" if all_shuffled else "") + "-train") / "results.json"
    return folder.with_name(folder.name + "-all") / "results.json" if all_shuffled else calibration.REAL_NULL


def page(facts: dict, conditions: list[str] | None = None) -> str:
    """The page of every run, from the kept facts alone (so --render-only writes the same page), and the machine
    conditions the person who ran them wrote beside them (conditions.md in the kept folder)."""
    what = ("every dev label" if facts["all_shuffled"] else "the selection part's labels") + " permuted"
    if facts.get("train_pairs"):
        what += f"; {facts['train_pairs']} train pairs, their labels permuted but for the confirming ones"
    lines = [
        f"# Shuffled labels: how often `sentune adapt` ships a supervised candidate that learned nothing ({what})",
        "",
        f"Measured {facts['meta']['date'][:10]} ({sum(f['seconds'] for f in facts['found']) / 60:.0f} min of candidate time over the {facts['runs']} runs, "
        "each one torch thread; runs are read back when run again) by:",
        "",
        "```",
        facts["meta"]["command"],
        "```",
        "",
        f"Example {facts['example']}, model {facts['model']}, {facts['dev_pairs']} dev pairs a run, the adapt code of commit "
        f"{facts['meta'].get('code') or 'not recorded'}; the runs are described in",
        "`benchmarks/runners/adapt_shuffled_null.py`'s docstring.",
        "",
        f"**Shipped: {calibration.percent(facts['shipped'])}** (95 % Wilson interval; a calibrated rule: ≤ 5 %).",
        "",
        *[line for text in conditions or [] for line in (text, "")],
        "| run | chosen | candidate minutes | reason |",
        "|---|---|---|---|",
    ]
    lines += [f"| {f['run']} | {f['chosen']} | {f['seconds'] / 60:.1f} | {f['reason']} |" for f in facts["found"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
