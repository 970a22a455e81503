"""On-disk array caches shared by methods (SG's frozen views, SED's ensemble targets): computed once,
written atomically (an interrupted run never leaves half a cache), then memory-mapped.

They live in one folder, `SENTUNE_CACHE` or the user's cache folder (`$XDG_CACHE_HOME/sentune`, by default
`~/.cache/sentune`), never in run folders; entries are keyed by their content (model weights, sentences,
settings), so runs that need the same entry share it. `sentune cache list` shows them, `sentune cache clear
[--older-than DAYS]` removes them."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)


CACHE_ENV = "SENTUNE_CACHE"


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sentune"


def cache_entries(folder: Path | None = None) -> list[tuple[Path, int, float]]:
    """(path, bytes, age in days) of every entry, largest first (lock files are not entries)."""
    folder = folder or cache_dir()
    if not folder.is_dir():
        return []
    now = time.time()
    entries = [(p, p.stat().st_size, (now - p.stat().st_mtime) / 86400) for p in folder.glob("*.npy")]
    for graphs in folder.glob("onnx-*"):  # --backend onnx's exports (sentune.core.onnx_runtime): one folder per model
        if graphs.is_dir():
            size = sum(f.stat().st_size for f in graphs.rglob("*") if f.is_file())
            entries.append((graphs, size, (now - graphs.stat().st_mtime) / 86400))
    return sorted(entries, key=lambda e: -e[1])


def clear_cache(older_than_days: float = 0.0, folder: Path | None = None) -> list[Path]:
    """Remove the entries (and their lock files) older than `older_than_days`; returns what was removed."""
    removed = []
    for path, _, age in cache_entries(folder):
        if age >= older_than_days:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            path.unlink(missing_ok=True)
            path.with_name(f".{path.name}.lock").unlink(missing_ok=True)
            removed.append(path)
    return removed


def cached_array(path: Path | None, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The array at `path` if it exists, else `compute()` saved there; no cache when path is None.
    Processes sharing a cache folder (SENTUNE_CACHE, parallel pipeline workers) build an entry once: the
    builder holds a lock beside it, and a second process asking for it waits, then reuses the file."""
    if path is None:
        return compute()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_CREAT | os.O_RDWR)
        try:
            if not _try_lock(fd):
                logger.info("cache %s is being built by another process; waiting for it", path)
                fcntl.flock(fd, fcntl.LOCK_EX)
            if not path.exists():  # else the other process finished it while we waited
                _save(path, compute())
                return np.load(path, mmap_mode="r")
        finally:
            os.close(fd)  # releases the lock
    logger.info("reusing cache %s", path)
    return np.load(path, mmap_mode="r")


def read_rows(array: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """array[rows] as a new array. A cache is memory-mapped (cached_array), and every page of a memory map that a
    process has read stays counted in its resident memory until the map is closed: training samples rows at random,
    so over an epoch the whole file would be counted (SG-OPT's views of the SciFact passages: 237 MiB). Rows read
    with pread stay in the kernel's page cache, shared and reclaimable, and out of the process's resident memory."""
    if not isinstance(array, np.memmap) or array.filename is None or not array.flags.c_contiguous or array.mode != "r":
        return np.ascontiguousarray(array[rows])
    rows = np.asarray(rows)
    row_bytes = array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
    out = np.empty((len(rows), *array.shape[1:]), dtype=array.dtype)
    view = out.reshape(len(rows), -1).view(np.uint8)
    fd = os.open(array.filename, os.O_RDONLY)
    try:
        for index, row in enumerate(rows.tolist()):
            if not 0 <= row < len(array):
                raise IndexError(f"row {row} of a cache of {len(array)} rows ({array.filename})")
            view[index] = np.frombuffer(os.pread(fd, row_bytes, array.offset + row * row_bytes), dtype=np.uint8)
    finally:
        os.close(fd)
    return out


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _save(path: Path, array: np.ndarray) -> None:
    """Write whole or not at all: a temporary file renamed into place (an interrupted run leaves no half cache)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        np.save(handle, array)
    os.replace(tmp, path)
