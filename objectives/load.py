"""Load generation over HTTP: every tier of a workload through one client, honestly timed.

Warm-up requests go first (not measured), then tier after tier: each tier's requests are sent
by ``objectives.drive`` (in this process, or over several client processes with
``objectives.workers``) while ``/metrics`` is scraped before, during and after it for the
server's own counters and gauge peaks. Whether the client limited a tier is judged by
``objectives.lag``; whether the engine hung (no token for a window), by ``objectives.stall``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from objectives import prom
from objectives.answer import fetch
from objectives.client import StreamingClient, make_http_client, prepare
from objectives.datasets import build_requests, build_warmup
from objectives.drive import OnRequest, arrival_offsets, drive
from objectives.endpoint import Endpoint
from objectives.lag import ClientLag, Steal, client_limited
from objectives.metrics import SLO
from objectives.race import Race, Watch, request_series
from objectives.records import BenchRequest, RequestRecord
from objectives.result import TierResult
from objectives.stall import EngineStalled, Progress
from objectives.tier import tier_result
from objectives.workers import WorkerPool
from objectives.workload import WorkloadSpec
from tuner.errors import EngineHung, InfraError

# Gauges are sampled often enough that a tier of a second still shows its queue; a scrape
# costs a server about a millisecond.
_SCRAPE_S = 0.25
HEALTH_TIMEOUT_S = 5.0  # asked once, of an engine found silent
SCRAPE_DEADLINE_S = 10.0  # for a whole /metrics answer, however the server paces it


async def scrape(http: httpx.AsyncClient) -> dict[str, float] | None:
    """A ``/metrics`` snapshot; ``None`` when the server exposes none, or not whole within
    ``SCRAPE_DEADLINE_S``."""
    try:
        resp = await fetch(http, "GET", "/metrics", SCRAPE_DEADLINE_S)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        return prom.parse(resp.text)
    except ValueError:
        return None


async def _sample_gauges(http: httpx.AsyncClient, out: list[dict[str, float]]) -> None:
    await asyncio.sleep(_SCRAPE_S / 4)  # the first sample after the burst has arrived
    while True:
        snap = await scrape(http)
        if snap is not None:
            out.append(snap)
        await asyncio.sleep(_SCRAPE_S)


Drive = Callable[..., Awaitable[tuple[list[RequestRecord], ClientLag]]]


async def run_http(
    endpoint: Endpoint,
    workload: WorkloadSpec,
    slos: Sequence[SLO],
    on_tier: Callable[[TierResult], None],
    base_dir: Path | None,
    on_request: OnRequest | None = None,
    workers: int = 1,
    on_warmup: Callable[[float], None] | None = None,
    *,
    first_round: int = 0,
    race: Race | None = None,
) -> None:
    """Every tier of ``workload`` over one client; ``on_tier`` gets each ``TierResult``, and
    ``on_warmup`` the wall seconds of the warm-up when there is one.

    With ``workers > 1`` the measured requests go through that many client processes
    (``objectives.workers``); warm-up and ``/metrics`` scrapes stay in this process. Tier
    ``i`` sends content round ``first_round + i`` (see ``objectives.runner.run_benchmark``).
    With a ``race``, a tier whose launch is out of contention stops early (``objectives.race``;
    in this process only: tiers sent from several client processes are measured in full).

    Raises:
        EngineHung: the engine served nothing for a whole window while its ``/health``
            answered: a config fault.
        InfraError: the same silence, and ``/health`` did not answer either.
    """
    assert endpoint.base_url is not None
    timeout, key, floor = workload.request_timeout_s, endpoint.api_key, workload.stall_floor_s
    pool = (
        WorkerPool(workers, endpoint.base_url, workload.endpoint, timeout, key, floor)
        if workers > 1
        else None
    )
    try:
        async with make_http_client(endpoint.base_url, timeout, key) as http:
            run = _HttpRun(http, workload, slos, pool, on_request, race if pool is None else None)
            try:
                await run.all_tiers(endpoint.model, on_tier, base_dir, on_warmup, first_round)
            except EngineStalled as stall:
                raise await hung(http, stall, run.where, workload.stall_floor_s) from None
    finally:
        if pool is not None:
            pool.close()


class _HttpRun:
    """One run's client, and where in the run it is (for the hung-engine message)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        workload: WorkloadSpec,
        slos: Sequence[SLO],
        pool: WorkerPool | None,
        on_request: OnRequest | None,
        race: Race | None = None,
    ) -> None:
        self.http, self.workload, self.slos, self.on_request = http, workload, slos, on_request
        self.race = race
        timeout = workload.request_timeout_s
        progress = Progress(workload.stall_floor_s, timeout)
        self.client = StreamingClient(http, workload.endpoint, timeout, progress)
        self.send: Drive = pool.drive if pool is not None else self._in_process
        self.where = "warm-up"

    async def _in_process(self, *args: Any, **kw: Any) -> tuple[list[RequestRecord], ClientLag]:
        return await drive(self.client, *args, **kw)  # kw: a raced tier's ``decide``

    async def all_tiers(
        self,
        model: str,
        on_tier: Callable[[TierResult], None],
        base_dir: Path | None,
        on_warmup: Callable[[float], None] | None,
        first_round: int,
    ) -> None:
        workload = self.workload
        started = time.monotonic()
        if await _warm_up(self.client, workload, model, base_dir) and on_warmup:
            on_warmup(time.monotonic() - started)
        for i, concurrency in enumerate(workload.tiers):
            self.where = f"c{concurrency}"
            requests = build_requests(workload, base_dir, round=first_round + i)
            watch = Watch(self.race, concurrency, len(requests)) if self.race else None
            records, lag, server = await _tier(
                self.http, self.send, requests, model, workload, concurrency, self.on_request, watch
            )
            result = tier_result(records, concurrency, workload, self.slos, server, lag.summary())
            result.decided_after = watch.decided_after if watch else None
            if result.decided_after is None:
                result.requests = request_series(records)
            itl = float(result.metrics.get("median_itl_ms", 0.0))  # none: a short window
            result.client_saturated = client_limited(
                records, lag, itl, workload.client_lag_limit_ms
            )
            on_tier(result)


async def hung(
    http: httpx.AsyncClient, stall: EngineStalled, where: str, floor_s: float
) -> EngineHung | InfraError:
    """Whose fault a silent engine is: its config's while ``/health`` still answers 200 (up,
    but serving nothing), else the infrastructure's (the engine or the way to it is gone)."""
    try:
        seconds = min(HEALTH_TIMEOUT_S, max(1.0, floor_s))
        health = await fetch(http, "GET", "/health", seconds)
        answer = f"{health.status_code}"
    except httpx.HTTPError as err:
        answer = f"no answer ({type(err).__name__})"
    if answer == "200":
        return EngineHung(
            f"engine hung at {where}: {stall}; /health answers 200, so it is up but serves nothing"
        )
    return InfraError(f"engine silent at {where}: {stall}, and /health gives {answer}")


async def _warm_up(
    client: StreamingClient, workload: WorkloadSpec, model: str, base_dir: Path | None
) -> bool:
    """The unmeasured warm-up requests; whether there were any."""
    warm = build_warmup(workload, base_dir)
    if warm:
        bodies = prepare(warm, model, workload.endpoint)
        await drive(client, warm, bodies, min(len(warm), workload.tiers[0]), [0.0] * len(warm))
    return bool(warm)


async def _tier(
    http: httpx.AsyncClient,
    send: Drive,
    requests: Sequence[BenchRequest],
    model: str,
    workload: WorkloadSpec,
    concurrency: int,
    on_request: OnRequest | None,
    watch: Watch | None = None,
) -> tuple[list[RequestRecord], ClientLag, dict[str, float]]:
    bodies = prepare(requests, model, workload.endpoint)
    arrivals = arrival_offsets(
        len(requests), workload.request_rate, workload.burstiness, workload.seed
    )
    before = await scrape(http)
    samples: list[dict[str, float]] = []
    sampler = asyncio.create_task(_sample_gauges(http, samples)) if before is not None else None
    steal = Steal()
    try:
        decide = {"decide": watch.done} if watch is not None else {}
        records, lag = await send(requests, bodies, concurrency, arrivals, on_request, **decide)
        lag.steal_share = steal.share()
    finally:
        if sampler is not None:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
    after = await scrape(http) if before is not None else None
    server = (
        {}
        if before is None or after is None
        else prom.tier_counters(before, after, prom.gauge_peaks(samples))
    )
    return records, lag, server
