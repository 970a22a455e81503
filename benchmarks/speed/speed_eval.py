"""Speed of sentune's evaluation and encoding against the naive way, every backend in one run on one machine.

(a) the full 7-task STS evaluation: sentune.tasks.evaluate under each backend vs encoding each task's two sentence
    lists with SentenceTransformer.encode (its defaults) and scoring them; target: ≤ 0.35× the naive time with the same
    7-task average (±0.01) for ONNX fp32.
(b) raw encoding of the unique sentences of those tasks: sentune's Encoder under each backend vs
    SentenceTransformer.encode; targets: ONNX fp32 ≥ 2× sentence-transformers' throughput, ONNX int8 ≥ 3× with its
    7-task average within 0.5 points of fp32.

Backends: PyTorch fp32 (the default), PyTorch bf16 autocast (--precision bf16), ONNX fp32 and ONNX int8 (--backend
onnx / onnx-int8: `sentune export`'s graphs, made once into the cache before timing; int8 with export's default
settings). Every timing is the median of --repeats runs, each backend's runs interleaved with the others'.

Usage: python benchmarks/speed/speed_eval.py [--data DIR] [--model default] [--repeats 1] [--out FILE.md] [--json FILE]
(--json: every engine's per-task scores, times and rates as a results.json that a renderer reads, e.g. second_model.md's)
"""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

from sentune.analysis.pages import command_block, command_line, emit, parser_for, task_sentences, timed
from sentune.core.encode import Encoder
from sentune.core.models import load_model, load_model_with_runtime
from sentune.core.onnx_quantize import DEFAULT_INT8
from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
from sentune.tasks.evaluate import evaluate
from sentune.tasks.sts import evaluate_sts

VARIANTS = {  # name -> (backend, precision)
    "sentune PyTorch fp32": ("torch", "fp32"),
    "sentune PyTorch bf16": ("torch", "bf16"),
    "sentune ONNX fp32": ("onnx", "fp32"),
    "sentune ONNX int8": ("onnx-int8", "fp32"),
}


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


def task_scores(result) -> dict[str, float]:
    return {n: r["all"]["spearman"] for n, r in result["runs"]["model"]["tasks"].items()}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=[n for n in VARIANTS if n != "sentune PyTorch fp32"],
        help="engines left out (a larger model's run: each costs a full pass)",
    )
    parser.add_argument("--encode-sample", type=int, help="(b) on the first N unique sentences only (a larger model's run; default: all)")
    parser.add_argument("--json", help="also write the measurements as JSON (a kept results.json: meta, scores, seconds, rates)")
    args = parser.parse_args()
    variants = {name: setting for name, setting in VARIANTS.items() if name not in args.skip}
    data_dir = resolve_data_dir(args.data)
    tasks = select_tasks("sts")
    st_model = load_model(args.model)
    models = {name: load_model_with_runtime(args.model, backend=backend) for name, (backend, _) in variants.items()}  # graphs exported here, untimed
    sentences, unique = task_sentences(tasks, data_dir)
    timed_sentences = unique[: args.encode_sample] if args.encode_sample else unique  # what (b) encodes
    for name, (model, runtime) in models.items():  # warm up each engine's kernels
        Encoder(model, "model", show_progress=False, precision=variants[name][1], runtime=runtime).encode(unique[:256])
    st_model.encode(unique[:256])

    eval_times: dict[str, list[float]] = {"naive": [], **{name: [] for name in variants}}
    encode_times: dict[str, list[float]] = {"sentence-transformers": [], **{name: [] for name in variants}}
    scores: dict[str, dict[str, float]] = {}
    for _ in range(args.repeats):
        t, scores["naive"] = timed(lambda: naive_sts(st_model, tasks, data_dir))
        eval_times["naive"].append(t)
        t, _ = timed(lambda: st_model.encode(timed_sentences, convert_to_numpy=True))
        encode_times["sentence-transformers"].append(t)
        for name, (_, precision) in variants.items():
            model, runtime = models[name]
            t, result = timed(
                lambda m=model, p=precision, r=runtime: evaluate(m, tasks, data_dir, poolings=["model"], show_progress=False, precision=p, runtime=r)
            )
            eval_times[name].append(t)
            scores[name] = task_scores(result)
            encoder = Encoder(model, "model", show_progress=False, precision=precision, runtime=runtime)
            t, _ = timed(lambda e=encoder: e.encode(timed_sentences))
            encode_times[name].append(t)

    median = {name: float(np.median(times)) for name, times in eval_times.items()}
    rate = {name: len(timed_sentences) / float(np.median(times)) for name, times in encode_times.items()}
    average = {name: float(np.mean(list(s.values()))) for name, s in scores.items()}
    base = "sentune PyTorch fp32"
    targets = {
        "sentune PyTorch fp32": ("≤ 0.35", "≥ 1.0", ""),
        "sentune PyTorch bf16": ("≤ 0.35", "", ""),
        "sentune ONNX fp32": ("≤ 0.35", "≥ 2.0", "±0.01"),
        "sentune ONNX int8": ("", "≥ 3.0", "≥ −0.5"),
    }
    lines = [
        "# Evaluation and encoding speed: sentune's backends vs the naive way",
        "",
        f"Date: {datetime.now(UTC).date()} · machine: {platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__} · model `{args.model}` · median of {args.repeats} run(s) · int8: {DEFAULT_INT8.describe()}",
        "",
        *command_block(),
        f"(a) the 7-task STS evaluation (seconds, ratio to the naive time); (b) encoding {'the' if len(timed_sentences) == len(unique) else f'the first {len(timed_sentences)} of the'} {len(unique)} unique sentences of those tasks "
        "(sentences/s, ratio to sentence-transformers' PyTorch); the 7-task average ('all' Spearman ×100) and its change from sentune PyTorch fp32.",
        "",
        "| engine | (a) eval s | (a) ratio | target | (b) sent/s | (b) ratio | target | 7-task avg | change | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| naive / sentence-transformers PyTorch | {median['naive']:.1f} | 1.000 | | {rate['sentence-transformers']:.0f} | 1.00 | | "
        f"{average['naive']:.2f} | {average['naive'] - average[base]:+.3f} | |",
    ]
    for name in variants:
        a_target, b_target, avg_target = targets[name]
        lines.append(
            f"| {name} | {median[name]:.1f} | {median[name] / median['naive']:.3f} | {a_target} | {rate[name]:.0f} | "
            f"{rate[name] / rate['sentence-transformers']:.2f} | {b_target} | {average[name]:.2f} | {average[name] - average[base]:+.3f} | {avg_target} |"
        )
    worst = {name: max(abs(scores[name][t] - scores[base][t]) for t in scores[base]) for name in variants}
    lines += [
        "",
        f"Sentences in the 7 tasks: {len(sentences)}, unique: {len(unique)} ({len(unique) / len(sentences):.2f}). Largest difference of one task's "
        "'all' Spearman from sentune PyTorch fp32: " + ", ".join(f"{name} {worst[name]:.4f}" for name in variants if name != base) + ".",
    ]
    emit(lines, args.out)
    if args.json:
        measured = {
            "meta": {"command": command_line(), "date": datetime.now(UTC).isoformat(timespec="seconds"), "model": args.model},
            "threads": torch.get_num_threads(),
            "repeats": args.repeats,
            "unique_sentences": len(unique),
            "encoded_sentences": len(timed_sentences),  # (b)'s
            "scores": scores,  # engine ("naive": SentenceTransformer.encode) -> task -> 'all' Spearman ×100
            "eval_seconds": median,
            "sentences_per_second": rate,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
