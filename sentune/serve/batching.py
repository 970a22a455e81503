"""Requests that arrive together share one forward pass: a small asyncio micro-batcher in front of the model, with a
bounded queue.

Each batch takes up to `max_batch` texts from the waiting requests, those that have had the fewest of their texts
computed first (then the shortest, then the oldest): a request longer than `max_batch` is split into several batches
(a shorter one never is: it waits for the next batch when it does not fit whole), and a one-word
request that arrives while a 256-text one is being computed runs in the next batch, not after all of it. A request whose
client has been answered (its time limit passed, or it left) is dropped before each batch: its remaining texts are never
computed. A running batch is computed in chunks of at most `chunk_cost` (its texts' `cost`, the characters a model
reads): between two chunks, the texts of a request answered meanwhile are skipped, so what a timed-out request still
costs is the chunk running when it was answered, not its whole batch.

One request's failure never fails its batch: when a chunk holding several requests' texts raises, each request's texts
are computed alone, and only the one that raises gets the error (a damaged document, a text the model refuses).

The requests accepted and not yet answered (waiting or in the running batch) are at most `max_queue`: one more is
refused at once (QueueFull, a 503 with Retry-After) rather than accepted to wait past what a client tolerates. Requests,
not texts, are counted: a long request (it counts one) does not shut out the one-word request that runs in the next
batch beside it. Past saturation (a request refused within the last OVERLOAD_S) the bound is OVERLOAD_SHARE of
`max_queue`: by Little's law what is served waits in proportion to what is held, refusals take CPU from the model, and
half the queue still keeps the model busy (benchmarks/results/serving.md: 16 connections are served about as fast as
64), so what is served past saturation waits less than at `max_queue` clients. There the queue is full while a batch
runs and empties when it ends, so the next batch waits for the bound's worth of requests, which are on their way,
while they keep coming (OVERLOAD_GAP_S after the latest, OVERLOAD_WAIT_S at most): a request then waits for its own
batch only, not also for the one that started just before it arrived. The bound is
`max_queue` again once no request has been refused for OVERLOAD_S; a load of at most `max_queue` clients is never
refused, so never meets the lower bound.

When the batcher is idle a request runs at once. It waits up to `wait_s` for company only when the previous batch was
shared by several requests, i.e. when others are sending, and only until as many texts wait as that batch held (the
clients it answered are on their way back; none other is known to be): at one client there is no wait to pay, at a few
the next batch starts as soon as they are back rather than `wait_s` later, and under load the requests that gathered
during a batch run together as soon as it ends. The executor has one thread, shared with the
other batchers of the process, so the model runs one batch at a time (its tokenizer is not safe to call from two
threads) and tokenisation never runs on the event loop.

Why not a library: the embedding servers batch inside their own engines (infinity's BatchHandler, text-embeddings-
inference's router), which are not libraries to put in front of another encoder; this is the part of them that
sentune needs, and what it costs is counted (`forward_passes` against `requests`).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

OVERLOAD_SHARE = 0.5  # of max_queue: the bound past saturation
OVERLOAD_S = 1.0  # past saturation until this long after the last refusal (Retry-After's second)
OVERLOAD_WAIT_S = 0.05  # past saturation, how long the first request of a batch waits for the bound's worth at most
OVERLOAD_GAP_S = 0.005  # past saturation, the wait ends this long after the latest arrival


class QueueFull(Exception):
    """`max_queue` requests are being answered already: the request is not accepted."""

    def __init__(self, pending: int, limit: int) -> None:
        super().__init__(f"{pending} requests are being answered (at most {limit})")
        self.pending, self.limit = pending, limit


@dataclass
class Job:
    items: Sequence[Any]
    future: asyncio.Future = field(repr=False)
    number: int = 0  # arrival order
    sent: int = 0  # items handed to a batch so far
    results: list = field(default_factory=list, repr=False)
    answered: bool = False  # its future is done (answered, failed, timed out, left): read by the worker thread

    def __post_init__(self) -> None:
        self.future.add_done_callback(lambda _: setattr(self, "answered", True))

    @property
    def left(self) -> int:
        return len(self.items) - self.sent


class MicroBatcher:
    """`await submit(items)` -> `run(items)`'s results for these items, computed with other requests' items."""

    def __init__(
        self,
        run: Callable[[list[Any]], Sequence[Any]],
        executor: Executor,
        *,
        max_batch: int,
        wait_s: float,
        max_queue: int | None = None,
        on_batch: Callable[[int], None] | None = None,
        cost: Callable[[Any], int] | None = None,
        chunk_cost: int | None = None,
    ) -> None:
        self.run, self.executor = run, executor
        self.cost, self.chunk_cost = cost, chunk_cost  # a running batch's chunks (None: the batch in one call)
        self.max_batch, self.wait_s = max_batch, wait_s
        self.max_queue = max_queue  # requests accepted and not yet answered; None: unbounded
        self.pending = 0  # requests accepted and not yet answered
        self.on_batch = on_batch  # called with each batch's size (the metrics)
        self.requests = 0  # jobs submitted
        self.forward_passes = 0  # calls of `run` (chunks, and a failed chunk's requests computed alone, included)
        self.refused = 0  # jobs refused by the bound
        self._refused_at = float("-inf")  # time.monotonic() of the last refusal
        self._last_arrival = float("-inf")  # the event loop's time of the latest request accepted
        self._jobs: list[Job] = []
        self._arrived: asyncio.Event | None = None
        self._numbers = itertools.count()
        self._task: asyncio.Task | None = None
        self._shared = False  # the last batch held several requests: others are sending
        self._last_texts = 0  # texts in the last batch: how many a wait for company waits for at most

    def waiting(self) -> int:
        """Texts accepted and not yet handed to a batch (a request already answered is not counted)."""
        return sum(job.left for job in self._jobs if not job.future.done())

    def bound(self) -> int | None:
        """The requests that may be accepted and not yet answered now: max_queue, or OVERLOAD_SHARE of it past
        saturation (None: no bound)."""
        if self.max_queue is None or time.monotonic() - self._refused_at > OVERLOAD_S:
            return self.max_queue
        return max(1, math.ceil(self.max_queue * OVERLOAD_SHARE))

    def full(self) -> bool:
        """No request would be accepted now (the cheap check before a body is parsed)."""
        bound = self.bound()
        return bound is not None and self.pending >= bound

    def refuse(self) -> None:
        """Count a request refused by the bound (here or by the HTTP protocol): the queue is past saturation."""
        self.refused += 1
        self._refused_at = time.monotonic()

    def start(self) -> None:
        self._arrived = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._serve())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        if self._arrived is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        if self.full():
            self.refuse()
            raise QueueFull(self.pending, self.bound() or 0)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.requests += 1
        self._jobs.append(Job(items, future, next(self._numbers)))
        self._last_arrival = asyncio.get_running_loop().time()
        self._arrived.set()
        self.pending += 1
        try:
            return await future
        finally:  # answered, failed, timed out or left
            self.pending -= 1

    def _next_batch(self) -> list[tuple[Job, int, int]]:
        """(job, start, end) slices of at most max_batch items, from the jobs least served so far, then the shortest."""
        self._jobs = [job for job in self._jobs if not job.future.done()]  # answered already: nothing more is computed
        room, parts = self.max_batch, []
        for job in sorted(self._jobs, key=lambda j: (j.sent, j.left, j.number)):
            if room == 0:
                break
            if room < job.left and len(job.items) <= self.max_batch:  # one batch can hold it whole: the next one does
                continue
            take = min(room, job.left)
            parts.append((job, job.sent, job.sent + take))
            job.sent += take
            room -= take
        self._jobs = [job for job in self._jobs if job.left]
        return parts

    async def _serve(self) -> None:
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        while True:
            if not self._jobs:
                self._arrived.clear()
                await self._arrived.wait()
                if self._shared:  # others are sending: let the requests on their way join this batch
                    await self._company()
            parts = self._next_batch()
            if not parts:
                continue
            self._shared = len(parts) > 1
            self._last_texts = sum(end - start for _, start, end in parts)
            if self.on_batch is not None:
                self.on_batch(sum(end - start for _, start, end in parts))
            outcomes = await loop.run_in_executor(self.executor, self._compute, parts)
            for (job, _, _), outcome in zip(parts, outcomes, strict=True):
                if job.future.done() or outcome is None:  # answered meanwhile: its results are nobody's
                    continue
                if isinstance(outcome, BaseException):
                    job.future.set_exception(outcome)
                    continue
                job.results.extend(outcome)
                if len(job.results) == len(job.items):
                    job.future.set_result(job.results)

    def _compute(self, parts: list[tuple[Job, int, int]]) -> list[list | BaseException | None]:
        """In the worker thread: each part's results, its exception, or None when its request was answered before its
        last chunk (its remaining chunks skipped)."""
        results: list[list] = [[] for _ in parts]
        outcomes: list[list | BaseException | None] = [None] * len(parts)
        failed: set[int] = set()
        for chunk in self._chunks(parts):
            live = [(p, start, end) for p, start, end in chunk if p not in failed and not parts[p][0].answered]
            if not live:
                continue
            try:
                computed = self._call([item for p, start, end in live for item in parts[p][0].items[start:end]])
            except Exception as exc:
                if len({p for p, _, _ in live}) == 1:
                    failed.add(live[0][0])
                    outcomes[live[0][0]] = exc
                    continue
                for p, start, end in live:  # each request alone: the one that raises gets the error, the others their results
                    try:
                        results[p].extend(self._call(list(parts[p][0].items[start:end])))
                    except Exception as alone:
                        failed.add(p)
                        outcomes[p] = alone
                continue
            offset = 0
            for p, start, end in live:
                results[p].extend(computed[offset : offset + end - start])
                offset += end - start
        for p, (_, start, end) in enumerate(parts):
            if p not in failed and len(results[p]) == end - start:
                outcomes[p] = results[p]
        return outcomes

    def _call(self, items: list) -> Sequence[Any]:
        self.forward_passes += 1  # one worker thread computes this batcher's batches, one at a time
        return self.run(items)

    def _chunks(self, parts: list[tuple[Job, int, int]]) -> list[list[tuple[int, int, int]]]:
        """The batch cut into (part, start, end) pieces of at most chunk_cost each (one item costing more: a chunk alone)."""
        if self.cost is None or self.chunk_cost is None:
            return [[(p, start, end) for p, (_, start, end) in enumerate(parts)]]
        chunks: list[list[tuple[int, int, int]]] = [[]]
        spent = 0
        for p, (job, start, end) in enumerate(parts):
            piece = start
            for i in range(start, end):
                cost = self.cost(job.items[i])
                if spent and spent + cost > self.chunk_cost:  # this item opens the next chunk
                    if i > piece:
                        chunks[-1].append((p, piece, i))
                    chunks.append([])
                    piece, spent = i, 0
                spent += cost
            if end > piece:
                chunks[-1].append((p, piece, end))
        return [chunk for chunk in chunks if chunk]

    async def _company(self) -> None:
        """Wait up to wait_s, or until as many texts wait as the last batch held (a full batch at most). Past saturation the queue is empty only between two batches
        (it is full while one runs), and the requests that fill it are on their way (the answered clients' next ones,
        the refused ones coming back): wait for the bound's worth while they keep coming (up to OVERLOAD_GAP_S after
        the latest, OVERLOAD_WAIT_S in all), so that they run in this batch rather than wait for all of the next one."""
        assert self._arrived is not None
        loop = asyncio.get_running_loop()
        bound = self.bound()
        overloaded = bound is not None and bound != self.max_queue
        target = min(self.max_batch, bound) if bound is not None and overloaded else min(self.max_batch, max(self._last_texts, 1))
        began = loop.time()
        deadline = began + self.wait_s
        while self.waiting() < target:
            if overloaded:  # each arrival extends the wait: the burst of the answered clients' next requests
                deadline = min(began + OVERLOAD_WAIT_S, self._last_arrival + max(self.wait_s, OVERLOAD_GAP_S))
            left = deadline - loop.time()
            if left <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except TimeoutError:
                return
