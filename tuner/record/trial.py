"""The trial record: every key a trial stores in the study, written and read back here only.

Optuna keeps a trial's own data as user attrs with string keys. This module is the one place
that knows those keys: ``TrialRecord.of`` reads a stored trial into typed fields, and the
``write_*`` / ``mark_*`` functions and ``enqueue_*`` attrs write them. Everything else in the
project, the run loop, the samplers and every exporter, sees fields, never key strings.

A trial's outcome (``TrialOutcome``) is what a launch measured; the record adds what the
study knows about the trial: whether it is the baseline, which launch it repeats, confirms or
was queued again from, why it failed, and where its launch's time went (``TrialTimes``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective
from tuner.record.times import TrialTimes

CONSTRAINT_KEYS = ("rules", "engine", "failed_requests", "slo", "quality")
QUALITY = "quality"  # the constraint of a config answering below the space's quality floor
RULES = "rules"  # failure_kind of a config refused by a rule before any launch

_TIERS, _FEASIBLE, _TIER_OK = "tiers", "feasible", "tier_ok"
_FAILURE, _FAILURE_KIND, _INTERRUPTED = "failure", "failure_kind", "interrupted"
_BASELINE, _CONFIRM_OF, _DUPLICATE_OF = "baseline", "confirm_of", "duplicate_of"
_REQUEUED_FROM, _REQUEUE_REASON = "requeued_from", "requeue_reason"
_REVERT_OF = "revert_of"  # a pick with its knobs that did not matter back at their defaults
_REVERT_KNOB = "revert_knob"  # the one knob such a launch tries at its default alone
_REVERT_AT = "revert_at"  # the tier whose idle knobs such a launch put back
# A confirmation on another draw of the workload: its seed, and the tier whose pick it checks.
_DRAW_SEED, _DRAW_FOR = "draw_seed", "draw_for"
_WARM_FROM = "warm_start_from"  # a warm start's queued pick: {"study": name, "trial": number}
# The launch a config renders to, set once its params are all written and before any launch:
# it identifies twins, and tells a lost trial's config from a fragment of a proposal.
_FINGERPRINT, _COMMAND = "fingerprint", "engine_command"
_TIMES = "times"  # a launch's start-up, warm-up and tiers in seconds (``TrialTimes``)
# The launch's probe answers (``objectives.probes``) and its quality command's score.
_ANSWERS, _QUALITY_SCORE = "answers", "quality_score"
# Per tier measured in full: the objective's per-request values (seconds, request order), what
# a later launch's requests are paired against (``objectives.race``).
_REQUESTS = "requests"
DECIDED_AFTER = "decided_after"  # a tier's key: the requests a tier stopped early rests on


@dataclass
class TrialOutcome:
    """What a trial measured, ready for the study's storage."""

    values: list[float]
    tiers: dict[str, dict[str, Any]] = field(default_factory=dict)
    constraints: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(CONSTRAINT_KEYS, 0.0)
    )
    failure: str | None = None
    failure_kind: str | None = None
    # Per tier: served every request and met that tier's SLOs. A config that misses an SLO at
    # c40 can still be the best answer at c1, so recommendations read this, not `feasible`.
    tier_ok: dict[str, bool] = field(default_factory=dict)
    answers: list[Any] | None = None  # the probe answers (None: not asked)
    quality_score: float | None = None  # the space's quality command's score
    requests: dict[str, list[float | None]] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values())


def infeasible(
    objective: Objective, n_tiers: int, key: str, reason: str, kind: str
) -> TrialOutcome:
    """An outcome for a config that cannot work: worst values, one constraint violated."""
    out = TrialOutcome(values=[objective.worst] * n_tiers, failure=reason, failure_kind=kind)
    out.constraints[key] = 1.0
    return out


@dataclass(frozen=True)
class TrialRecord:
    """One stored trial, read back: its state, its config, its measurements, its history."""

    number: int
    state: TrialState
    params: dict[str, Any]
    tiers: dict[str, dict[str, Any]]
    feasible: bool
    tier_ok: dict[str, bool]
    failure: str | None
    failure_kind: str | None
    baseline: bool
    confirm_of: int | None
    duplicate_of: int | None
    requeued_from: int | None
    interrupted: bool
    fingerprint: str | None
    engine_command: str | None
    times: TrialTimes | None  # None: nothing launched (a rule, a repeat) or an older study
    warm_from: dict[str, Any] | None = None  # the earlier study's trial this config was its pick
    answers: list[Any] | None = None  # its probe answers (None: not asked, or an older study)
    quality_score: float | None = None  # the space's quality command's score
    lower_quality: bool = False  # the run judged it below the quality floor, as the sampler saw
    requests: dict[str, list[float | None]] = field(default_factory=dict)
    revert_of: int | None = None  # the pick this config is, with its idle knobs at the default
    # The one knob tried at its default on top of a walk's earlier steps (None: all idle knobs
    # together); with ``revert_at`` too, the knobs of that tier's pick measured apart
    # (comma-separated where several went back at once, ``tuner.run.prune``).
    revert_knob: str | None = None
    revert_at: int | None = None  # the tier whose idle knobs it put back
    # The workload seed of a launch on another draw of the workload than the study's (None:
    # the study's own), and the tier whose pick it checks (``tuner.run.holdout``).
    draw_seed: int | None = None
    draw_for: int | None = None

    @classmethod
    def of(cls, trial: FrozenTrial) -> TrialRecord:
        a = trial.user_attrs
        return cls(
            number=trial.number,
            state=trial.state,
            params=trial.params,  # read-only views: a record is read on every sampler step
            tiers=a.get(_TIERS) or {},
            feasible=bool(a.get(_FEASIBLE)),
            tier_ok=a.get(_TIER_OK) or {},
            failure=a.get(_FAILURE),
            failure_kind=a.get(_FAILURE_KIND),
            baseline=bool(a.get(_BASELINE)),
            confirm_of=_int_or_none(a.get(_CONFIRM_OF)),
            duplicate_of=_int_or_none(a.get(_DUPLICATE_OF)),
            requeued_from=_int_or_none(a.get(_REQUEUED_FROM)),
            interrupted=bool(a.get(_INTERRUPTED)),
            fingerprint=a.get(_FINGERPRINT),
            engine_command=a.get(_COMMAND),
            times=TrialTimes.of(a.get(_TIMES)),
            warm_from=a.get(_WARM_FROM),
            answers=a.get(_ANSWERS),
            quality_score=_float_or_none(a.get(_QUALITY_SCORE)),
            lower_quality=(trial.constraints or {}).get(QUALITY, 0.0) > 0,
            requests=a.get(_REQUESTS) or {},
            revert_of=_int_or_none(a.get(_REVERT_OF)),
            revert_knob=a.get(_REVERT_KNOB),
            revert_at=_int_or_none(a.get(_REVERT_AT)),
            draw_seed=_int_or_none(a.get(_DRAW_SEED)),
            draw_for=_int_or_none(a.get(_DRAW_FOR)),
        )

    @property
    def complete(self) -> bool:
        return self.state == TrialState.COMPLETE

    @property
    def refused_by_rule(self) -> bool:
        return self.failure_kind == RULES

    @property
    def is_measurement(self) -> bool:
        """A finished launch of its own (not a copied duplicate, not a rule refusal)."""
        return self.complete and self.duplicate_of is None and not self.refused_by_rule

    @property
    def root(self) -> int:
        """The trial number of the first measurement of this trial's config."""
        return self.confirm_of if self.confirm_of is not None else self.number

    def tier(self, concurrency: int) -> dict[str, Any]:
        """The metrics measured at ``concurrency`` (empty when that tier was not reached)."""
        return dict(self.tiers.get(str(concurrency)) or {})

    def value(self, key: str, concurrency: int) -> float | None:
        """One finite metric at one tier, else None."""
        value = self.tier(concurrency).get(key)
        if not isinstance(value, int | float) or not math.isfinite(float(value)):
            return None
        return float(value)

    def lineage(self) -> dict[str, Any]:
        """The trials table's lineage columns: empty cells where a trial has no such role."""
        return {
            "failure_kind": self.failure_kind,
            "duplicate_of": self.duplicate_of,
            "confirm_of": self.confirm_of,
            # A launch of a pick with knobs back at their defaults: which pick, the tier whose
            # idle knobs went back, and the one knob tried alone (empty: all of them together).
            "revert_of": self.revert_of,
            "revert_at": self.revert_at,
            "revert_knob": self.revert_knob,
            # A confirmation on another draw of the workload: its seed, the tier it checks.
            "draw_seed": self.draw_seed,
            "draw_for": self.draw_for,
            "requeued_from": self.requeued_from,
            "interrupted": True if self.interrupted else None,
        }

    def server(self, concurrency: int, key: str) -> float | None:
        """One server-side figure of a tier (``users_held``, ``num_preemptions``...)."""
        value = (self.tier(concurrency).get("server") or {}).get(key)
        return float(value) if isinstance(value, int | float) else None

    def preempted(self, concurrency: int) -> bool:
        """Whether the engine preempted requests at the tier: it put running users back in the
        queue, to recompute their context."""
        return (self.server(concurrency, "num_preemptions") or 0.0) > 0

    def notes(self, concurrency: int) -> list[str]:
        """Why the tier left figures out (a steady-state window too short to measure)."""
        return [str(n) for n in self.tier(concurrency).get("notes") or []]

    def decided_after(self, concurrency: int) -> int | None:
        """The requests a tier stopped early rests on (``objectives.race``); None when it was
        measured in full."""
        n = self.tier(concurrency).get(DECIDED_AFTER)
        return int(n) if isinstance(n, int | float) else None

    def measured_in_full(self, concurrency: int) -> bool:
        """Whether the tier was measured on every request the space asks for: only such a
        tier may be a pick or a front point (a tier stopped early is a loser's estimate)."""
        return bool(self.tier(concurrency)) and self.decided_after(concurrency) is None

    def feasible_at(self, concurrency: int) -> bool:
        """Whether the trial served every request of the tier and met that tier's SLOs."""
        if not self.complete:
            return False
        if self.tier_ok:
            return bool(self.tier_ok.get(str(concurrency)))
        return self.feasible


def feasible_at(trial: FrozenTrial, concurrency: int) -> bool:
    """``TrialRecord.feasible_at`` of a stored trial."""
    return TrialRecord.of(trial).feasible_at(concurrency)


def is_baseline(trial: optuna.Trial) -> bool:
    """Whether a running trial launches the baseline (the engine's own defaults)."""
    return bool(trial.user_attrs.get(_BASELINE))


def asks_fresh_launch(trial: optuna.Trial) -> bool:
    """Whether a running trial is a confirmation: never answered from an identical launch."""
    return trial.user_attrs.get(_CONFIRM_OF) is not None


def measured_in_full(trial: optuna.Trial) -> bool:
    """Whether a running trial must measure every tier in full: the baseline (the yardstick)
    and confirmations (a pick's second launch) are never stopped early."""
    return bool(trial.user_attrs.get(_BASELINE)) or asks_fresh_launch(trial)


def write_launch(trial: optuna.Trial, fingerprint: str, command: str) -> None:
    """The launch a sampled config renders to, stored before the engine starts."""
    trial.set_user_attr(_FINGERPRINT, fingerprint)
    trial.set_user_attr(_COMMAND, command)


def write_partial_tiers(trial: optuna.Trial, tiers: Mapping[str, Any]) -> None:
    """The tiers measured so far, so that they survive a Ctrl-C mid-trial."""
    trial.set_user_attr(_TIERS, jsonable(tiers))


def write_times(trial: optuna.Trial, times: TrialTimes) -> None:
    """Where a launch's time went, whichever way it ended (nothing when it launched nothing)."""
    if times.launched:
        trial.set_user_attr(_TIMES, jsonable(times.to_json()))


def write_outcome(trial: optuna.Trial, outcome: TrialOutcome) -> None:
    for key, value in outcome.constraints.items():
        trial.set_constraint(key, value)
    trial.set_user_attr(_TIERS, jsonable(outcome.tiers))
    trial.set_user_attr(_FEASIBLE, outcome.feasible)
    trial.set_user_attr(_TIER_OK, outcome.tier_ok)
    trial.set_user_attr(_FAILURE, outcome.failure)
    trial.set_user_attr(_FAILURE_KIND, outcome.failure_kind)
    if outcome.answers is not None:
        trial.set_user_attr(_ANSWERS, jsonable(outcome.answers))
    if outcome.quality_score is not None:
        trial.set_user_attr(_QUALITY_SCORE, outcome.quality_score)
    if outcome.requests:
        trial.set_user_attr(_REQUESTS, jsonable(outcome.requests))


def write_tier_ok(trial: optuna.Trial, tier_ok: Mapping[str, bool]) -> None:
    """Per-tier feasibility alone, for a trial answered without a launch record."""
    trial.set_user_attr(_TIER_OK, dict(tier_ok))


def mark_duplicate(trial: optuna.Trial, twin: TrialRecord) -> None:
    trial.set_user_attr(_DUPLICATE_OF, twin.number)


def copied_outcome(twin: FrozenTrial) -> TrialOutcome:
    """The outcome of an earlier launch, for a trial that renders to the same launch."""
    rec = TrialRecord.of(twin)
    out = TrialOutcome(values=list(twin.values), tiers=dict(rec.tiers))
    out.constraints = {k: float(twin.constraints.get(k, 0.0)) for k in CONSTRAINT_KEYS}
    out.tier_ok, out.failure, out.failure_kind = dict(rec.tier_ok), rec.failure, rec.failure_kind
    out.answers, out.quality_score = rec.answers, rec.quality_score
    out.requests = dict(rec.requests)
    return out


def mark_failed(trial: optuna.Trial, why: str, *, infra: bool = False) -> None:
    """Why a trial FAILs; an infrastructure fault also says so in ``failure_kind``."""
    trial.set_user_attr(_FAILURE, why)
    if infra:
        trial.set_user_attr(_FAILURE_KIND, "infra")


def mark_interrupted(trial: optuna.Trial, why: str) -> None:
    trial.set_user_attr(_INTERRUPTED, True)
    trial.set_user_attr(_FAILURE, why)


def baseline_attrs() -> dict[str, Any]:
    """The user attrs of the queued baseline trial (the engine's own defaults)."""
    return {_BASELINE: True}


def warm_attrs(study: str, trial: int) -> dict[str, Any]:
    """The user attrs of a warm start's queued config: the pick of ``study``'s ``trial``."""
    return {_WARM_FROM: {"study": study, "trial": trial}}


def confirm_attrs(root: int) -> dict[str, Any]:
    """The user attrs of a confirmation trial: a fresh launch of trial ``root``'s config."""
    return {_CONFIRM_OF: root}


def draw_attrs(root: int, seed: int, tier: int) -> dict[str, Any]:
    """The user attrs of a fresh launch of trial ``root``'s config on another draw of the
    workload (seed ``seed``), checking the pick of tier ``tier``."""
    return {_CONFIRM_OF: root, _DRAW_SEED: seed, _DRAW_FOR: tier}


def draw_of(trial: optuna.Trial) -> int | None:
    """The workload seed a running trial measures on (None: the study's own)."""
    return _int_or_none(trial.user_attrs.get(_DRAW_SEED))


def revert_attrs(pick: int, at: int | None = None, knob: str | None = None) -> dict[str, Any]:
    """The user attrs of trial ``pick``'s config with the knobs idle at tier ``at`` back at
    their defaults (with ``knob``: with that one knob at its default, on top of those it
    already had)."""
    attrs: dict[str, Any] = {_REVERT_OF: pick}
    if at is not None:
        attrs[_REVERT_AT] = at
    if knob is not None:
        attrs[_REVERT_KNOB] = knob
    return attrs


def requeue_attrs(trial: FrozenTrial, reason: str | None = None) -> dict[str, Any]:
    """The user attrs of a lost trial's config queued again: its roles carry over."""
    rec = TrialRecord.of(trial)
    attrs: dict[str, Any] = {_REQUEUED_FROM: trial.number}
    if reason is not None:
        attrs[_REQUEUE_REASON] = reason
    if rec.baseline:
        attrs[_BASELINE] = True
    if rec.confirm_of is not None:
        attrs[_CONFIRM_OF] = rec.confirm_of
    if rec.draw_seed is not None:
        attrs |= draw_attrs(rec.root, rec.draw_seed, rec.draw_for or 0)
    if rec.warm_from is not None:
        attrs[_WARM_FROM] = rec.warm_from
    if rec.revert_of is not None:  # still on top of the budget, still read as a reversion
        attrs |= revert_attrs(rec.revert_of, rec.revert_at, rec.revert_knob)
    return attrs


def lost_params(trial: FrozenTrial) -> dict[str, Any] | None:
    """The config of a lost trial to queue again, when it is known whole; else None (a space
    without parameters has one config, ``{}``, known whole from the start).

    A queued config's entry (``fixed_params``) holds all of it, even when the worker was killed
    between two ``suggest`` calls. A sampled config is whole once its launch was written
    (``write_launch``); before that the worker died mid-sampling, nothing was launched, and
    the params written so far are a fragment of a proposal, not a config to measure."""
    if (fixed := trial.system_attrs.get("fixed_params")) is not None:
        return {**fixed, **trial.params}
    return dict(trial.params) if _FINGERPRINT in trial.user_attrs else None


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars and tuples turned into plain JSON types, recursively."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None
