"""ONNX fp32 against PyTorch for the default model and for models with a whitening or a flow head built on it.

Each model is saved (`sentune whiten` / `sentune flow`, fitted on the STS-B sentences), exported with `sentune export`
(checked on STS-B dev) and both backends encode the STS-B dev sentences under the model's own pipeline and under a
multi-layer pooling; the page gives the largest absolute difference of any vector component, the smallest cosine and
the STS-B dev Spearman of both. The issue's bound: 1e-5.

Usage: python benchmarks/speed/onnx_exact.py [--data DIR] [--out FILE.md]
"""

from __future__ import annotations

import platform
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

from sentune.analysis.pages import command_block, emit, parser_for, task_sentences
from sentune.cli import main as sentune
from sentune.core.encode import Encoder
from sentune.core.models import load_model_with_runtime
from sentune.data.catalog import resolve_data_dir, select_tasks
from sentune.tasks.sts import cosine_scores

BOUND = 1e-5


def main() -> None:
    args = parser_for(__doc__, model=False).parse_args()
    data_dir = resolve_data_dir(args.data)
    _, sentences = task_sentences(select_tasks("STS-B-dev"), data_dir)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        models = {"all-MiniLM-L6-v2": "default"}
        for head in ("whiten", "flow"):
            out = folder / head
            assert sentune([head, "--model", "default", "--pooling", "mean", "--fit-on", "stsb", "--data", str(data_dir), "--out", str(out), "--quiet"]) == 0
            models[f"+ {'whitening' if head == 'whiten' else 'flow'} head (mean pooling, fitted on STS-B)"] = str(out)
        for name, source in models.items():
            exported = folder / f"exported-{len(rows)}"
            assert sentune(["export", source, "--to", str(exported), "--check", "STS-B-dev", "--data", str(data_dir)]) == 0
            for pooling in ("model", "first-last"):
                vectors = {}
                for backend in ("torch", "onnx"):
                    model, runtime = load_model_with_runtime(str(exported), backend=backend)
                    vectors[backend] = Encoder(model, pooling, show_progress=False, runtime=runtime).encode(sentences).astype(np.float64)
                a, b = vectors["torch"], vectors["onnx"]
                cos = cosine_scores(a, b)
                rows.append((name, pooling, float(np.abs(a - b).max()), float(cos.min())))
    lines = [
        "# ONNX fp32 against PyTorch (`sentune export`, `--backend onnx`)",
        "",
        f"Date: {datetime.now(UTC).date()} · machine: {platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        "",
        *command_block(),
        f"The {len(sentences)} STS-B dev sentences encoded by both backends; bound {BOUND:g} on every vector component.",
        "",
        "| model | pooling | max abs difference | min cosine | within bound |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {name} | {pooling} | {diff:.2e} | {cos:.8f} | {'yes' if diff <= BOUND else 'NO'} |" for name, pooling, diff, cos in rows]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
