"""CPU lanes: a batch of texts sorted by length and cut into runs of about equal tokens, each run's forward passes on
a thread of its own with its share of the intra-op threads (on 2 cores: two lanes of one thread each), instead of one
forward pass over the whole batch with every thread.

Why: a server's batch is short texts (queries) from many requests. Each operator of such a batch is small work, and
with two intra-op threads a forward pass spends much of its time handing work to the second thread and waiting for it;
two one-thread passes side by side do not wait for each other (PyTorch releases the GIL inside its operators), and the
two halves, each of texts of similar length, are padded less than the whole. Below a few texts a lane the whole batch
with every thread is faster (`benchmarks/speed/serve_lanes.py` measures both by batch size). Lanes change the order
of the floating-point sums, not what is computed: vectors agree with the whole batch's to about 1e-7.

The server's Runtime carries its lanes (sentune.core.runtime; `sentune serve --lanes`), so every Encoder given that
runtime uses them, the server's own and its search index's query encoding."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch

LANE_MIN_TEXTS = 3  # a lane's fewest texts: with fewer, one pass over the whole batch with every thread was faster
T = TypeVar("T")


def lane_shares(lengths: np.ndarray, lanes: int) -> list[np.ndarray]:
    """The texts' indices sorted by length (shortest first), cut into at most `lanes` non-empty runs of about equal
    token counts."""
    order = np.argsort(lengths, kind="stable")
    if lanes <= 1 or len(order) <= 1:
        return [order]
    cumulative = np.cumsum(np.maximum(lengths[order], 1))
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, lanes) / lanes, side="left") + 1
    return [part for part in np.split(order, np.clip(cuts, 1, len(order) - 1)) if len(part)]


@dataclass
class Lanes:
    """`count` lanes sharing `threads` intra-op threads; the lanes' threads are made once and kept."""

    count: int
    threads: int
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    def for_batch(self, texts: int) -> int:
        """How many lanes a batch of this many texts runs in (1: the whole batch, every thread)."""
        return max(1, min(self.count, texts // LANE_MIN_TEXTS))

    def run(self, work: Callable[[Any], T], parts: Sequence[Any]) -> list[T]:
        """work(part) for each part, each on a lane thread with its share of the threads; results in parts' order."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.count, thread_name_prefix="sentune-lane")
        share = max(1, self.threads // len(parts))

        def lane(part: Any) -> T:
            torch.set_num_threads(share)  # this thread's own count (the lanes' threads run nothing else)
            return work(part)

        futures = [self._pool.submit(lane, part) for part in parts]
        return [future.result() for future in futures]

    def whole(self) -> None:
        """Before a pass over the whole batch on the calling thread: every thread (a thread started after a lane set
        its count would otherwise start with the lane's)."""
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
