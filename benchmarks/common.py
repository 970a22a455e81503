"""Helpers shared by the benchmark scripts (run as `python benchmarks/NAME.py`)."""

from __future__ import annotations

import time
from pathlib import Path


def timed(fn):
    """(seconds, value) of one call."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def emit(lines: list[str], out: str | None) -> None:
    """Print the Markdown result and, when asked, write it to `out`."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text, encoding="utf-8")
