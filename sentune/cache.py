"""On-disk array caches shared by methods (SG's frozen views, SED's ensemble targets): computed once,
written atomically (an interrupted run never leaves half a cache), then memory-mapped."""

from __future__ import annotations

import logging
import os
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
    # A unique temporary name: two runs sharing a cache folder (SENTUNE_CACHE) may build the same entry
    # at once; each renames a whole file into place, and the content is the same.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        np.save(handle, array)
    os.replace(tmp, path)
    return np.load(path, mmap_mode="r")
