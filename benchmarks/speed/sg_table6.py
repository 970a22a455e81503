"""Seed 001, Table 6: training and inference seconds on STS-B for mean pooling, WK pooling, whitening, BERT-flow and
SG-OPT, measured on this machine in one run of this script.

Training = what a method needs before it can encode: nothing (mean, WK), fitting the kernel on all STS-B
sentences (whitening, flow; encoding them included), one SG-OPT training run (the `train_runtime` logged by the
trainer of --sg-run, or a fresh run when none is given). Inference = encoding the STS-B test sentences.

When --out names an existing page, its numbers are shown beside the new ones (columns "before"), so a re-measured
page keeps what it replaced.

Usage: python benchmarks/speed/sg_table6.py [--sg-run benchmarks/runs/sg-opt-s1] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sentune.analysis.pages import command_block, emit, timed
from sentune.core.encode import Encoder
from sentune.core.models import load_model
from sentune.data.catalog import load_sentences, load_task, resolve_data_dir, select_tasks
from sentune.postprocess.flow import Flow
from sentune.postprocess.whitening import Whitening


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sg-run", help="a finished `sentune train 001-sg-opt` run folder to take the training time and model from")
    parser.add_argument("--out")
    args = parser.parse_args()
    data_dir = resolve_data_dir(None)
    test = [s for p in load_task(select_tasks("STS-B")[0], data_dir)["test"] for s in (p.a, p.b)]
    fit_set = load_sentences("stsb", data_dir)
    base = load_model("default")
    base.encode(["warm up"] * 32)
    rows = []
    t_inf, _ = timed(lambda: Encoder(base, "mean", show_progress=False).encode(test))
    rows.append(("mean pooling", 0.0, t_inf))
    t_inf, _ = timed(lambda: Encoder(base, "wk", show_progress=False).encode(test))
    rows.append(("WK pooling", 0.0, t_inf))
    encoder = Encoder(base, "first-last", show_progress=False)
    t_fit, whitening = timed(lambda: Whitening().fit(encoder.encode(fit_set)))
    t_inf, _ = timed(lambda: whitening.transform(encoder.encode(test)))
    rows.append(("whitening (first-last, fit on all STS-B sentences)", t_fit, t_inf))
    last2 = Encoder(base, "last2", show_progress=False)  # the paper's Flow baseline: BERT-flow on the last-two-layer mean
    t_fit, flow = timed(lambda: Flow().fit(last2.encode(fit_set)))
    t_inf, _ = timed(lambda: flow.transform(last2.encode(test)))
    rows.append(("BERT-flow (last two layers, fit on all STS-B sentences)", t_fit, t_inf))
    run = Path(args.sg_run) if args.sg_run else None
    if run is None:
        from sentune.training.recipe import load_recipe
        from sentune.training.trainer import train

        run = Path(tempfile.mkdtemp()) / "sg-opt"
        recipe = load_recipe("001-sg-opt")
        recipe.eval.tasks = "STS-B"
        train(recipe, run, data_dir=data_dir)
    logs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train_seconds = next(entry["train_runtime"] for entry in reversed(logs) if "train_runtime" in entry)
    tuned = load_model(str(run / "model"))
    t_inf, _ = timed(lambda: Encoder(tuned, "model", show_progress=False).encode(test))
    rows.append((f"SG-OPT ({run})", float(train_seconds), t_inf))
    before, before_date = previous_page(Path(args.out)) if args.out else ({}, None)
    lines = [
        "# Seed 001, Table 6 on the default model: training and inference seconds",
        "",
        f"Date: {datetime.now(UTC).date()} · STS-B test: {len(test)} sentences to encode · whitening fit set: {len(fit_set)} sentences",
        "",
        *command_block(),
    ]
    # With an earlier page at --out, its numbers stand beside the new ones ("before" columns).
    extra = [f"training s before ({before_date})", f"inference s before ({before_date})"] if before else []
    lines += ["| " + " | ".join(["method", "training s", "inference s", *extra]) + " |", "|---" * (3 + len(extra)) + "|"]
    for name, train, inference in rows:
        old = list(before.get(name, ("–", "–"))) if before else []
        lines.append("| " + " | ".join([name, f"{train:.1f}", f"{inference:.2f}", *old]) + " |")
    lines += [
        "",
        "SG-OPT's training time includes its periodic dev evaluations and the one-off view cache. Changed (issue 25): the "
        "BERT-flow row is seed 001's Flow baseline (BERT-flow on the mean of the last two layers, fitted on the STS-B "
        "sentences, as in sg.md's Table 1); pages before issue 25 had no Flow row.",
    ]
    if before:
        lines += [
            "",
            f"The 'before' columns are the page this one replaced ({before_date}), another day's measurement whose machine "
            "load is not recorded here: compare methods within one date's columns.",
        ]
    emit(lines, args.out)


def previous_page(path: Path) -> tuple[dict[str, tuple[str, str]], str | None]:
    """The rows (method -> (training s, inference s)) and date of an earlier page written by this script, if any."""
    if not path.is_file():
        return {}, None
    text = path.read_text(encoding="utf-8")
    date = re.search(r"^Date: (\S+)", text, flags=re.M)
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"[0-9.]+", cells[1]) and re.fullmatch(r"[0-9.]+", cells[2]):
            rows[cells[0]] = (cells[1], cells[2])
    return rows, date.group(1) if date else None


if __name__ == "__main__":
    main()
