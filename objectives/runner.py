"""Run every tier of a workload against one ready engine and measure each tier.

Over HTTP (``endpoint.base_url``) the requests go through one streaming client for the whole
run; against a virtual engine (``endpoint.virtual``) they are served in virtual time. Either
way the same code turns records into a ``TierResult``: warm-up requests first (not measured),
then tier after tier, each with the seeded requests of its round.

Interruption: on Ctrl-C, cancellation or a hung engine (``objectives.stall``) the exception
propagates unchanged, carrying the completed tiers as ``exc.tier_results`` (read it with
``partial_results(exc)``).

Failures stay data: a tier with failed requests says so in ``failures`` (the objective decides
what a failure rate means); a tier the client limited is ``client_saturated``, and
``objectives.affinity.client_limit_reason`` says why, for a caller that treats it as not the
config's fault.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from objectives import prom
from objectives.affinity import pinned
from objectives.datasets import build_requests, build_warmup
from objectives.endpoint import Endpoint, VirtualEngine
from objectives.load import run_http
from objectives.metrics import SLO
from objectives.race import Race, decided_records, request_series
from objectives.records import RequestRecord
from objectives.result import TierResult
from objectives.tier import tier_duration as tier_duration  # the bench scripts import it here
from objectives.tier import tier_result
from objectives.vocab import with_vocab
from objectives.workload import WorkloadSpec
from tuner.errors import TunerError

OnTier = Callable[[TierResult], None]
OnRequest = Callable[[RequestRecord], None]
OnWarmup = Callable[[float], None]  # the warm-up's seconds, on the engine's clock


def run_benchmark(
    endpoint: Endpoint,
    workload: WorkloadSpec,
    slos: Sequence[SLO] = (),
    on_tier: OnTier | None = None,
    base_dir: Path | None = None,
    on_request: OnRequest | None = None,
    client_workers: int = 1,
    on_warmup: OnWarmup | None = None,
    first_round: int = 0,
    race: Race | None = None,
) -> list[TierResult]:
    """Measure every tier of ``workload`` against ``endpoint``; see the module docstring.

    ``base_dir`` resolves relative dataset and tokenizer paths; ``on_request`` sees every
    measured record as it completes (progress display); ``client_workers`` > 1 sends each HTTP
    tier from that many client processes (``objectives.workers``); ``on_warmup`` gets the
    seconds the warm-up took (virtual ones against a virtual engine, which has no wall time
    of its own), when there is one. Over HTTP, token-id prompts
    are drawn inside the served model's vocabulary when the workload leaves ``vocab_size``
    unset (``objectives.vocab.with_vocab``). Tier ``i`` sends the requests of content round
    ``first_round + i``: a caller measuring one engine again and again (``tune capacity``)
    moves it on, so no run hits the prefix-cache blocks an earlier one left behind. With a
    ``race``, a tier whose launch is out of contention there stops early
    (``objectives.race``); each tier measured in full keeps its per-request figures.
    """
    results: list[TierResult] = []
    try:
        collect = _collect(results, on_tier)
        if endpoint.virtual is not None:
            _run_virtual(
                endpoint.virtual,
                workload,
                slos,
                collect,
                base_dir,
                on_request,
                on_warmup,
                first_round,
                race,
            )
        elif endpoint.base_url is not None:
            workload = with_vocab(workload, endpoint, base_dir)
            with pinned(workload.client_cpus):
                asyncio.run(
                    run_http(
                        endpoint,
                        workload,
                        slos,
                        collect,
                        base_dir,
                        on_request,
                        client_workers,
                        on_warmup,
                        first_round=first_round,
                        race=race,
                    )
                )
        else:
            raise TunerError("endpoint has neither a base_url nor a virtual engine")
    except (KeyboardInterrupt, asyncio.CancelledError, TunerError) as exc:
        exc.tier_results = list(results)  # type: ignore[union-attr]
        raise
    return results


def partial_results(exc: BaseException) -> list[TierResult]:
    """Tiers completed before ``exc`` interrupted ``run_benchmark`` (empty when none)."""
    return list(getattr(exc, "tier_results", []))


def _collect(results: list[TierResult], on_tier: OnTier | None) -> OnTier:
    def add(result: TierResult) -> None:
        results.append(result)
        if on_tier is not None:
            on_tier(result)

    return add


def _warm_virtual(
    engine: VirtualEngine, workload: WorkloadSpec, base_dir: Path | None
) -> float | None:
    """The unmeasured warm-up requests; their virtual seconds (None: no warm-up asked)."""
    warmup = build_warmup(workload, base_dir)
    if not warmup:
        return None
    return tier_duration(engine.run(warmup, min(len(warmup), workload.tiers[0])))


def _run_virtual(
    engine: VirtualEngine,
    workload: WorkloadSpec,
    slos: Sequence[SLO],
    on_tier: OnTier,
    base_dir: Path | None,
    on_request: OnRequest | None,
    on_warmup: OnWarmup | None,
    first_round: int,
    race: Race | None = None,
) -> None:
    warmed = _warm_virtual(engine, workload, base_dir)
    if warmed is not None and on_warmup is not None:
        on_warmup(warmed)
    for i, concurrency in enumerate(workload.tiers):
        requests = build_requests(workload, base_dir, round=first_round + i)
        before = engine.server_counters()
        records = engine.run(requests, concurrency, workload.request_rate, workload.burstiness)
        # End-of-tier gauge values say nothing of the tier: the run's own peaks stand in.
        after = {k: v for k, v in engine.server_counters().items() if k not in prom.GAUGES}
        server = prom.tier_counters(before, after, engine.gauge_peaks())
        series = request_series(records)
        stop = race.stop_after(concurrency, series) if race is not None else None
        # The engine served the whole tier in virtual time; a tier decided early is cut where
        # the decision fell, which is what a stopped client would have measured: requests
        # that ended before it are unaffected by those sent after.
        duration = None
        if stop is not None:
            records, duration = decided_records(records, series, stop)
        if on_request is not None:
            for rec in records:
                on_request(rec)
        result = tier_result(records, concurrency, workload, slos, server, duration_s=duration)
        result.decided_after = stop
        result.requests = series if stop is None else {}
        on_tier(result)
