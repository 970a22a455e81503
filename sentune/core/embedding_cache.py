"""Embeddings of long texts (a retrieval corpus) cached by content: encoded once per model, read back after.

The key covers everything the vectors depend on: every weight of every module of the model (a full sha256, not a
sample: a fine-tuned model that differs in one layer must not read its parent's vectors), the modules' classes and
configurations, max_seq_length, the poolings, the precision, the digest of the runtime's graph when one computes every
batch (--backend onnx|onnx-int8: an int8 graph gives other vectors), and the texts in order. A PyTorch runtime adds
nothing to the key, nor do lanes and the small-batch graph: they give PyTorch's vectors (to about 1e-7, and within the
small-batch graph's checked bound). Entries live in the method cache (sentune.core.cache: `SENTUNE_CACHE`, `sentune
cache list/clear`), one float32 array per pooling plus the indices of the texts that were truncated, written atomically.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

import numpy as np
import torch

from sentune.core.cache import cache_dir, cached_array
from sentune.core.encode import Encoder


def model_digest(model) -> str:
    """sha256 of a SentenceTransformer's weights, module classes and configurations (about 0.3 s for all-MiniLM-L6-v2)."""
    digest = hashlib.sha256()
    for module in model:
        config: dict = getattr(module, "get_config_dict", dict)()
        digest.update(f"{type(module).__module__}.{type(module).__name__}:{json.dumps(config, sort_keys=True, default=str)}".encode())
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(str(tensor.dtype).encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _texts_key(encoder: Encoder, texts: Sequence[str]) -> str:
    digest = hashlib.sha256(model_digest(encoder.model).encode())
    graph = encoder.runtime.graph  # --backend onnx|onnx-int8: the graph's own digest
    settings = {"poolings": encoder.pooling_names, "precision": encoder.precision, "max_seq_length": encoder.model.max_seq_length}
    if graph is not None:
        settings["graph"] = graph.digest
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()[:24]


def _vector_paths(encoder: Encoder, key: str) -> dict:
    """Where an entry's vectors live, one file per pooling."""
    return {name: cache_dir() / f"embeddings-{key}-{index}.npy" for index, name in enumerate(encoder.pooling_names)}


def encode_cached(encoder: Encoder, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], list[int]]:
    """(vectors by pooling, indices of the truncated texts) for `texts`, from the cache when this exact computation ran
    before, else encoded and stored."""
    key = _texts_key(encoder, texts)
    paths = _vector_paths(encoder, key)
    truncated_path = cache_dir() / f"embeddings-{key}-truncated.npy"
    computed: dict[str, np.ndarray] = {}

    def compute_all() -> dict[str, np.ndarray]:
        if not computed:
            computed.update(encoder.encode_many(texts))
            computed["__truncated__"] = np.asarray(encoder.truncated_indices, dtype=np.int64)
        return computed

    def part(name: str) -> Callable[[], np.ndarray]:
        return lambda: compute_all()[name]

    # each array is written whole or not at all; an entry missing any of them is encoded again
    vectors = {name: cached_array(path, part(name)) for name, path in paths.items()}
    truncated = cached_array(truncated_path, part("__truncated__"))
    return vectors, [int(i) for i in truncated]


def cached_only(encoder: Encoder, texts: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The vectors by pooling of `texts` when encode_cached stored this exact computation before (every pooling's
    file present), else None; never encodes. `sentune index` reads what `sentune eval` on the same corpus encoded."""
    paths = _vector_paths(encoder, _texts_key(encoder, texts))
    if not all(path.is_file() for path in paths.values()):
        return None
    return {name: np.load(path) for name, path in paths.items()}
