"""What this process has used, for results that report minutes: a timing taken while other work shared the cores
overstates an idle run's, and the CPU time beside the wall time shows it (2 threads alone on 2 cores use close to
2 CPU-seconds a second; sharing them, fewer)."""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

_IMPORTED = time.time()  # where /proc is missing: the process's start is taken to be this module's import


def process_started() -> float:
    """The process's start (Unix time): Linux's /proc/self/stat field 22 (clock ticks after boot) plus the boot time."""
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()  # the name may hold spaces
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
        return boot + int(after_name[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED


def process_usage() -> dict:
    """Wall and CPU seconds of this process so far, its torch threads, the machine's cores, 1-minute load average and peak memory."""
    import torch

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # data-loader workers, torchrun's ranks
    wall = time.time() - process_started()
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return {
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "cores_used": round(cpu / wall, 2) if wall > 0 else None,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        # the most resident memory this process held at any time (Linux counts ru_maxrss in KiB, macOS in bytes)
        "peak_resident_mib": round(own.ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10), 1),
    }
