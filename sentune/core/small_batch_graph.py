"""A model PyTorch runs on the CPU, with its exact ONNX graph (fp32) for batches of a text or two: why, in
sentune.core.runtime (SMALL_BATCH_TEXTS). `sentune serve` puts it in the server's Runtime by default when ONNX Runtime is
installed (`--small-batches`); every Encoder given that runtime then sends such a batch through it, the server's own and
its search index's query encoding. Larger batches, training and every other command run on PyTorch as before.

The graph is the one `--backend onnx` runs (the model folder's `onnx/model.onnx` when it was exported from these
weights, else the cache's, exported once). Before it is used, a few texts are encoded one at a time both ways: a graph
whose vectors differ from PyTorch's by more than EXACT_GRAPH_BOUND on any component is not used.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from sentune.core.runtime import SMALL_BATCH_TEXTS, Runtime
from sentune.errors import UserError

logger = logging.getLogger(__name__)

EXACT_GRAPH_BOUND = 1e-5  # |graph - PyTorch| on any vector component (the bound of benchmarks/results/onnx_exact.md)
# encoded one at a time and together (a padded batch of SMALL_BATCH_TEXTS texts), both ways
CHECK_TEXTS = ("warm up", "a man plays the guitar", "a man plays the guitar while the others sing along in the park on a sunny afternoon")


def with_small_batch_graph(model, runtime: Runtime, source: str | None, *, required: bool) -> Runtime:
    """`runtime` with the exact graph for small batches of `model` (`source`: the folder it was loaded from, if any),
    once its vectors are checked; `runtime` itself when it is not used. Without ONNX Runtime, on a GPU, or when the graph
    cannot be made or does not give the model's vectors: not used, with a warning for the last two; `required` raises
    UserError instead."""
    from sentune.core.onnx_runtime import OnnxRunner, graph_for
    from sentune.core.onnx_session import onnxruntime

    if model.device.type != "cpu" or runtime.graph is not None:
        if required:
            raise UserError(
                f"--small-batches onnx: the model runs on {model.device} with {'a graph' if runtime.graph is not None else 'PyTorch'}; it is for PyTorch on the CPU"
            )
        return runtime
    try:
        onnxruntime()
    except UserError:
        if required:
            raise
        return runtime
    try:
        runner = OnnxRunner(graph_for(model, "onnx", source), "onnx", spin=False)  # PyTorch runs the next batch, likely
        candidate = dataclasses.replace(runtime, small_batch_graph=runner)
        difference = _difference(model, runtime, candidate)
    except Exception as exc:  # a graph that cannot be made or run: PyTorch computes every batch, as before
        if required:
            raise UserError(f"--small-batches onnx: the model's ONNX graph could not be made or run ({exc})") from exc
        logger.warning("small batches run on PyTorch: the model's ONNX graph could not be made or run (%s)", exc)
        return runtime
    if difference <= EXACT_GRAPH_BOUND:
        return candidate
    message = f"the model's ONNX graph gives vectors {difference:.1e} away from PyTorch's (more than {EXACT_GRAPH_BOUND:g})"
    if required:
        raise UserError(f"--small-batches onnx: {message}")
    logger.warning("small batches run on PyTorch: %s", message)
    return runtime


def _difference(model, runtime: Runtime, candidate: Runtime) -> float:
    """The largest |graph - PyTorch| over CHECK_TEXTS' vectors, each text alone and all of them as one batch."""
    from sentune.core.encode import Encoder

    def vectors(runtime: Runtime) -> np.ndarray:
        encoder = Encoder(model, "model", show_progress=False, runtime=runtime)
        return np.concatenate([*(encoder.encode([text]) for text in CHECK_TEXTS), encoder.encode(list(CHECK_TEXTS[:SMALL_BATCH_TEXTS]))])

    return float(np.abs(vectors(candidate) - vectors(runtime)).max())
