"""Sending one tier's requests: a closed loop of N in flight, optionally paced by arrivals.

A tier of concurrency N runs N workers that take requests in dataset order; with a request
rate, request i may not start before its seeded arrival time (gaps drawn from a gamma
distribution of shape ``burstiness``, mean 1/rate, as ``vllm bench serve``), so at most N are in
flight. While they run, the client's own lag is measured (``objectives.lag``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from time import perf_counter

import numpy as np

from objectives.client import StreamingClient
from objectives.lag import ClientLag, Sample, counted_lag, probe_loop
from objectives.records import BenchRequest, RequestRecord
from objectives.stall import unless_stalled

OnRequest = Callable[[RequestRecord], None]
# Told each request as it ends (its index, its record); True ends the tier there: no request
# is sent after it and those in flight are cancelled (objectives.race).
Decide = Callable[[int, RequestRecord], bool]


def arrival_offsets(n: int, rate: float | None, burstiness: float, seed: int) -> list[float]:
    """Seconds after the tier start at which each request may be sent (all 0 in closed loop)."""
    if rate is None or n == 0:
        return [0.0] * n
    gaps = np.random.default_rng(seed).gamma(burstiness, 1.0 / (rate * burstiness), size=n)
    return [0.0, *np.cumsum(gaps[:-1]).tolist()]


async def drive(
    client: StreamingClient,
    requests: Sequence[BenchRequest],
    bodies: Sequence[bytes],
    concurrency: int,
    arrivals: Sequence[float],
    on_request: OnRequest | None = None,
    start: float | None = None,
    decide: Decide | None = None,
) -> tuple[list[RequestRecord], ClientLag]:
    """Send every request with at most ``concurrency`` in flight; records in request order.

    Raises ``EngineStalled`` (its requests cancelled) when the client's ``progress`` sees the
    engine silent for a whole window (``objectives.stall``).

    ``start`` (a ``perf_counter`` time, default now) is when the tier begins: arrival offsets
    count from it, and several processes given the same ``start`` begin together.
    ``decide`` may end the tier early; the records are then those of the requests that ended.
    """
    records: list[RequestRecord | None] = [None] * len(requests)
    send_lag: dict[int, float] = {}  # open loop: how late request i was sent
    next_index = iter(range(len(requests)))
    start = perf_counter() if start is None else start
    if start > perf_counter():
        await asyncio.sleep(start - perf_counter())

    decided = asyncio.Event()

    async def worker() -> None:
        try:
            await send_all()
        except asyncio.CancelledError:
            if not decided.is_set():
                raise  # cancelled from outside (a stall, Ctrl-C), not by the decision

    async def send_all() -> None:
        for i in next_index:
            if decided.is_set():
                return
            due = start + arrivals[i]
            if due > perf_counter():
                await asyncio.sleep(due - perf_counter())
            if arrivals[i] > 0:
                send_lag[i] = max(0.0, perf_counter() - due)
            if progress is not None:
                progress.sent(perf_counter())
            records[i] = rec = await client.send(requests[i], bodies[i])
            if progress is not None:
                progress.done(perf_counter())
            if on_request is not None:
                on_request(rec)
            if decide is not None and not decided.is_set() and decide(i, rec):
                decided.set()
                for task in tasks:
                    if task is not asyncio.current_task():
                        task.cancel()

    progress = client.progress
    samples: list[Sample] = []
    probe = asyncio.create_task(probe_loop(samples))
    try:
        tasks = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(requests)))]
        await unless_stalled(asyncio.gather(*tasks), progress)
    finally:
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe
    return [r for r in records if r is not None], counted_lag(records, samples, send_lag)
