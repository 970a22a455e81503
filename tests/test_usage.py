"""process_usage: the CPU time beside the wall time that adapt records with its minutes."""

import os
import time
from pathlib import Path

import pytest

from sentune.core.usage import process_usage


def test_cpu_seconds_follow_work_and_wall_covers_them():
    before = process_usage()
    end = time.process_time() + 0.3
    while time.process_time() < end:  # 0.3 s of this thread's CPU
        pass
    after = process_usage()
    assert after["cpu_seconds"] - before["cpu_seconds"] >= 0.25
    assert after["wall_seconds"] - before["wall_seconds"] >= 0.25
    assert 0 < after["cores_used"] <= after["cpu_count"] + 0.5  # rounding and children aside, no more than the machine has


@pytest.mark.slow  # seconds: plain `pytest -q` stays short; scripts/test.sh runs it
def test_idle_time_counts_as_wall_only():
    """In a process of its own: this one's library threads (torch's, after other tests) may spend CPU while it sleeps,
    and a busy machine does not make a sleeping process use CPU."""
    import json
    import subprocess
    import sys

    script = (
        "import json, time\nfrom sentune.core.usage import process_usage\n"
        "before = process_usage(); time.sleep(0.3); after = process_usage()\n"
        "print(json.dumps({k: after[k] - before[k] for k in ('wall_seconds', 'cpu_seconds')}))"
    )
    spent = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout)
    assert spent["wall_seconds"] >= 0.25 and spent["cpu_seconds"] < 0.15


def test_process_start_is_this_process_s():
    import os
    import subprocess
    import sys

    from sentune.core.usage import process_started

    started = process_started()
    assert time.time() - 24 * 3600 < started <= time.time()
    # a child started now reports a later start than this process (which has run at least this test)
    child = float(
        subprocess.run(
            [sys.executable, "-c", "from sentune.core.usage import process_started as p; print(p())"],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ,
        ).stdout
    )
    assert started < child <= time.time() + 1


@pytest.mark.skipif(not Path("/proc/self/statm").is_file(), reason="reads Linux's /proc")
def test_peak_memory_covers_an_allocation():
    import numpy as np

    before = process_usage()["peak_resident_mib"]
    resident = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    block = np.ones(int((before - resident + 96) * 2**20) // 8)  # touched: resident memory passes the old peak by 96 MiB
    after = process_usage()["peak_resident_mib"]
    assert block.sum() > 0 and after >= before + 80
