"""Giving memory that PyTorch freed on the CPU back to the system.

PyTorch allocates a CPU tensor's storage with malloc. glibc keeps freed chunks in its heaps for reuse instead of
returning them, and batches of ever-different shapes (token-budget batches, passages of every length) leave holes that
later requests do not fit: a long process's resident memory grows to several times what it uses. Measured on the SciFact
adapt example (2026-11-24, during its SED training): 4.96 GB resident with 0.38 GB in use by malloc; one
malloc_trim(0) brought it to 0.96 GB. release_freed_memory() is that call; the encoder runs it after long batches and every
16th short one (sentune.core.encode) and the trainer after every CPU step (sentune.training.trainer.FreeMemory), measured by
benchmarks/speed/training_memory.py.
"""

from __future__ import annotations

import ctypes
import gc
import sys


def _glibc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): nothing to do
        return None


_LIBC = _glibc()
_TRIM = getattr(_LIBC, "malloc_trim", None)
_MALLOPT = getattr(_LIBC, "mallopt", None)
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
LARGE_ALLOCATION = 1 << 20  # bytes: a 64 × 64-token batch's activations of one layer are many times this


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


def map_large_allocations(threshold: int = LARGE_ALLOCATION) -> bool:
    """From now on, serve every allocation of `threshold` bytes or more with its own memory mapping, unmapped the moment
    it is freed; False where the C library has no mallopt (not glibc).

    glibc does this only up to a threshold that it raises, up to 32 MiB, each time such a block is freed: after the first
    training step most activations come from the heap, where what one layer frees is kept while the next allocates,
    and a step's peak holds both. A fixed threshold turns that off (mallopt(M_MMAP_THRESHOLD) disables the dynamic one).
    Measured on adapt's SimCSE recipe with gradient checkpointing (batch 32 × 64 tokens, SciFact passages, 8 steps, a
    process each, beside another run, 2026-11-25): peak resident 1,486 and 1,526 MiB without it, 1,062, 1,067 and 1,062
    MiB with it (thresholds 128 KiB, 1 MiB, 128 KiB), and 9.9-12.0 s a step against 14.0-14.3: a low-memory trade, made
    by `sentune adapt --low-memory` and measured by benchmarks/speed/training_memory.py."""
    if _MALLOPT is None:
        return False
    return bool(_MALLOPT(M_MMAP_THRESHOLD, threshold))
