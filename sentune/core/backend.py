"""Which engine computes a loaded model's token states: PyTorch, or an ONNX Runtime graph attached to the model by
sentune.core.onnx_runtime.use_backend (--backend onnx|onnx-int8). The Encoder asks this module, so the core never
imports the export package."""

from __future__ import annotations

RUNNER_ATTRIBUTE = "_sentune_onnx_runner"
# A model PyTorch runs may carry its exact ONNX graph (fp32) for batches of at most SMALL_BATCH_TEXTS texts: a server's
# one-client requests (sentune.core.onnx_runtime.use_small_batch_graph). Why: a forward pass over a text or two is
# mostly PyTorch's per-operator overhead, which ONNX Runtime does not pay, while from a few texts on PyTorch's lanes are
# faster (`benchmarks/speed/serve_lanes.py` times the three by batch size); the exact graph's vectors are PyTorch's
# to within EXACT_GRAPH_BOUND (checked when it is attached).
SMALL_RUNNER_ATTRIBUTE = "_sentune_small_batch_runner"
SMALL_BATCH_TEXTS = 3


def runner_of(model):
    """The attached OnnxRunner (callable: features -> features with token states), or None for PyTorch."""
    return getattr(model, RUNNER_ATTRIBUTE, None)


def small_batch_runner_of(model, texts: int):
    """The exact graph's runner for a batch of `texts` texts, when the model carries one and the batch is that small."""
    if texts > SMALL_BATCH_TEXTS or runner_of(model) is not None:
        return None
    return getattr(model, SMALL_RUNNER_ATTRIBUTE, None)


def backend_of(model) -> str:
    runner = runner_of(model)
    return runner.backend if runner is not None else "torch"
