"""sentune.core.memory: freed CPU memory handed back to the system after every training step, every evaluation and
every finished run (the encoder's long batches: tests/test_encode.py)."""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path

import numpy as np
import pytest

from sentune.core import memory


def test_release_calls_malloc_trim_with_no_padding(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(memory, "_TRIM", lambda pad: calls.append(pad))
    assert memory.release_freed_memory() is True and calls == [0]
    monkeypatch.setattr(memory, "_TRIM", None)  # a C library without malloc_trim: nothing is called, and it says so
    assert memory.release_freed_memory() is False


def test_release_unreferenced_collects_cycles_before_trimming(monkeypatch):
    order: list[str] = []

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a reference cycle, as a trainer and its callbacks make: only the collector frees it
    alive = weakref.ref(a)
    del a, b
    gc.disable()
    try:
        monkeypatch.setattr(memory, "_TRIM", lambda pad: order.append("dead" if alive() is None else "alive"))
        memory.release_unreferenced()
    finally:
        gc.enable()
    assert order == ["dead"]


def _resident_mib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(memory._TRIM is None, reason="glibc only")
def test_real_trim_hands_freed_heap_memory_back():
    """200 MB of 64 KB blocks (below glibc's mmap threshold: on the heap), freed under one block allocated after them,
    which keeps the heap from shrinking by itself: resident until the trim, gone after it."""
    import numpy as np

    blocks = [np.ones(8000) for _ in range(3200)]
    pin = np.ones(8000)
    del blocks
    gc.collect()
    before = _resident_mib()
    assert memory.release_freed_memory() is True
    assert before - _resident_mib() > 100, "the freed blocks stayed resident"
    del pin


def test_trainer_releases_after_every_cpu_step_and_evaluation(tiny_model_dir, tiny_data_dir, tmp_path, monkeypatch):
    from conftest import tiny_recipe

    from sentune.training.recipe import load_recipe
    from sentune.training.trainer import train

    calls: list[int] = []
    monkeypatch.setattr(memory, "_TRIM", lambda pad: calls.append(pad))
    recipe_path = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir, training={"max_steps": 4, "eval_steps": 2, "device": "cpu"})
    train(load_recipe(str(recipe_path), ["eval.tasks=none"]), tmp_path / "run", data_dir=tiny_data_dir)
    # 4 steps and 2 evaluations, at least (the dev evaluation's encoder adds its own after long batches)
    assert len(calls) >= 6, calls


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the current resident size from /proc (Linux)")
def test_peak_resident_is_at_least_the_current_and_sees_a_new_allocation():
    def resident_mib() -> float:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    before = memory.peak_resident_mib()
    assert before is not None and before >= resident_mib() - 1  # the peak so far covers what is resident now
    block = np.ones(int((before - resident_mib() + 64) * 2**20) // 8)  # every page written: resident passes the old peak by 64 MiB
    assert memory.peak_resident_mib() >= resident_mib() - 1 >= before + 48
    del block


MAPPED_PROBE = """
import sys
import numpy as np
from sentune.core import memory

def resident_mib():
    line = next(x for x in open("/proc/self/status").read().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024

if sys.argv[1] == "mapped":
    assert memory.map_large_allocations()
first = np.ones(16 * 2**17)  # 16 MiB: freeing it raises glibc's dynamic threshold above the 8 MiB blocks below
del first
before = resident_mib()
blocks = [np.ones(2**20) for _ in range(24)]  # 24 blocks of 8 MiB, every page written
pin = np.ones(2**14)  # 128 KiB from the heap above them: it keeps the heap from shrinking from its top
del blocks
print(resident_mib() - before)
"""


@pytest.mark.skipif(memory._MALLOPT is None or not Path("/proc/self/status").is_file(), reason="glibc on Linux only")
def test_mapped_large_allocations_go_back_to_the_system_when_freed():
    """Without it, 192 MiB freed in 8 MiB blocks stays resident in the heap (the threshold rose after a 16 MiB block);
    with it, each block was its own mapping and is gone. A fresh process each: the setting lasts for the process."""
    import subprocess
    import sys

    def kept_mib(mode: str) -> float:
        return float(subprocess.run([sys.executable, "-c", MAPPED_PROBE, mode], capture_output=True, text=True, check=True).stdout)

    assert kept_mib("heap") > 150
    assert kept_mib("mapped") < 20


def test_map_large_allocations_says_false_without_mallopt(monkeypatch):
    monkeypatch.setattr(memory, "_MALLOPT", None)
    assert memory.map_large_allocations() is False


def _mapped_resident_kib(path) -> int:
    """Resident KiB of this process's mappings of `path` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        if "-" in line.split(" ", 1)[0]:  # a mapping's header line
            inside = line.rstrip("\n").endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_cache_rows_read_without_touching_the_memory_map(tmp_path):
    """read_rows returns array[rows] and leaves the map's pages out of the process (indexing the map brings them in)."""
    from sentune.core.cache import cached_array, read_rows

    values = np.random.default_rng(0).standard_normal((4096, 7, 64)).astype(np.float32)  # 7 MiB
    path = tmp_path / "views.npy"
    array = cached_array(path, lambda: values)
    assert isinstance(array, np.memmap)
    rows = np.random.default_rng(1).permutation(4096)
    for chunk in np.array_split(rows, 64):
        np.testing.assert_array_equal(read_rows(array, chunk), values[chunk])
    assert _mapped_resident_kib(path) == 0
    for chunk in np.array_split(rows, 64):
        np.ascontiguousarray(array[chunk])
    assert _mapped_resident_kib(path) >= 7 * 1024 - 64  # the old lookup: every page of the file
    np.testing.assert_array_equal(read_rows(values, rows[:5]), values[rows[:5]])  # an array in memory: plain indexing
    with pytest.raises(IndexError, match="views.npy"):
        read_rows(array, np.array([4096]))
