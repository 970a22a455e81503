"""`sentune.encode`: texts in, embeddings out, as `sentune encode` (the command reads its text file, calls `encode`
here, and writes the array as .npy or .jsonl)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sentune.api.common import Model, load_with_runtime
from sentune.errors import UserError

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)


def encode(
    model: Model,
    texts: Sequence[str],
    pooling: str = "model",
    *,
    source: str | None = None,
    backend: str = "torch",
    device: str | None = None,
    trust_remote_code: bool = False,
    show_progress: bool = False,
) -> np.ndarray:
    """The embeddings of `texts` (float32, one row per text, in order; a text repeated is encoded once), as `sentune encode`.

    Args:
        model: a name (`"default"`: all-MiniLM-L6-v2), a folder, or a `SentenceTransformer` in memory.
        texts: the texts; an empty string is encoded as one (row i stays text i).
        pooling: one pooling name: `model` (the model's own), `cls`, `mean`, `first-last`, `layerK-mean`, `wk`, ...
        source: the file the texts were read from, one a line: a warning about texts longer than the model's
            max_seq_length (they are truncated, as every evaluation does) then names `source:line`; else the text's index.
        backend: `torch`, `onnx` or `onnx-int8` (as `sentune encode --backend`).
    """
    if isinstance(texts, str):
        raise UserError("texts: a list of strings, not one string (encode([text]) for one)")
    bad = next((i for i, text in enumerate(texts) if not isinstance(text, str)), None)
    if bad is not None:
        raise UserError(f"texts[{bad}]: a {type(texts[bad]).__name__}, not a string")
    if "," in pooling:
        raise UserError(f"pooling {pooling}: one pooling name (encode once per pooling)")
    from sentune.core.encode import Encoder

    loaded, runtime = load_with_runtime(model, device=device, backend=backend, trust_remote_code=trust_remote_code)
    encoder = Encoder(loaded, pooling, show_progress=show_progress, runtime=runtime)
    vectors = encoder.encode(list(texts))
    if encoder.truncated_indices:
        where = [f"{source}:{i + 1}" if source else f"text {i}" for i in encoder.truncated_indices[:5]]
        logger.warning("%d texts longer than %s tokens were truncated: %s", len(encoder.truncated_indices), encoder.model.max_seq_length, ", ".join(where))
    return vectors
