"""One probe: the study's workload sent once at one load on a running engine, and judged.

A probe is the study's own workload with its tier replaced by the load: ``c`` users in a
closed loop, or in ``request_rate`` mode an open loop at the rate with ``in_flight`` users at
most. It sends at least ``PER_USER`` requests per user (a closed loop of ``c`` needs more than
``c`` requests to hold ``c`` in flight after the first wave) or ``RATE_SECONDS`` of arrivals,
and never fewer than the study's own tier did; a dataset of shared prompts (code files, prefixes)
grows more of them, so each is still sent as often as in the study. Each probe sends fresh
content (its own round), so no probe hits the prefix-cache blocks an earlier one left behind.

A probe holds when no request failed, the client kept up, and every capacity SLO holds. A run
the client limited is run again (its figures are the client's, not the engine's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from objectives.endpoint import Endpoint
from objectives.metrics import SLO
from objectives.result import TierResult
from objectives.runner import run_benchmark
from objectives.tails import samples_key
from objectives.workload import (
    CodeEditDataset,
    DatasetSpec,
    PrefixRepetitionDataset,
    WorkloadSpec,
)
from tuner.errors import LaunchError, SpaceError
from tuner.space.schema import Space
from tuner.storage.capacity import CONCURRENCY, Probe
from tuner.storage.results import write_json

PER_USER = 2
RATE_SECONDS = 20.0
CLIENT_TRIES = 3  # as a trial the client limited is run again, up to the study's infra limit
ALWAYS_KEPT = ("completed", "failed", "output_throughput", "request_throughput")


def capacity_slos(space: Space) -> tuple[list[SLO], int]:
    """The per-tier SLOs of the space's highest tier, applying at every load, and that tier.

    Raises:
        SpaceError: when no per-tier SLO applies there (per-request ones define goodput only).
    """
    top = max(space.workload.tiers)
    slos = [s for s in space.slos if not s.per_request and s.applies_to(top)]
    if not slos:
        raise SpaceError(
            f"the space has no per-tier SLO at its highest tier c{top} for capacity to hold "
            "(per-request ttft/tpot/e2el SLOs define goodput only); add one under slos:, "
            "e.g. {metric: p99_ttft_ms, max: 2000}"
        )
    return [s.model_copy(update={"tiers": None}) for s in slos], top


def probe_workload(
    workload: WorkloadSpec, load: float, mode: str, in_flight: int, warm: bool
) -> WorkloadSpec:
    """The study's workload at ``load``; the warm-up only on a probe that runs first."""
    data: dict[str, Any] = workload.model_dump()
    if mode == CONCURRENCY:
        count = max(workload.requests_per_tier, PER_USER * int(load))
        data.update(tiers=[int(load)])
    else:
        count = max(workload.requests_per_tier, math.ceil(RATE_SECONDS * load))
        data.update(tiers=[in_flight], request_rate=load)
    data.update(num_prompts=count, warmup=workload.warmup if warm else 0)
    _more_shared_prompts(data, workload.dataset, count)
    return WorkloadSpec.model_validate(data)


def _more_shared_prompts(data: dict[str, Any], ds: DatasetSpec, count: int) -> None:
    """More files (or prefixes) for more requests, each sent as often as in the study: cycling
    the study's own would send each file many more times, and the prefix cache would serve
    a large load a lighter workload than the study measured."""
    if isinstance(ds, PrefixRepetitionDataset):
        data["dataset"]["num_prefixes"] = prefixes = math.ceil(count / ds.repeats)
        data["num_prompts"] = prefixes * ds.repeats  # the only count this dataset accepts
    elif isinstance(ds, CodeEditDataset):
        data["dataset"]["num_files"] = max(ds.num_files, math.ceil(count / ds.edits))


def judge(result: TierResult, load: float, phase: str, slos: list[SLO]) -> Probe:
    """Whether one probe held, the figures it was judged on, and why it broke if it did."""
    metrics = result.metrics
    keys = [k for s in slos for k in (s.metric, samples_key(s.metric)) if k] + list(ALWAYS_KEPT)
    values = {k: float(metrics[k]) for k in dict.fromkeys(keys) if k in metrics}
    violated = [s.metric for s in slos if _breaks(s, metrics)]
    broke = list(result.slo_violations)
    failed, completed = int(metrics.get("failed", 0)), int(metrics.get("completed", 0))
    if failed:
        reasons = ", ".join(f"{n}x {why}" for why, n in result.failures.items())
        broke.append(f"{failed} of {failed + completed} requests failed ({reasons})")
    if result.client_saturated:
        broke.append("the benchmark client, not the engine, limited it")
    # Nothing completed: the engine stopped answering, and every later probe would say so.
    fatal = completed == 0
    probe = Probe(load, not broke, failed + completed, phase, values, broke, violated, fatal)
    probe.client_limited = result.client_saturated
    return probe


def _breaks(slo: SLO, metrics: dict[str, float | int]) -> bool:
    return slo.metric not in metrics or slo.violated_by(float(metrics[slo.metric]))


@dataclass
class Prober:
    """Measures one running engine at load after load; ``runs`` counts them (each its round)."""

    endpoint: Endpoint
    workload: WorkloadSpec
    slos: list[SLO]
    mode: str
    in_flight: int
    base_dir: Path | None
    run_dir: Path
    report: Callable[[Probe], None] = lambda probe: None
    runs: int = 0

    def __call__(self, load: float, phase: str) -> Probe:
        """One measurement at ``load``; a run the client limited says nothing of the engine and
        is run again, and ``CLIENT_TRIES`` of them in a row stop the search there."""
        load = int(load) if self.mode == CONCURRENCY else load
        probe = self._once(load, phase)
        while probe.client_limited and probe.retries + 1 < CLIENT_TRIES:
            retries = probe.retries + 1
            probe = self._once(load, phase)
            probe.retries = retries
        if probe.client_limited:
            probe.fatal = True
            probe.broke.append(f"{CLIENT_TRIES} runs in a row: a faster client must measure this")
        self.report(probe)
        return probe

    def _once(self, load: float, phase: str) -> Probe:
        n, self.runs = self.runs, self.runs + 1
        spec = probe_workload(self.workload, load, self.mode, self.in_flight, warm=n == 0)
        try:
            (result,) = run_benchmark(
                self.endpoint, spec, self.slos, base_dir=self.base_dir, first_round=n
            )
        except LaunchError as err:  # the simulated engine dies under load as vLLM's does
            broke = [f"the engine died: {err}"]
            probe = Probe(load, False, spec.requests_per_tier, phase, broke=broke, fatal=True)
        else:
            write_json(self.run_dir / f"probe{n:02d}_{phase}_{load:g}.json", result.to_dict())
            probe = judge(result, load, phase, self.slos)
        return probe
