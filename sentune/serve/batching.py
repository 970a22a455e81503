"""Requests that arrive together share one forward pass: a small asyncio micro-batcher in front of the model.

A request's texts wait at most `wait_s` for others (or until `max_batch` texts are waiting), then every waiting
request's texts go to `run` at once, in a worker thread, and each request gets its own slice of the results. While a
batch runs, the next requests gather; they have waited already, so they run as soon as it ends. A request is never
split: one with more texts than `max_batch` runs alone. The executor is shared with the other batchers of the process
and has one thread, so the model runs one batch at a time (its tokenizer is not safe to call from two threads).

Why not a library: the embedding servers batch inside their own engines (infinity's BatchHandler, text-embeddings-
inference's router), which are not libraries to put in front of another encoder; this is the part of them that
sentune needs, and what it costs is counted (`forward_passes` against `requests`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Job:
    items: Sequence[Any]
    future: asyncio.Future = field(repr=False)


class MicroBatcher:
    """`await submit(items)` -> `run(items)`'s results for these items, computed in one call with other requests'."""

    def __init__(self, run: Callable[[list[Any]], Sequence[Any]], executor: Executor, *, max_batch: int, wait_s: float) -> None:
        self.run, self.executor = run, executor
        self.max_batch, self.wait_s = max_batch, wait_s
        self.requests = 0  # jobs submitted
        self.forward_passes = 0  # calls of `run`
        self._queue: asyncio.Queue[Job] | None = None
        self._enough: asyncio.Event | None = None
        self._waiting_items = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._queue, self._enough = asyncio.Queue(), asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._serve())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        if self._queue is None or self._enough is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.requests += 1
        self._waiting_items += len(items)
        self._queue.put_nowait(Job(items, future))
        if self._waiting_items >= self.max_batch:
            self._enough.set()
        return await future

    async def _serve(self) -> None:
        assert self._queue is not None and self._enough is not None
        loop = asyncio.get_running_loop()
        carried: Job | None = None
        while True:
            if carried is None:
                first = await self._queue.get()
                if self.wait_s > 0 and self._waiting_items < self.max_batch:  # it came to an idle batcher: wait for company
                    self._enough.clear()
                    try:
                        await asyncio.wait_for(self._enough.wait(), self.wait_s)
                    except TimeoutError:
                        pass
            else:
                first, carried = carried, None
            jobs, size = [first], len(first.items)
            while size < self.max_batch and not self._queue.empty():
                job = self._queue.get_nowait()
                if size + len(job.items) > self.max_batch:
                    carried = job  # the next batch's first
                    break
                jobs.append(job)
                size += len(job.items)
            self._waiting_items -= sum(len(j.items) for j in jobs)
            jobs = [j for j in jobs if not j.future.done()]  # a request that timed out or whose client left is not computed
            if not jobs:
                continue
            self.forward_passes += 1
            items = [item for job in jobs for item in job.items]
            try:
                results = await loop.run_in_executor(self.executor, self.run, items)
            except Exception as exc:  # every request of the batch gets the error (a 500 each); the batcher goes on
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)
                continue
            start = 0
            for job in jobs:
                if not job.future.done():
                    job.future.set_result(list(results[start : start + len(job.items)]))
                start += len(job.items)
