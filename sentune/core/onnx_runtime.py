"""Running an exported transformer with ONNX Runtime in place of the PyTorch one (`--backend onnx|onnx-int8`).

`backend_runtime(model, backend)` is the Runtime (sentune.core.runtime) whose OnnxRunner computes a loaded
SentenceTransformer's token states; an Encoder given it sends every batch through the graph instead of model[0] (same
tokenization, the same length-sorted token-budget batches) and runs the model's other modules (pooling, Normalize,
whitening or flow heads) on its token states as usual. Nothing is attached to the model. The graph comes
from the model folder's `onnx/` (written by `sentune export`) when its recorded weights digest matches the loaded
weights, otherwise it is exported (and for int8 quantized) once into the cache, keyed by that digest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from sentune.core.onnx_session import session
from sentune.core.runtime import PYTORCH, Runtime, check_backend, check_on_cpu

logger = logging.getLogger(__name__)


class OnnxRunner:
    """model[0]'s forward on ONNX Runtime: features (tokenizer output) -> the same features plus token_embeddings and,
    when asked, all_layer_embeddings, as torch tensors (views of ONNX Runtime's arrays, no copy)."""

    def __init__(self, path: Path, backend: str, spin: bool = True) -> None:
        self.path, self.backend = Path(path), backend
        info = json.loads((self.path.parent / "export.json").read_text())
        self.inputs, self.outputs = info["inputs"], info["outputs"]
        self.session = session(self.path, spin=spin)
        self.digest = hashlib.sha256(self.path.read_bytes()).hexdigest()  # what the embedding cache keys these vectors by

    def __call__(self, features: dict, all_layers: bool = False) -> dict:
        feeds = {name: np.ascontiguousarray(features[name].numpy(), dtype=np.int64) for name in self.inputs}
        wanted = self.outputs if all_layers else self.outputs[:1]
        arrays = self.session.run(wanted, feeds)
        out = dict(features)
        out["token_embeddings"] = torch.from_numpy(arrays[0])
        if all_layers:
            out["all_layer_embeddings"] = tuple(torch.from_numpy(a) for a in arrays[1:])
        return out


def backend_runtime(model, backend: str, source: str | None = None) -> Runtime:
    """The Runtime that runs `model` (`source`: the folder it was loaded from, if any) on `backend`: PyTorch, or its
    ONNX graph for these weights (the folder's own, else the cache's, exported once)."""
    check_backend(backend)
    if backend == "torch":
        return PYTORCH
    check_on_cpu(backend, model)  # before a graph is exported for it
    return graph_runtime(graph_for(model, backend, source), backend)


def graph_runtime(path: Path, backend: str) -> Runtime:
    """The Runtime that runs the graph at `path` (the caller vouches that it is the model's it is given with)."""
    return Runtime(backend, graph=runner_for(Path(path), backend))


_LAST_RUNNER: dict[tuple, OnnxRunner] = {}  # the last graph's runner: scoring one model on dev then on test reuses it


def runner_for(path: Path, backend: str) -> OnnxRunner:
    """An OnnxRunner of the graph at `path`, the previous one when the same file (same size and modification time) is
    asked for again: its session and file digest cost about a second each time otherwise. One is kept, not more: each
    holds the graph's weights."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, backend)
    if key not in _LAST_RUNNER:
        _LAST_RUNNER.clear()
        _LAST_RUNNER[key] = OnnxRunner(path, backend)
    return _LAST_RUNNER[key]


def graph_for(model, backend: str, source: str | None) -> Path:
    """The model folder's own graph when it was exported from these weights, else the cache's (made on first use)."""
    from sentune.core.embedding_cache import model_digest
    from sentune.core.onnx_quantize import int8_name

    digest = model_digest(model)
    name = "model.onnx" if backend == "onnx" else int8_name()
    if source and (Path(source) / "onnx" / name).is_file():
        path = Path(source) / "onnx" / name
        recorded = json.loads((path.parent / "export.json").read_text()).get("digest") if (path.parent / "export.json").is_file() else None
        if recorded == digest:
            return path
        logger.warning("%s was exported from other weights than %s's (or by another tool); exporting again into the cache", path, source)
    return cached_graph(model, backend, digest)


def cached_graph(model, backend: str, digest: str) -> Path:
    """The cache's graph for these weights: `onnx-<digest>/model.onnx` (and the int8 file), made on first use. Each
    file is written in a scratch folder and moved into place, export.json before model.onnx: a reader never sees half
    a file or a graph without its description."""
    from sentune.core.cache import cache_dir
    from sentune.core.onnx_graph import GRAPH_INFO, export_onnx
    from sentune.core.onnx_quantize import DEFAULT_INT8, int8_name, quantize_int8

    folder = cache_dir() / f"onnx-{digest[:24]}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "model.onnx").is_file():
        logger.warning("exporting the model to ONNX once (cached in %s)", folder)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".export-") as scratch:
            export_onnx(model, Path(scratch) / "model.onnx", digest)
            os.replace(Path(scratch) / GRAPH_INFO, folder / GRAPH_INFO)
            os.replace(Path(scratch) / "model.onnx", folder / "model.onnx")
    if backend == "onnx":
        return folder / "model.onnx"
    name = int8_name()
    if not (folder / name).is_file():
        logger.warning(
            "quantizing it to int8 with sentune export's defaults (%s), unchecked: `sentune export --quantize int8 --check` measures the loss",
            DEFAULT_INT8.describe(),
        )
        with tempfile.TemporaryDirectory(dir=folder, prefix=".quantize-") as scratch:
            quantize_int8(folder / "model.onnx", Path(scratch) / name, DEFAULT_INT8)
            os.replace(Path(scratch) / name, folder / name)
    return folder / name
