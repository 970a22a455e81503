"""Giving memory that PyTorch freed on the CPU back to the system.

PyTorch allocates a CPU tensor's storage with malloc. glibc keeps freed chunks in its heaps for reuse instead of
returning them, and batches of ever-different shapes (token-budget batches, passages of every length) leave holes that
later requests do not fit: a long process's resident memory grows to several times what it uses. Measured on the SciFact
adapt example (2026-11-24, during its SED training): 4.96 GB resident with 0.38 GB in use by malloc; one
malloc_trim(0) brought it to 0.96 GB. release_freed_memory() is that call; the encoder runs it after long batches and every
16th short one (sentune.core.encode) and the trainer after every CPU step (sentune.train.trainer.FreeMemory), measured by
benchmarks/speed/training_memory.py.
"""

from __future__ import annotations

import ctypes
import gc
import sys


def _heap_trimmer():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to do
        return None


_TRIM = _heap_trimmer()


def release_freed_memory() -> bool:
    """Return the heap's free pages to the system; False where the C library has no malloc_trim (not glibc)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def release_unreferenced() -> bool:
    """Collect unreachable Python objects first (a finished candidate's trainer and model hold reference cycles), then
    release_freed_memory(): between the candidates of one `sentune adapt` run."""
    gc.collect()
    return release_freed_memory()


def peak_resident_mib() -> float | None:
    """This process's peak resident memory so far, in MiB (getrusage's ru_maxrss); None where there is no getrusage
    (Windows). `sentune adapt` writes it into every candidate's record, so a run's peak can be placed afterwards."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 / (1024 if sys.platform == "darwin" else 1)  # bytes on macOS, KiB elsewhere
