"""Retrieval evaluation of the default model on SciFact's 809 train claims against its 5,183 abstracts (issue 23).

Three runs on one machine: `sentune eval --tasks scifact-train` with an empty embedding cache (the corpus is encoded),
the same command again (the corpus is read from the cache), both in fresh processes timed with their peak memory
(/usr/bin/time); then sentence-transformers' InformationRetrievalEvaluator on the same queries, corpus and judgements,
whose metrics must equal sentune's within 1e-4.

Usage: python benchmarks/speed/retrieval_eval.py [--data DIR] [--model default] [--out FILE.md]
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

from sentune.analysis.pages import command_block, emit
from sentune.core.metrics import ranking_metrics
from sentune.data.catalog import load_task, resolve_data_dir, select_tasks

RANKING = [m.name for m in ranking_metrics()]

TASK = "scifact-train"


def timed_eval(model: str, data_dir: Path, out: Path, cache: Path) -> tuple[float, float, dict]:
    """(seconds, peak MiB, the task's result) of one `sentune eval` process."""
    command = [sys.executable, "-m", "sentune", "eval", "--model", model, "--tasks", TASK, "--data", str(data_dir), "--out", str(out), "--quiet"]
    env = {**os.environ, "SENTUNE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "peak-kb %M", *command], env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sentune eval failed:\n{done.stderr[-3000:]}")
    peak_kb = int(next(line for line in done.stderr.splitlines() if line.startswith("peak-kb")).split()[1])
    result = json.loads((out / "results.json").read_text())["runs"]["model"]["tasks"][TASK]
    return seconds, peak_kb / 1024, result


def evaluator_metrics(model_name: str, data_dir: Path) -> tuple[float, dict]:
    from sentune.core.models import load_model
    from sentune.data.beir import RetrievalSet
    from sentune.tasks.retrieval import reference_evaluator

    data = RetrievalSet(**load_task(select_tasks(TASK)[0], data_dir))
    evaluator = reference_evaluator(data.queries, data.corpus, show_progress=True)
    model = load_model(model_name)
    started = time.perf_counter()
    scores = evaluator(model)
    return time.perf_counter() - started, {name: 100 * scores[f"cosine_{name}"] for name in RANKING}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="data directory (default: SENTUNE_DATA)")
    parser.add_argument("--model", default="default")
    parser.add_argument("--out", help="write the Markdown page here")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data)
    with tempfile.TemporaryDirectory(prefix="sentune-retrieval-bench-") as root:
        cache = Path(root) / "cache"
        cold = timed_eval(args.model, data_dir, Path(root) / "cold", cache)
        warm = timed_eval(args.model, data_dir, Path(root) / "warm", cache)
    evaluator_seconds, expected = evaluator_metrics(args.model, data_dir)
    result = cold[2]
    differences = {name: abs(result[name] - expected[name]) for name in RANKING}
    lines = [
        f"# Retrieval evaluation: {TASK} (issue 23)",
        "",
        f"Measured {datetime.now(UTC).date()} on {platform.machine()}, {os.cpu_count()} CPU cores; model `{args.model}`; "
        f"{result['n_queries']} queries, {result['n_documents']} documents (title + text), exact cosine search.",
        "",
        *command_block(),
        "## Metrics ×100: sentune against sentence-transformers' InformationRetrievalEvaluator",
        "",
        "| metric | sentune eval | InformationRetrievalEvaluator | difference |",
        "|---|---|---|---|",
        *(f"| {name} | {result[name]:.4f} | {expected[name]:.4f} | {differences[name]:.1e} |" for name in RANKING),
        "",
        f"Largest difference {max(differences.values()):.1e} (×100 scale; required ≤ 1e-2, i.e. 1e-4 on BEIR's 0-1 scale): "
        + ("**equal**." if max(differences.values()) <= 1e-2 else "**NOT equal**."),
        "",
        "## Time and memory of `sentune eval --tasks scifact-train` (a fresh process each, model loading included)",
        "",
        "| run | seconds | peak memory (MiB) | nDCG@10 |",
        "|---|---|---|---|",
        f"| empty cache: the corpus is encoded | {cold[0]:.1f} | {cold[1]:.0f} | {cold[2]['ndcg@10']:.2f} |",
        f"| same model again: the corpus is read from the cache | {warm[0]:.1f} | {warm[1]:.0f} | {warm[2]['ndcg@10']:.2f} |",
        f"| InformationRetrievalEvaluator (in-process, encoding included) | {evaluator_seconds:.1f} | — | {expected['ndcg@10']:.2f} |",
        "",
        f"Peak memory stays under 2 GB: {'yes' if max(cold[1], warm[1]) < 2048 else 'NO'}.",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
