"""Several client processes for one tier, when one event loop cannot keep up.

Each worker process runs its share of the tier with its own event loop and its own
``httpx.AsyncClient``: request ``i`` goes to worker ``i % K`` and the tier's concurrency is split
so that the N requests in flight are spread over the K loops. All processes stamp with
``time.perf_counter`` (CLOCK_MONOTONIC, one clock for the whole machine on Linux), start at one
shared instant, and their records are put back in request order, so the tier is measured as if
one client had sent it. A worker that runs out of requests early leaves fewer than N in flight
for the tail of the tier: spread uneven request lengths with a seed, as the datasets do.
Workers are spawned, so a script that starts them needs the ``if __name__ == "__main__":``
guard (``tune bench`` and the study loop have it).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from time import perf_counter, sleep

from objectives.client import Api, StreamingClient, make_http_client
from objectives.drive import drive
from objectives.lag import ClientLag
from objectives.records import BenchRequest, RequestRecord
from objectives.stall import Progress
from objectives.workload import STALL_FLOOR_S

_START_DELAY_S = 0.2  # time for every worker to receive its share before the common start


def split(n: int, concurrency: int, workers: int) -> list[tuple[list[int], int]]:
    """Per worker: its request indices (``i % workers``) and its share of the concurrency."""
    k = max(1, min(workers, concurrency, n))
    return [
        (list(range(w, n, k)), concurrency // k + (1 if w < concurrency % k else 0))
        for w in range(k)
    ]


@dataclass(frozen=True)
class Share:
    """What one worker process sends: its requests, their bodies and arrivals, its share of
    the concurrency, and the shared start instant (sent to the process, so plain data)."""

    base_url: str
    api: Api
    timeout_s: float
    api_key: str | None
    stall_floor_s: float
    requests: list[BenchRequest]
    bodies: list[bytes]
    concurrency: int
    arrivals: list[float]
    start: float


class WorkerPool:
    """K spawned client processes, kept for a whole run (started once, before the first tier)."""

    def __init__(
        self,
        workers: int,
        base_url: str,
        api: Api,
        timeout_s: float,
        api_key: str | None = None,
        stall_floor_s: float = STALL_FLOOR_S,
    ) -> None:
        self.workers = workers
        self._server = (base_url, api, timeout_s, api_key, stall_floor_s)
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        # Spawn every process now (imports take a second), not inside the first measured tier.
        for f in [self._pool.submit(sleep, 0.2) for _ in range(workers)]:
            f.result()

    async def drive(
        self,
        requests: Sequence[BenchRequest],
        bodies: Sequence[bytes],
        concurrency: int,
        arrivals: Sequence[float],
        on_request: Callable[[RequestRecord], None] | None = None,
    ) -> tuple[list[RequestRecord], ClientLag]:
        """Like ``drive.drive`` across the processes; records in request order."""
        loop = asyncio.get_running_loop()
        start = perf_counter() + _START_DELAY_S
        shares = split(len(requests), concurrency, self.workers)
        futures = [
            loop.run_in_executor(
                self._pool,
                _run_share,
                Share(
                    *self._server,
                    [requests[i] for i in idx],
                    [bodies[i] for i in idx],
                    conc,
                    [arrivals[i] for i in idx],
                    start,
                ),
            )
            for idx, conc in shares
        ]
        parts = await asyncio.gather(*futures)
        records: list[RequestRecord | None] = [None] * len(requests)
        for (idx, _), (recs, _lag) in zip(shares, parts, strict=True):
            for i, rec in zip(idx, recs, strict=True):
                records[i] = rec
                if on_request is not None:
                    on_request(rec)
        return [r for r in records if r is not None], merge([lag for _, lag in parts])

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def merge(lags: Sequence[ClientLag]) -> ClientLag:
    """One tier's lag figures from every worker's."""
    return ClientLag(
        loop_lag_s=[x for lag in lags for x in lag.loop_lag_s],
        send_lag_s=[x for lag in lags for x in lag.send_lag_s],
        cpu_s=sum(lag.cpu_s for lag in lags),
        wall_s=max((lag.wall_s for lag in lags), default=0.0),
        workers=max(1, len(lags)),
        major_faults=sum(lag.major_faults for lag in lags),
    )


def _run_share(share: Share) -> tuple[list[RequestRecord], ClientLag]:
    return asyncio.run(_share(share))


async def _share(s: Share) -> tuple[list[RequestRecord], ClientLag]:
    async with make_http_client(s.base_url, s.timeout_s, s.api_key) as http:
        # Each process watches its share: a hung engine silences every share at once.
        client = StreamingClient(http, s.api, s.timeout_s, Progress(s.stall_floor_s, s.timeout_s))
        return await drive(client, s.requests, s.bodies, s.concurrency, s.arrivals, start=s.start)
