"""Load generation over HTTP: closed-loop tiers, optional open-loop arrivals, honest timing.

A tier of concurrency N runs N workers that take requests in dataset order; with a request
rate, request i may not start before its seeded arrival time (gaps drawn from a gamma
distribution of shape ``burstiness``, mean 1/rate, as ``vllm bench serve``), so at most N are in
flight. The client watches itself: a probe task measures event-loop delay, and each open-loop
send is compared with its scheduled time. When those lags are large enough to distort the
timestamps, the tier is marked ``client_saturated``: the client, not the server, limited it.
Only timestamps of streams that produced tokens can be distorted, so only they are judged: lag
and CPU are counted while such a stream was in flight, send lag for such requests, and a tier
where no stream produced a token (every request refused at once) is never client-saturated. A
closed loop of instant refusals keeps the client busy, but it measures nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import httpx
import numpy as np

from objectives import prom
from objectives.client import StreamingClient, make_http_client, prepare
from objectives.datasets import build_requests, build_warmup
from objectives.endpoint import Endpoint
from objectives.metrics import SLO, TierResult
from objectives.records import BenchRequest, RequestRecord
from objectives.workload import WorkloadSpec

# The client limits a tier when it is busy nearly all the time (CPU of this process over the
# tier's wall time), when open-loop sends miss their schedule, or when its event loop runs so
# late that chunks merge: reads carry the kernel's receive time, so a delay shorter than the gap
# between two chunks costs nothing, but at half the tier's median ITL (5 ms at least) in its
# p99, one read in a hundred is close to swallowing the next chunk and the ITL tail moves.
SATURATED_CPU_SHARE = 0.85
SATURATED_SEND_LAG_MS = 50.0  # p99
SATURATED_GAP_SHARE = 0.5  # p99 loop lag over median ITL
SATURATED_LAG_FLOOR_MS = 5.0
_PROBE_S = 0.005
OnRequest = Callable[[RequestRecord], None]
_SCRAPE_S = 1.0


@dataclass
class ClientLag:
    """What the client measured about itself during one tier (``drive``: only while a stream
    that produced tokens was in flight; ``wall_s`` is how long that was)."""

    loop_lag_s: list[float] = field(default_factory=list)
    send_lag_s: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    workers: int = 1  # client processes the figures come from

    def summary(self) -> dict[str, float]:
        busy = self.cpu_s / (self.wall_s * self.workers) if self.wall_s else 0.0
        out: dict[str, float] = {"cpu_share": busy, "workers": float(self.workers)}
        out["counted_s"] = self.wall_s
        for name, values in (("loop_lag", self.loop_lag_s), ("send_lag", self.send_lag_s)):
            arr = np.asarray(values or [0.0]) * 1000
            out[f"p50_{name}_ms"] = float(np.percentile(arr, 50))
            out[f"p99_{name}_ms"] = float(np.percentile(arr, 99))
            out[f"max_{name}_ms"] = float(arr.max())
        return out

    def saturated(self, median_itl_ms: float = 0.0, lag_limit_ms: float | None = None) -> bool:
        """Whether the client, not the server, limited a tier whose median ITL was this.

        ``lag_limit_ms`` (a workload's ``client_lag_limit_ms``) replaces the gap-based limit on
        the p99 loop lag.
        """
        s = self.summary()
        late = lag_limit_ms or max(SATURATED_LAG_FLOOR_MS, SATURATED_GAP_SHARE * median_itl_ms)
        return (
            s["cpu_share"] > SATURATED_CPU_SHARE
            or s["p99_send_lag_ms"] > SATURATED_SEND_LAG_MS
            or s["p99_loop_lag_ms"] > late
        )


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
    on_request: Callable[[RequestRecord], None] | None = None,
    start: float | None = None,
) -> tuple[list[RequestRecord], ClientLag]:
    """Send every request with at most ``concurrency`` in flight; records in request order.

    ``start`` (a ``perf_counter`` time, default now) is when the tier begins: arrival offsets
    count from it, and several processes given the same ``start`` begin together.
    """
    records: list[RequestRecord | None] = [None] * len(requests)
    send_lag: dict[int, float] = {}  # open loop: how late request i was sent
    next_index = iter(range(len(requests)))
    start = perf_counter() if start is None else start
    if start > perf_counter():
        await asyncio.sleep(start - perf_counter())

    async def worker() -> None:
        for i in next_index:
            due = start + arrivals[i]
            if due > perf_counter():
                await asyncio.sleep(due - perf_counter())
            if arrivals[i] > 0:
                send_lag[i] = max(0.0, perf_counter() - due)
            records[i] = rec = await client.send(requests[i], bodies[i])
            if on_request is not None:
                on_request(rec)

    samples: list[_Sample] = []
    probe = asyncio.create_task(_probe_loop(samples))
    try:
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(requests)))))
    finally:
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe
    return [r for r in records if r is not None], counted_lag(records, samples, send_lag)


_Sample = tuple[float, float, float, float]  # wake time, loop lag, CPU s, wall s since last


async def _probe_loop(out: list[_Sample]) -> None:
    # A sleeper that wakes late measures how long other callbacks held the event loop; the
    # CPU time of each interval lets CPU share be counted over chosen intervals only.
    t, cpu = perf_counter(), time.process_time()
    while True:
        await asyncio.sleep(_PROBE_S)
        now, cpu_now = perf_counter(), time.process_time()
        out.append((now, max(0.0, now - t - _PROBE_S), cpu_now - cpu, now - t))
        t, cpu = now, cpu_now


def counted_lag(
    records: Sequence[RequestRecord | None],
    samples: Sequence[_Sample],
    send_lag: Mapping[int, float],
) -> ClientLag:
    """The client's figures over the intervals when a stream that produced tokens was in
    flight (``records`` and ``send_lag`` by request index: only such requests' sends count)."""
    streamed = [r for r in records if r is not None and r.chunk_times]
    starts, ends = _token_spans(streamed)
    kept = [s for s in samples if _overlaps(s[0] - s[3], s[0], starts, ends)]
    return ClientLag(
        loop_lag_s=[s[1] for s in kept],
        send_lag_s=[v for i, v in send_lag.items() if (r := records[i]) and r.chunk_times],
        cpu_s=float(sum(s[2] for s in kept)),
        wall_s=float(sum(s[3] for s in kept)),
    )


def _token_spans(streamed: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    # Send to last chunk of every stream that produced tokens, merged into disjoint spans.
    spans = sorted((r.send_time, r.chunk_times[-1]) for r in streamed)
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    arr = np.asarray(merged, dtype=float).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _overlaps(a: float, b: float, starts: np.ndarray, ends: np.ndarray) -> bool:
    i = int(np.searchsorted(starts, b, side="right")) - 1
    return i >= 0 and ends[i] >= a


def client_limited(
    records: Sequence[RequestRecord], lag: ClientLag, median_itl_ms: float, limit: float | None
) -> bool:
    """``lag.saturated``, but never for a tier where no stream produced a token."""
    return any(r.chunk_times for r in records) and lag.saturated(median_itl_ms, limit)


async def scrape(http: httpx.AsyncClient) -> dict[str, float] | None:
    """A ``/metrics`` snapshot; ``None`` when the server exposes none."""
    try:
        resp = await http.get("/metrics", timeout=10.0)
    except httpx.HTTPError:
        return None
    if resp.status_code != 200:
        return None
    try:
        return prom.parse(resp.text)
    except ValueError:
        return None


async def _sample_gauges(http: httpx.AsyncClient, out: list[dict[str, float]]) -> None:
    while True:
        await asyncio.sleep(_SCRAPE_S)
        snap = await scrape(http)
        if snap is not None:
            out.append(snap)


Drive = Callable[
    [Sequence[BenchRequest], Sequence[bytes], int, Sequence[float], OnRequest | None],
    Awaitable[tuple[list[RequestRecord], ClientLag]],
]


async def run_http(
    endpoint: Endpoint,
    workload: WorkloadSpec,
    slos: Sequence[SLO],
    on_tier: Callable[[TierResult], None],
    base_dir: Path | None,
    on_request: OnRequest | None = None,
    workers: int = 1,
) -> None:
    """Every tier of ``workload`` over one client; ``on_tier`` gets each ``TierResult``.

    With ``workers > 1`` the measured requests go through that many client processes
    (``objectives.workers``); warm-up and ``/metrics`` scrapes stay in this process.
    """
    from objectives.runner import tier_result
    from objectives.workers import WorkerPool

    assert endpoint.base_url is not None
    timeout = workload.request_timeout_s
    pool = (
        WorkerPool(workers, endpoint.base_url, workload.endpoint, timeout) if workers > 1 else None
    )
    try:
        async with make_http_client(endpoint.base_url, timeout) as http:
            client = StreamingClient(http, workload.endpoint, timeout)

            async def in_process(*args: Any) -> tuple[list[RequestRecord], ClientLag]:
                return await drive(client, *args)

            send: Drive = pool.drive if pool is not None else in_process
            await _warm_up(client, workload, endpoint.model, base_dir)
            for i, concurrency in enumerate(workload.tiers):
                requests = build_requests(workload, base_dir, round=i)
                records, lag, server = await _tier(
                    http, send, requests, endpoint.model, workload, concurrency, on_request
                )
                result = tier_result(records, concurrency, workload, slos, server, lag.summary())
                itl = float(result.metrics["median_itl_ms"])
                result.client_saturated = client_limited(
                    records, lag, itl, workload.client_lag_limit_ms
                )
                on_tier(result)
    finally:
        if pool is not None:
            pool.close()


async def _warm_up(
    client: StreamingClient, workload: WorkloadSpec, model: str, base_dir: Path | None
) -> None:
    warm = build_warmup(workload, base_dir)
    if warm:
        bodies = prepare(warm, model, workload.endpoint)
        await drive(client, warm, bodies, min(len(warm), workload.tiers[0]), [0.0] * len(warm))


async def _tier(
    http: httpx.AsyncClient,
    send: Drive,
    requests: Sequence[BenchRequest],
    model: str,
    workload: WorkloadSpec,
    concurrency: int,
    on_request: OnRequest | None,
) -> tuple[list[RequestRecord], ClientLag, dict[str, float]]:
    bodies = prepare(requests, model, workload.endpoint)
    arrivals = arrival_offsets(
        len(requests), workload.request_rate, workload.burstiness, workload.seed
    )
    before = await scrape(http)
    samples: list[dict[str, float]] = []
    sampler = asyncio.create_task(_sample_gauges(http, samples)) if before is not None else None
    try:
        records, lag = await send(requests, bodies, concurrency, arrivals, on_request)
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
