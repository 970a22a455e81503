"""A model PyTorch runs on the CPU, with its exact ONNX graph (fp32) for batches of a text or two: why, in
sentune.core.backend (SMALL_BATCH_TEXTS). `sentune serve` attaches it by default when ONNX Runtime is installed
(`--small-batches`); every Encoder of the model then sends such a batch through it, the server's own and the one a
search index makes for its queries. Larger batches, training and every other command run on PyTorch as before.

The graph is the one `--backend onnx` runs (the model folder's `onnx/model.onnx` when it was exported from these
weights, else the cache's, exported once). Before it is used, a few texts are encoded one at a time both ways: a graph
whose vectors differ from PyTorch's by more than EXACT_GRAPH_BOUND on any component is not used.
"""

from __future__ import annotations

import logging

import numpy as np

from sentune.core.backend import SMALL_BATCH_TEXTS, SMALL_RUNNER_ATTRIBUTE, runner_of
from sentune.errors import UserError

logger = logging.getLogger(__name__)

EXACT_GRAPH_BOUND = 1e-5  # |graph - PyTorch| on any vector component (the bound of benchmarks/results/onnx_exact.md)
# encoded one at a time and together (a padded batch of SMALL_BATCH_TEXTS texts), both ways
CHECK_TEXTS = ("warm up", "a man plays the guitar", "a man plays the guitar while the others sing along in the park on a sunny afternoon")


def use_small_batch_graph(model, source: str | None, *, required: bool) -> bool:
    """Attach the exact graph for small batches to `model` (`source`: the folder it was loaded from, if any) once its
    vectors are checked; whether it was attached. Without ONNX Runtime, on a GPU, or when the graph cannot be made or
    does not give the model's vectors: not attached, with a warning for the last two; `required` raises UserError instead.
    """
    from sentune.core.onnx_runtime import OnnxRunner, graph_for
    from sentune.core.onnx_session import onnxruntime

    if model.device.type != "cpu" or runner_of(model) is not None:
        if required:
            raise UserError(
                f"--small-batches onnx: the model runs on {model.device} with {'a graph' if runner_of(model) else 'PyTorch'}; it is for PyTorch on the CPU"
            )
        return False
    try:
        onnxruntime()
    except UserError:
        if required:
            raise
        return False
    try:
        runner = OnnxRunner(graph_for(model, "onnx", source), "onnx", spin=False)  # PyTorch runs the next batch, likely
        difference = _difference_with(model, runner)
    except Exception as exc:  # a graph that cannot be made or run: PyTorch computes every batch, as before
        if getattr(model, SMALL_RUNNER_ATTRIBUTE, None) is not None:
            delattr(model, SMALL_RUNNER_ATTRIBUTE)
        if required:
            raise UserError(f"--small-batches onnx: the model's ONNX graph could not be made or run ({exc})") from exc
        logger.warning("small batches run on PyTorch: the model's ONNX graph could not be made or run (%s)", exc)
        return False
    if difference <= EXACT_GRAPH_BOUND:
        return True
    delattr(model, SMALL_RUNNER_ATTRIBUTE)
    message = f"the model's ONNX graph gives vectors {difference:.1e} away from PyTorch's (more than {EXACT_GRAPH_BOUND:g})"
    if required:
        raise UserError(f"--small-batches onnx: {message}")
    logger.warning("small batches run on PyTorch: %s", message)
    return False


def _difference_with(model, runner) -> float:
    """The largest |graph - PyTorch| over CHECK_TEXTS' vectors, each text alone and all of them as one batch; the
    runner is left attached."""
    from sentune.core.encode import Encoder

    encoder = Encoder(model, "model", show_progress=False)

    def vectors() -> np.ndarray:
        return np.concatenate([*(encoder.encode([text]) for text in CHECK_TEXTS), encoder.encode(list(CHECK_TEXTS[:SMALL_BATCH_TEXTS]))])

    expected = vectors()
    setattr(model, SMALL_RUNNER_ATTRIBUTE, runner)
    return float(np.abs(vectors() - expected).max())


def small_batches_of(model) -> str:
    """What computes a batch of a text or two: 'onnx' (the exact graph), or the model's own backend."""
    from sentune.core.backend import backend_of

    return "onnx" if getattr(model, SMALL_RUNNER_ATTRIBUTE, None) is not None else backend_of(model)
