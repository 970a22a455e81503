"""ONNX Runtime, an optional dependency (`sentune[onnx]`): imported with a clear message when missing, and the
session settings every graph runs with."""

from __future__ import annotations

from pathlib import Path

import torch

from sentune.errors import UserError


def onnxruntime():
    """The onnxruntime module, or one line saying how to install it (an optional dependency)."""
    try:
        import onnx  # noqa: F401  (quantization and the exporter's checks read graphs with it)
        import onnxruntime as ort
    except ImportError:
        raise UserError("sentune export and the onnx backends need ONNX Runtime: pip install 'sentune[onnx]' (onnxruntime, onnx)") from None
    return ort


def session(path: Path, threads: int | None = None, spin: bool = True):
    """An ONNX Runtime CPU session: every graph optimisation on, `threads` (default: torch's thread count, which
    follows OMP_NUM_THREADS) inside each operator, operators run one after another (a transformer is a chain)."""
    ort = onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if not spin:  # its threads sleep when a run ends, not spin on the cores that PyTorch's next pass needs
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: its warnings about unused initialisers are noise here
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
