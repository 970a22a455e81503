"""Which engine computes a loaded model's token states: PyTorch, or an ONNX Runtime graph attached to the model by
sentune.core.onnx_runtime.use_backend (--backend onnx|onnx-int8). The Encoder asks this module, so the core never
imports the export package."""

from __future__ import annotations

RUNNER_ATTRIBUTE = "_sentune_onnx_runner"


def runner_of(model):
    """The attached OnnxRunner (callable: features -> features with token states), or None for PyTorch."""
    return getattr(model, RUNNER_ATTRIBUTE, None)


def backend_of(model) -> str:
    runner = runner_of(model)
    return runner.backend if runner is not None else "torch"
