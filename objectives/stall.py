"""A hung engine: no token from any stream, and no request ending, for a whole window.

Each request has its own timeout, but a hung engine makes every request of a tier wait all of
it, one batch after another (60 prompts at an 1800 s timeout: about 30 hours a tier). So a
run watches the engine as a whole: any token and any request that ends (failed or not) is the
engine answering; time with requests in flight and neither is silence. The window is ten
times the longest silence seen so far in the run (warm-up and earlier tiers included, so a
slow prefill sets its own pace), at least ``workload.stall_floor_s``, and under the request
timeout so that it, not the first batch's timeouts, ends a hung tier.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from time import perf_counter
from typing import TypeVar

T = TypeVar("T")
PACE_FACTOR = 10.0  # a silence this many times the longest one seen so far is a hang
TIMEOUT_SHARE = 0.9  # the window's ceiling, as a share of the request timeout


class EngineStalled(Exception):
    """No token and no request end for ``silent_s`` with ``in_flight`` requests asked."""

    def __init__(self, silent_s: float, window_s: float, in_flight: int) -> None:
        super().__init__(silent_s, window_s, in_flight)  # the args: it crosses processes
        self.silent_s, self.window_s, self.in_flight = silent_s, window_s, in_flight

    def __str__(self) -> str:
        return (
            f"no token from any of {self.in_flight} streams for {self.silent_s:.0f}s "
            f"(window {self.window_s:.0f}s)"
        )


class Progress:
    """What the engine answered lately, on the ``perf_counter`` clock of the records."""

    def __init__(self, floor_s: float, timeout_s: float) -> None:
        self.floor_s, self.timeout_s = floor_s, timeout_s
        self.pace_s = 0.0  # the longest silence so far
        self.in_flight = 0
        self.since = 0.0  # the last answer, or when requests began to be in flight

    @property
    def window_s(self) -> float:
        return min(max(self.floor_s, PACE_FACTOR * self.pace_s), TIMEOUT_SHARE * self.timeout_s)

    def sent(self, now: float) -> None:
        if self.in_flight == 0:
            self.since = now  # idle time between open-loop arrivals is no silence
        self.in_flight += 1

    def event(self, now: float) -> None:
        """A token arrived (at ``now``, its read's arrival time)."""
        if self.in_flight:
            self.pace_s = max(self.pace_s, now - self.since)
        self.since = max(self.since, now)

    def done(self, now: float) -> None:
        """A request ended: the engine answered, even with an error."""
        self.event(now)
        self.in_flight -= 1

    def silent_s(self, now: float) -> float:
        return now - self.since if self.in_flight else 0.0


async def watch(progress: Progress) -> None:
    """Raise ``EngineStalled`` once the engine is silent for a whole window."""
    while True:
        await asyncio.sleep(min(1.0, progress.window_s / 4))
        silent = progress.silent_s(perf_counter())
        if silent > progress.window_s:
            raise EngineStalled(silent, progress.window_s, progress.in_flight)


async def unless_stalled(work: Awaitable[T], progress: Progress | None) -> T:
    """``work``'s result, unless the engine stalls first: then ``work`` is cancelled (its
    requests with it) and ``EngineStalled`` raised."""
    if progress is None:
        return await work
    job = asyncio.ensure_future(work)
    dog = asyncio.create_task(watch(progress))
    try:
        done, _ = await asyncio.wait({job, dog}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (job, dog):
            task.cancel()  # a finished task keeps its result
        await asyncio.gather(job, dog, return_exceptions=True)
    if job in done:
        return job.result()
    stalled = dog.exception()  # the watchdog fired first
    assert stalled is not None
    raise stalled
