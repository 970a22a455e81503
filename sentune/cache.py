"""On-disk array caches shared by methods (SG's frozen views, SED's ensemble targets): computed once,
written atomically (an interrupted run never leaves half a cache), then memory-mapped."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)


def cached_array(path: Path | None, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The array at `path` if it exists, else `compute()` saved there; no cache when path is None."""
    if path is None:
        return compute()
    if path.exists():
        logger.info("reusing cache %s", path)
        return np.load(path, mmap_mode="r")
    array = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        np.save(handle, array)
    tmp.rename(path)
    return np.load(path, mmap_mode="r")
