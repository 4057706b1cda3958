"""Running one trial: launch the engine once, benchmark every tier, always stop it.

The outcome is plain data: per-tier metrics, the objective value per tier, constraint values and,
for configs that cannot work, the reason. A config fault (refused, OOM, crash, SLO miss, failed
requests) is an outcome the sampler learns from; an infrastructure fault raises ``InfraError``
so the study marks the trial FAIL and runs its config again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from launchers import Launcher, launcher_class
from objectives.affinity import client_limit_reason
from objectives.endpoint import Endpoint
from objectives.metrics import SLO, merge_failures
from objectives.objective import Objective
from objectives.race import Race, series_of
from objectives.result import TierResult
from objectives.runner import run_benchmark
from tuner.engine import EngineConfig
from tuner.errors import FailureKind, InfraError, LaunchError
from tuner.record.times import TrialTimes
from tuner.record.trial import DECIDED_AFTER, TrialOutcome, infeasible
from tuner.run.leftovers import noted_engines
from tuner.run.quality import QualityRun, check_quality
from tuner.space.load import settings_of
from tuner.space.schema import Space
from tuner.storage.results import write_json, write_trial_config


class TrialRunner:
    """Runs trials of one space against its target; one launcher instance per trial."""

    def __init__(
        self,
        space: Space,
        objective: Objective,
        ready_timeout_s: float,
        base_dir: Path | None = None,
    ) -> None:
        self.space = space
        self.base_dir = base_dir
        self.objective = objective
        self.ready_timeout_s = ready_timeout_s
        self.launcher_cls = launcher_class(space.target.kind)
        self.settings = settings_of(space)

    @property
    def tiers(self) -> list[int]:
        return list(self.space.workload.tiers)

    def run(
        self,
        config: EngineConfig,
        trial_dir: Path,
        on_tier: Callable[[TierResult], None] | None = None,
        times: TrialTimes | None = None,
        race: Race | None = None,
        seed: int | None = None,
    ) -> TrialOutcome:
        """Launch, benchmark every tier, stop. Faults not the config's raise ``InfraError``.

        ``times`` is filled in as each phase ends, so the caller keeps what a launch that
        failed or was interrupted midway had spent. With a ``race`` a tier where the launch is
        out of contention stops early (``objectives.race``); without one, every tier is
        measured in full (the baseline, confirmations). ``seed`` draws the workload again
        (another draw's prompts and answer lengths; None: the space's own seed)."""
        write_trial_config(trial_dir, config)
        results: list[TierResult] = []
        times = times if times is not None else TrialTimes()

        def keep(tier: TierResult) -> None:
            results.append(tier)
            # The tier's own duration: on the engine's clock, as the start-up is.
            times.tiers_s[str(tier.concurrency)] = float(tier.metrics.get("duration", 0.0))
            write_json(trial_dir / f"bench_c{tier.concurrency}.json", tier.to_dict())
            if on_tier is not None:
                on_tier(tier)

        def warmed(seconds: float) -> None:
            times.warmup_s = seconds

        try:
            with self.serving(config, trial_dir, times) as endpoint:
                workload, slos = self.space.workload, self.space.slos
                if seed is not None:
                    workload = workload.model_copy(update={"seed": seed})
                run_benchmark(
                    endpoint, workload, slos, keep, self.base_dir, on_warmup=warmed, race=race
                )
                quality = self._answers(endpoint, results, trial_dir)
                times.quality_s = quality.seconds if quality is not None else 0.0
        except LaunchError as err:  # the config's fault; an InfraError is not, and goes on up
            return self._failed(err, results)
        return self.outcome(results, quality)

    def _answers(
        self, endpoint: Endpoint, results: Sequence[TierResult], trial_dir: Path
    ) -> QualityRun | None:
        """After the tiers, on the same engine: how it answers (``tuner.run.quality``). Not
        after a tier whose requests failed: the launch fails on them, the config's fault, and
        its engine may be gone, which would read as a fault of the probes."""
        if any(int(r.metrics.get("failed", 0)) for r in results):
            return None
        workload = self.space.workload
        return check_quality(endpoint, self.space.quality, workload, trial_dir, self.base_dir)

    @contextmanager
    def serving(
        self, config: EngineConfig, run_dir: Path, times: TrialTimes | None = None
    ) -> Iterator[Endpoint]:
        """The config's engine, launched and ready, stopped however the block ends: one launch
        that a trial measures every tier on (and ``tune capacity`` every probe). ``times``
        gets its start-up, however the start ends."""
        times = times if times is not None else TrialTimes()
        # The note outlives the launcher's stop, so a kill at any point leaves it behind.
        with noted_engines(run_dir) as note, self.launcher_cls(self.settings) as launcher:
            yield self._ready(launcher, config, run_dir, times, note.take)

    def _ready(
        self,
        launcher: Launcher,
        config: EngineConfig,
        trial_dir: Path,
        times: TrialTimes,
        on_started: Callable[[], None],
    ) -> Endpoint:
        """Start the engine and wait until it serves, timing it whichever way it ends;
        ``on_started`` runs once the engine's processes exist."""
        started = time.monotonic()
        try:
            launcher.start(config, trial_dir)
            on_started()
            endpoint = launcher.wait_ready(self.ready_timeout_s)
            times.ready = True
            return endpoint
        finally:
            startup = launcher.startup(time.monotonic() - started)
            times.startup_s = startup.seconds
            times.compile_key, times.compile_cached = startup.compile_key, startup.compile_cached

    def outcome(
        self, results: Sequence[TierResult], quality: QualityRun | None = None
    ) -> TrialOutcome:
        """Objective values and constraints from every tier's results (and the launch's
        answers, which the run loop sets against the baseline's)."""
        if why := client_limit_reason(results, self.space.workload.client_cpus):
            raise InfraError(why)
        tiers = {str(r.concurrency): _tier_data(r) for r in results}
        values = [self._value(tiers.get(str(c)), c) for c in self.tiers]
        out = TrialOutcome(values=values, tiers=tiers, requests=self._requests(results))
        if quality is not None:
            out.answers, out.quality_score = quality.answers, quality.score
        out.tier_ok = {
            str(c): any(r.concurrency == c and _tier_ok(r) for r in results) for c in self.tiers
        }
        failed = sum(int(r.metrics.get("failed", 0)) for r in results)
        total = failed + sum(int(r.metrics.get("completed", 0)) for r in results)
        out.constraints["failed_requests"] = failed / total if total else 1.0
        out.constraints["slo"] = slo_violation(self.space.slos, tiers)
        if failed:
            reasons = _merge_failures(results)
            out.failure = f"{failed} of {total} requests failed ({reasons})"
            out.failure_kind = "failed_requests"
        elif out.constraints["slo"] > 0:
            missed = [f"c{r.concurrency} {v}" for r in results for v in r.slo_violations]
            out.failure = "missed SLO: " + ("; ".join(missed) or "a tier has no measurement")
            out.failure_kind = "slo"
        return out

    def _requests(self, results: Sequence[TierResult]) -> dict[str, list[float | None]]:
        """Per tier measured in full, the objective's per-request values (seconds, rounded to
        a microsecond): what later launches race against."""
        name = series_of(self.objective.key)
        if name is None:
            return {}
        return {
            str(r.concurrency): [None if v is None else round(v, 6) for v in r.requests[name]]
            for r in results
            if r.decided_after is None and name in r.requests
        }

    def _value(self, metrics: Mapping[str, Any] | None, concurrency: int) -> float:
        """The tier's value as the sampler is told it: the objective, charged for users the
        server held back. TPOT measures only the users it seated, so a seat limit would look
        fast; told as if every user had a seat's share (``c / seated`` worse), the search looks
        for configs that serve all of a tier's users. Recommendations read the measured metric
        (the trial record), never this value."""
        value = (metrics or {}).get(self.objective.key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return self.objective.worst
        held = ((metrics or {}).get("server") or {}).get("users_held") or 0.0
        seated = max(1.0, concurrency - float(held))
        share = concurrency / seated
        return float(value) * share if self.objective.direction == "minimize" else value / share

    def _failed(self, err: LaunchError, results: Sequence[TierResult]) -> TrialOutcome:
        out = infeasible(self.objective, len(self.tiers), "engine", str(err), err.kind.value)
        out.tiers = {str(r.concurrency): _tier_data(r) for r in results}
        last = err.log_tail.strip().splitlines()[-1] if err.log_tail.strip() else ""
        if last and str(err) not in last and last not in str(err):
            out.failure = f"{err} | {last}"
        return out


def slo_violation(slos: Sequence[SLO], tiers: Mapping[str, Mapping[str, Any]]) -> float:
    """Sum of relative overshoots of the per-tier SLOs (0 when all are met).

    Per-request SLOs (ttft, tpot, e2el) define goodput instead, as in ``vllm bench serve``.
    """
    total = 0.0
    for slo in slos:
        if slo.per_request:
            continue
        for tier, metrics in tiers.items():
            if slo.applies_to(int(tier)):
                total += _overshoot(slo, metrics.get(slo.metric))
    return total


def _overshoot(slo: SLO, value: Any) -> float:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 1.0
    if slo.max is not None and value > slo.max:
        return (value - slo.max) / slo.max if slo.max else 1.0
    if slo.min is not None and value < slo.min:
        return (slo.min - value) / slo.min if slo.min else 1.0
    return 0.0


def _tier_ok(result: TierResult) -> bool:
    return not result.failures and not result.slo_violations and not result.client_saturated


def _tier_data(result: TierResult) -> dict[str, Any]:
    data: dict[str, Any] = dict(result.metrics)
    if result.decided_after is not None:
        data[DECIDED_AFTER] = result.decided_after
    if result.failures:
        data["failure_reasons"] = dict(result.failures)
    if result.server:
        data["server"] = dict(result.server)
    if result.notes:
        data["notes"] = list(result.notes)
    return data


def _merge_failures(results: Sequence[TierResult]) -> str:
    # Most frequent first; a server's message (HTTP 400: ...) is kept verbatim, once.
    merged = merge_failures(r.failures for r in results)
    ranked = sorted(merged.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{n}x {reason}" for reason, n in ranked) or "no reason given"


__all__ = ["FailureKind", "TrialRunner"]
