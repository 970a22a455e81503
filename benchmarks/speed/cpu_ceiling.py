"""How fast can any fp32 engine encode on this CPU? The arithmetic ceiling behind issue 24's fp32 targets.

An encoder must do the transformer's matrix products; no engine does them faster than the CPU's own best matrix
product. This script measures, in one run on one machine:

(1) the fp32 (and bf16) rate of torch's matrix product at the model's own shapes (a token-budget batch of rows times
    the attention and feed-forward weights) and at a large square size (the best the library reaches);
(2) the model FLOPs of encoding the unique sentences of the 7 STS tasks (speed_eval.py's set (b)), counted from
    their token lengths without padding: per layer and token 2·(4d² + 2·d·f) for the projections and feed-forward,
    plus 4·n·d for the attention products of a sentence of n tokens;
(3) the throughput of sentence-transformers' PyTorch encode, sentune's Encoder on PyTorch and on the ONNX fp32 graph,
    and on the same graph after ONNX Runtime's transformer optimizer (exported with eager attention so that its
    Attention, SkipLayerNormalization, BiasGelu and EmbedLayerNormalization fusions apply).

Ceiling: the FLOPs of (2) done at the model-shape rate of (1) with nothing else costing time. Its ratio to
sentence-transformers' throughput bounds the speed-up any fp32 engine can have here.

Usage: python benchmarks/speed/cpu_ceiling.py [--data DIR] [--model default] [--out FILE.md]
"""

from __future__ import annotations

import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

from sentune.analysis.pages import command_block, cpu_name, emit, parser_for, task_sentences, timed
from sentune.core.encode import Encoder
from sentune.core.models import load_model, load_model_with_runtime
from sentune.core.onnx_graph import export_onnx, transformer_of
from sentune.core.onnx_runtime import graph_runtime
from sentune.data.catalog import resolve_data_dir, select_tasks

ROWS = 4096  # a CPU token-budget batch (sentune's Encoder: 4096 padded tokens)


def matmul_rate(m: int, k: int, n: int, dtype: torch.dtype, seconds: float = 1.0) -> float:
    """Best GFLOP/s of (m×k)·(k×n) over three windows of about `seconds` each."""
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    torch.matmul(a, b)
    best = 0.0
    for _ in range(3):
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            torch.matmul(a, b)
            count += 1
        best = max(best, 2 * m * k * n * count / (time.perf_counter() - start) / 1e9)
    return best


def model_shape_rate(d: int, f: int, dtype: torch.dtype) -> float:
    """GFLOP/s over one layer's products at ROWS rows, weighted by their FLOPs (4 of d×d, one d×f, one f×d)."""
    shapes = [(ROWS, d, d, 4), (ROWS, d, f, 1), (ROWS, f, d, 1)]
    flops = sum(2 * m * k * n * times for m, k, n, times in shapes)
    seconds = sum(2 * m * k * n * times / (matmul_rate(m, k, n, dtype) * 1e9) for m, k, n, times in shapes)
    return flops / seconds / 1e9


def model_flops(lengths: np.ndarray, layers: int, d: int, f: int) -> float:
    per_token = layers * 2 * (4 * d * d + 2 * d * f)
    attention = layers * 4 * d * (lengths.astype(np.float64) ** 2)
    return float(per_token * lengths.sum() + attention.sum())


def fused_graph(model, folder: Path) -> Path:
    """The model's graph exported with eager attention and run through ONNX Runtime's transformer optimizer."""
    from onnxruntime.transformers.optimizer import optimize_model

    hf = transformer_of(model)
    implementation = hf.config._attn_implementation
    hf.set_attn_implementation("eager")  # the sdpa export's NaN guards hide the attention pattern from the fusion
    try:
        export_onnx(model, folder / "eager.onnx", "benchmark")
    finally:
        hf.set_attn_implementation(implementation)
    config = hf.config
    optimized = optimize_model(str(folder / "eager.onnx"), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size, opt_level=0)
    fused = {op: count for op, count in optimized.get_fused_operator_statistics().items() if count}
    optimized.save_model_to_file(str(folder / "model.onnx"))
    (folder / "fused.txt").write_text(", ".join(f"{op} {count}" for op, count in fused.items()))
    return folder / "model.onnx"


def main() -> None:
    args = parser_for(__doc__).parse_args()
    _, unique = task_sentences(select_tasks("sts"), resolve_data_dir(args.data))
    st_model = load_model(args.model)
    config = transformer_of(st_model).config
    layers, d, f = config.num_hidden_layers, config.hidden_size, config.intermediate_size
    lengths = np.minimum(Encoder(st_model, "model", show_progress=False).token_lengths(unique), st_model.max_seq_length)
    flops = model_flops(lengths, layers, d, f)

    rates = {
        ("fp32", "model shapes"): model_shape_rate(d, f, torch.float32),
        ("fp32", "2048³"): matmul_rate(2048, 2048, 2048, torch.float32),
        ("bf16", "model shapes"): model_shape_rate(d, f, torch.bfloat16),
        ("bf16", "2048³"): matmul_rate(2048, 2048, 2048, torch.bfloat16),
    }
    with tempfile.TemporaryDirectory() as scratch:
        engines = {
            "sentence-transformers PyTorch": None,
            "sentune PyTorch": load_model_with_runtime(args.model),
            "sentune ONNX fp32": load_model_with_runtime(args.model, backend="onnx"),
        }
        fused = load_model(args.model)
        engines["sentune ONNX fp32, fused graph"] = (fused, graph_runtime(fused_graph(fused, Path(scratch)), "onnx"))
        fused_ops = (Path(scratch) / "fused.txt").read_text()
        throughput = {}
        for name, engine in engines.items():
            if engine is None:
                st_model.encode(unique[:256])
                seconds, _ = timed(lambda: st_model.encode(unique, convert_to_numpy=True))
            else:
                model, runtime = engine
                encoder = Encoder(model, "model", show_progress=False, runtime=runtime)
                encoder.encode(unique[:256])
                seconds, _ = timed(lambda e=encoder: e.encode(unique))
            throughput[name] = (len(unique) / seconds, flops / seconds / 1e9)

    st_rate = throughput["sentence-transformers PyTorch"][0]
    ceiling = rates[("fp32", "model shapes")] * 1e9 / flops * len(unique)
    lines = [
        "# The fp32 ceiling of encoding on this CPU",
        "",
        f"Date: {datetime.now(UTC).date()} · machine: {platform.machine()}, {cpu_name()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__} · model `{args.model}` ({layers} layers, d {d}, feed-forward {f})",
        "",
        *command_block(),
        f"Work: the {len(unique)} unique sentences of the 7 STS tasks, {int(lengths.sum())} tokens without padding "
        f"(mean {lengths.mean():.1f}), {flops / 1e12:.2f} TFLOP of matrix products.",
        "",
        "## (1) Matrix-product rate of this CPU (torch.matmul, best of 3 windows of 1 s)",
        "",
        "| precision | shapes | GFLOP/s |",
        "|---|---|---|",
        *[f"| {precision} | {shapes} | {rate:.0f} |" for (precision, shapes), rate in rates.items()],
        "",
        f"Model shapes: {ROWS} rows times the layer's weights (4 of {d}×{d}, {d}×{f}, {f}×{d}), weighted by their FLOPs.",
        "",
        "## (2) Encoding throughput and the FLOP rate it reaches",
        "",
        "| engine | sent/s | ratio to sentence-transformers | GFLOP/s (unpadded work) | share of the fp32 model-shape rate |",
        "|---|---|---|---|---|",
        *[
            f"| {name} | {rate:.0f} | {rate / st_rate:.2f} | {gflops:.0f} | {gflops / rates[('fp32', 'model shapes')]:.2f} |"
            for name, (rate, gflops) in throughput.items()
        ],
        f"| ceiling: every product at the fp32 model-shape rate, nothing else | {ceiling:.0f} | {ceiling / st_rate:.2f} | "
        f"{rates[('fp32', 'model shapes')]:.0f} | 1.00 |",
        "",
        f"Fused graph's operators (ONNX Runtime's transformer optimizer): {fused_ops}.",
        "",
        f"Issue 24's fp32 targets need {2 * st_rate:.0f} sent/s (2× sentence-transformers); the ceiling above is "
        f"{ceiling / st_rate:.2f}× sentence-transformers.",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
