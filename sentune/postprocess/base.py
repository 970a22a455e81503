"""What every post-processor offers (see sentune.postprocess for the registry)."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class PostProcessor(Protocol):
    # The constructor argument that `--whiten SET:N` / `--flow SET:N` sets, and how results label it:
    # whitening keeps N components ("whiten(nli,256)"), a flow takes N as its seed ("flow(wiki,seed=2)").
    label_name: str
    number_setting: str
    number_label: str

    def fit(self, x: np.ndarray) -> Any: ...

    def transform(self, x: np.ndarray) -> np.ndarray: ...

    def to_modules(self) -> list[Any]:
        """sentence-transformers modules computing transform() after the model's pooling."""
        ...
