"""Speed of sentune's evaluation against the naive way, in one run on one machine.

(a) the full 7-task STS evaluation: sentune.tasks.evaluate vs. encoding each task's two sentence lists with
    SentenceTransformer.encode (its defaults) and scoring them; target ratio <= 0.35.
(b) raw encoding of the unique sentences of those tasks: sentune's Encoder vs SentenceTransformer.encode;
    target ratio >= 1.0 (throughput of ours over theirs).

Usage: python benchmarks/speed_eval.py [--data DIR] [--model default] [--repeats 1] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import platform
from datetime import UTC, datetime

import numpy as np
import torch
from common import command_block, emit, timed  # noqa: E402  (benchmarks/common.py)

from sentune.core.encode import Encoder
from sentune.core.models import load_model
from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
from sentune.tasks.evaluate import evaluate
from sentune.tasks.sts import evaluate_sts


def naive_sts(model, tasks, data_dir):
    out = {}
    for spec in tasks:
        examples = load_task(spec, data_dir)
        subsets = {}
        for name, pairs in examples.items():
            a = model.encode([p.a for p in pairs], convert_to_numpy=True)
            b = model.encode([p.b for p in pairs], convert_to_numpy=True)
            subsets[name] = (a, b, np.array([p.score for p in pairs]))
        out[spec.name] = evaluate_sts(subsets)["all"]["spearman"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data")
    parser.add_argument("--model", default="default")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data)
    model = load_model(args.model)
    tasks = select_tasks("sts")
    model.encode(["warm up the kernels"] * 64)

    naive_times, ours_times, bf16_times = [], [], []
    for _ in range(args.repeats):
        t, naive_scores = timed(lambda: naive_sts(model, tasks, data_dir))
        naive_times.append(t)
        t, ours = timed(lambda: evaluate(model, tasks, data_dir, poolings=["model"], show_progress=False))
        ours_times.append(t)
        t, ours_bf16 = timed(lambda: evaluate(model, tasks, data_dir, poolings=["model"], show_progress=False, precision="bf16"))
        bf16_times.append(t)

    def scores(result):
        return {n: r["all"]["spearman"] for n, r in result["runs"]["model"]["tasks"].items()}

    max_diff = max(abs(scores(ours)[n] - naive_scores[n]) for n in naive_scores)
    bf16_diff = max(abs(scores(ours_bf16)[n] - scores(ours)[n]) for n in naive_scores)

    sentences = []
    for spec in tasks:
        for pairs in load_task(spec, data_dir).values():
            sentences += [s for p in pairs for s in (p.a, p.b)]
    unique = list(dict.fromkeys(sentences))
    encoder = Encoder(model, "model", show_progress=False)
    st_time, _ = timed(lambda: model.encode(unique, convert_to_numpy=True))
    our_time, _ = timed(lambda: encoder.encode(unique))

    naive, mine, mine_bf16 = (float(np.median(t)) for t in (naive_times, ours_times, bf16_times))
    lines = [
        "# Evaluation speed: sentune vs the naive way",
        "",
        f"Date: {datetime.now(UTC).date()} · machine: {platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__} · model `{args.model}` · median of {args.repeats} run(s)",
        "",
        *command_block(),
        "| measurement | naive / sentence-transformers | sentune | ratio | target |",
        "|---|---|---|---|---|",
        f"| (a) 7-task STS evaluation, seconds (fp32, default) | {naive:.1f} | {mine:.1f} | {mine / naive:.3f} (time) | ≤ 0.35 |",
        f"| (a') same with `--precision bf16` (opt-in) | {naive:.1f} | {mine_bf16:.1f} | {mine_bf16 / naive:.3f} (time) | ≤ 0.35 |",
        f"| (b) encode {len(unique)} unique sentences, sentences/s | {len(unique) / st_time:.0f} | {len(unique) / our_time:.0f} | {st_time / our_time:.3f} (throughput) | ≥ 1.0 |",
        "",
        f"Sentences in the 7 tasks: {len(sentences)}, unique: {len(unique)} ({len(unique) / len(sentences):.2f}). "
        f"Largest difference between the naive and sentune fp32 'all' Spearman over the 7 tasks: {max_diff:.4f}; "
        f"between sentune fp32 and bf16: {bf16_diff:.4f}.",
        f"7-task average ('all' Spearman): naive {np.mean(list(naive_scores.values())):.2f}, sentune fp32 "
        f"{np.mean(list(scores(ours).values())):.2f}, bf16 {np.mean(list(scores(ours_bf16).values())):.2f}.",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
