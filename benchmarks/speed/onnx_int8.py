"""int8 quantization choices for `sentune export --quantize int8`, measured on one machine in one run.

For each choice: the cosine of every int8 vector to its fp32 ONNX vector (mean, min) on the STS-B dev sentences,
STS-B dev and the 7-task STS average ('all' Spearman ×100) against fp32, encoding throughput over the 7 tasks'
unique sentences (sentences/s, ratio to fp32 ONNX) and the file's size. Then, for export's default, how much a
vector depends on the sentences batched with it (dynamic quantization scales each batch's activations together):
the cosine of each sentence encoded alone to the same sentence encoded in sentune's usual batches.

Usage: python benchmarks/speed/onnx_int8.py [--data DIR] [--model default] [--out FILE.md]
"""

from __future__ import annotations

import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

from sentune.analysis.pages import command_block, emit, parser_for, task_sentences, timed
from sentune.core.embedding_cache import model_digest
from sentune.core.encode import Encoder
from sentune.core.models import load_model
from sentune.core.onnx_graph import export_onnx
from sentune.core.onnx_quantize import DEFAULT_INT8, Int8Settings, cpu_arch, quantize_int8
from sentune.core.onnx_runtime import graph_runtime
from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
from sentune.tasks.evaluate import evaluate
from sentune.tasks.sts import cosine_scores

CHOICES = {
    "per-tensor (ONNX Runtime's default scales)": Int8Settings(per_channel=False),
    "per-channel (export's default)": DEFAULT_INT8,
    "per-channel, 7-bit weights (reduce_range)": Int8Settings(reduce_range=True),
    "per-channel, ffn-output fp32": Int8Settings(keep_fp32=("ffn-output",)),
    "per-channel, first layer fp32": Int8Settings(keep_fp32=("first-layer",)),
    "per-channel, last layer fp32": Int8Settings(keep_fp32=("last-layer",)),
}
ALONE = 300  # sentences encoded one by one for the batch-dependence row


def main() -> None:
    args = parser_for(__doc__).parse_args()
    data_dir = resolve_data_dir(args.data)
    tasks = select_tasks("sts")
    dev = select_tasks("STS-B-dev")
    model = load_model(args.model, device="cpu")
    _, dev_sentences = task_sentences(dev, data_dir)
    unique = list(dict.fromkeys(s for spec in tasks for pairs in load_task(spec, data_dir).values() for p in pairs for s in (p.a, p.b)))

    def measure(path: Path, backend: str) -> dict:
        runtime = graph_runtime(path, backend)
        encoder = Encoder(model, "model", show_progress=False, runtime=runtime)
        encoder.encode(unique[:256])  # warm-up
        seconds, _ = timed(lambda: encoder.encode(unique))
        row = {"vectors": encoder.encode(dev_sentences), "rate": len(unique) / seconds, "mib": path.stat().st_size / 2**20}
        row["dev"] = evaluate(model, dev, data_dir, show_progress=False, runtime=runtime)["runs"]["model"]["tasks"][dev[0].name]["all"]["spearman"]
        sts = evaluate(model, tasks, data_dir, show_progress=False, runtime=runtime)["runs"]["model"]["summary"]
        row["sts"] = sts["avg_all_spearman"]
        return row

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        fp32_path = export_onnx(model, folder / "model.onnx", model_digest(model))
        rows = {"fp32 ONNX": measure(fp32_path, "onnx")}
        paths = {}
        for name, settings in CHOICES.items():
            paths[name] = quantize_int8(fp32_path, folder / f"int8-{len(paths)}.onnx", settings)
            rows[name] = measure(paths[name], "onnx-int8")
        int8 = Encoder(model, "model", show_progress=False, runtime=graph_runtime(paths["per-channel (export's default)"], "onnx-int8"))
        batched = int8.encode(dev_sentences[:ALONE])
        alone = np.concatenate([int8.encode([s]) for s in dev_sentences[:ALONE]])
        fp32_graph = Encoder(model, "model", show_progress=False, runtime=graph_runtime(fp32_path, "onnx"))
        fp32_alone = np.concatenate([fp32_graph.encode([s]) for s in dev_sentences[:ALONE]])

    fp32 = rows["fp32 ONNX"]
    lines = [
        "# int8 quantization choices (`sentune export --quantize int8`)",
        "",
        f"Date: {datetime.now(UTC).date()} · machine: {platform.machine()} ({cpu_arch()}), {torch.get_num_threads()} threads, "
        f"torch {torch.__version__} · model `{args.model}`",
        "",
        *command_block(),
        f"Cosines: each of the {len(dev_sentences)} STS-B dev sentences' int8 vector to its fp32 ONNX vector. Speed: encoding the "
        f"{len(unique)} unique sentences of the 7 STS tasks. ONNX Runtime dynamic quantization of the MatMuls with constant weights "
        "(int8 weights, uint8 activations scaled per batch).",
        "",
        "| graph | cosine mean | cosine min | STS-B dev | change | 7-task avg | change | sent/s | × fp32 | MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        c = cosine_scores(row["vectors"], fp32["vectors"])
        lines.append(
            f"| {name} | {c.mean():.5f} | {c.min():.5f} | {row['dev']:.2f} | {row['dev'] - fp32['dev']:+.2f} | {row['sts']:.2f} | "
            f"{row['sts'] - fp32['sts']:+.2f} | {row['rate']:.0f} | {row['rate'] / fp32['rate']:.2f} | {row['mib']:.1f} |"
        )
    c_int8, c_fp32 = cosine_scores(alone, batched), cosine_scores(fp32_alone, fp32["vectors"][:ALONE])
    lines += [
        "",
        f"Batch dependence, the first {ALONE} dev sentences each encoded alone against the same sentence in sentune's batches: "
        f"int8 (export's default) cosine mean {c_int8.mean():.5f}, min {c_int8.min():.5f}; fp32 ONNX mean {c_fp32.mean():.7f}, "
        f"min {c_fp32.min():.7f}.",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
