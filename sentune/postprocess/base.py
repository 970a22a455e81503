"""What every post-processor offers (sentune.postprocess.POSTPROCESSORS registers it: its names, settings and how
`--WORD SET:N` sets and labels N)."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class PostProcessor(Protocol):
    def fit(self, x: np.ndarray) -> Any: ...

    def transform(self, x: np.ndarray) -> np.ndarray: ...

    def to_modules(self) -> list[Any]:
        """sentence-transformers modules computing transform() after the model's pooling."""
        ...
