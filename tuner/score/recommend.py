"""Per-tier recommendations, rebuilt from the study's trials alone.

Recommendations pool every launch of a config (the trial that first measured it and its
confirmation trials, see ``tuner.score.pooling``): the value is the mean over launches,
``spread`` the
sample standard deviation, ``runs`` / ``values`` the trials and values it pools. Within a tier,
configs are ranked by a pessimistic estimate, mean worsened by ``RANK_Z`` noise standard errors,
so one lucky launch does not outrank a config measured twice. ``verdict`` compares the pooled
means with the baseline's against the tier's pooled run-to-run noise:

- ``better`` / ``worse``: the gap exceeds ``VERDICT_Z`` standard errors of the difference;
- ``within noise``: it does not, and the config is not called better than the baseline;
- ``unconfirmed``: no config was measured twice yet, so the noise is unknown;
- ``baseline``: the baseline itself is the best config at that tier;
- ``baseline infeasible``: the baseline failed or missed an SLO, any feasible config beats it;
- ``baseline queued``: the pick is not better beyond the noise, and the baseline held users
  back at the tier where no SLO bounds the wait, or made them wait longer for a first token
  than the configs that seated them (``tuner.score.eligible``). Its TPOT covers only the users
  it seated, so the gain may be negative and the pick is still the one to deploy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from optuna.trial import FrozenTrial

from objectives.objective import Objective, front_axes
from objectives.tails import samples_key, with_counts
from tuner.score.apart import measured_apart, without
from tuner.score.draws import draw_words, held_on_draws, undrawn_words
from tuner.score.eligible import OUTPUT, Eligible, Policy
from tuner.score.evidence import Measured, knob_notes
from tuner.score.narrow import Walk, walk
from tuner.score.pooling import Config, configs, noise_cv, spread
from tuner.score.quality import config_quality
from tuner.score.revert import Yardstick, beyond_noise, knob_effects, simplest
from tuner.score.why import Leader, choice_line

# Smoothness beside TPOT: a TPOT averages a stall over the answer, the longest gap shows it.
SHOWN_METRICS = (
    "median_tpot_ms",
    "p99_tpot_ms",
    "p99_itl_ms",
    "max_itl_ms",
    "long_gaps",
    "p99_ttft_ms",
    "output_throughput",
)
RANK_Z = 1.0


@dataclass
class TierRecommendation:
    """The best config at one concurrency tier, pooled over its launches, beside the baseline."""

    concurrency: int
    trial: int | None  # the trial that first measured the recommended config
    params: dict[str, Any] = field(default_factory=dict)
    value: float | None = None  # mean objective value over ``runs``
    baseline_trial: int | None = None
    baseline_value: float | None = None
    gain: float | None = None  # relative improvement over the baseline, 0.25 = 25% better
    metrics: dict[str, float] = field(default_factory=dict)
    baseline_metrics: dict[str, float] = field(default_factory=dict)
    runs: list[int] = field(default_factory=list)  # trial numbers of every launch pooled
    values: list[float] = field(default_factory=list)
    spread: float | None = None  # sample std of ``values``
    baseline_runs: list[int] = field(default_factory=list)
    baseline_values: list[float] = field(default_factory=list)
    baseline_spread: float | None = None
    noise_cv: float | None = None  # the tier's pooled run-to-run coefficient of variation
    samples: int | None = None  # values the objective's figure rests on (its thinnest launch)
    baseline_samples: int | None = None
    verdict: str | None = None  # better / worse / within noise / unconfirmed / baseline...
    baseline_feasible: bool = True
    choice: str = ""  # one line: what the pick gave up for what, and what was left out
    users_held: float | None = None  # users the pick's server never ran at once (0: none)
    preemptions: float | None = None
    quality: dict[str, Any] | None = None  # the pick against the baseline (``Quality.to_json``)
    # Each knob the pick changes from the engine's default: its estimated effect at the tier
    # (tuner.score.revert): value, relative change of the objective, error, beyond the noise.
    effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The same knobs, each with how its effect was measured (tuner.score.evidence): value,
    # measured_by (reversion / regression / untested / unmeasured), change, words. Every
    # export shows these words.
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Knobs the measured config set that cannot act at the tier, with the value it measured
    # with: the pick carries them at the engine's default.
    idle: dict[str, Any] = field(default_factory=dict)
    # The pick's launches on another draw of the workload (``tuner.run.holdout``): trial, seed
    # and the figures the space limits at the tier, none of them pooled into ``metrics``.
    other_draws: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def recommend(
    trials: Sequence[FrozenTrial],
    objective: Objective,
    tiers: Sequence[int],
    policy: Policy | None = None,
    against: tuple[Objective, ...] = (),
) -> list[TierRecommendation]:
    """For each tier, the eligible config (``Policy``) with the best pooled objective value;
    its line says what it traded against ``against`` (output throughput when empty)."""
    groups = list(configs(trials).values())
    base = next((c for c in groups if c.is_baseline), None)
    policy = policy or Policy()
    goal = (objective, front_axes(objective, against)[1])
    return [_recommend_tier(groups, goal, tier, base, policy) for tier in tiers]


def _recommend_tier(
    groups: Sequence[Config],
    goal: tuple[Objective, Objective],
    tier: int,
    base: Config | None,
    policy: Policy,
) -> TierRecommendation:
    objective = goal[0]
    cv = noise_cv(groups, objective, tier)
    rec = TierRecommendation(concurrency=tier, trial=None, noise_cv=cv)
    pool = Eligible.at(groups, tier, policy)
    lead = best = _best(pool.configs, objective, tier, cv)
    if lead is not None and policy.defaults is not None:
        yard = _yardstick(groups, base, pool, objective, tier, cv)
        best = simplest(lead, pool.configs, objective, tier, policy.defaults, cv, yard)
        _knobs(rec, groups, (lead, best), pool, objective, policy)
    if best is not None:
        rec.trial, rec.params = best.root.number, rec.params or dict(best.root.params)
        rec.runs, rec.values = _pooled(best, objective, tier)
        rec.value, rec.spread = statistics.fmean(rec.values), spread(rec.values)
        rec.metrics = best.mean_metrics(tier, with_counts(SHOWN_METRICS))
        rec.samples = _samples(best, objective, tier)
        rec.users_held = best.worst_server(tier, "users_held")
        rec.preemptions = best.worst_server(tier, "num_preemptions")
        rec.quality = config_quality(best, base, policy.gate).to_json()
    if best is not None:
        rec.other_draws = held_on_draws(best, tier, policy.limits.get(tier, ()))
    rec.choice = choice_line(best, rec.value, pool, goal, policy, Leader(lead, cv)) + (
        _idle_words(rec) + draw_words(rec.other_draws) + _undrawn(groups, best, tier, policy)
        if best
        else _unmeasured(groups, tier)
    )
    if base is not None:
        rec.baseline_trial, rec.baseline_feasible = base.root.number, base.feasible_at(tier)
        rec.baseline_runs, rec.baseline_values = _pooled(base, objective, tier)
        if rec.baseline_values:
            rec.baseline_value = statistics.fmean(rec.baseline_values)
        rec.baseline_spread = spread(rec.baseline_values)
        rec.baseline_metrics = base.mean_metrics(tier, with_counts(SHOWN_METRICS))
        rec.baseline_samples = _samples(base, objective, tier)
    if rec.value is not None and rec.baseline_value is not None:
        rec.gain = objective.gain(rec.value, rec.baseline_value)
        rec.verdict = _verdict(rec, best is base, base in pool.queued or base in pool.held)
    return rec


def _knobs(
    rec: TierRecommendation,
    groups: Sequence[Config],
    picks: tuple[Config, Config],
    pool: Eligible,
    objective: Objective,
    policy: Policy,
) -> None:
    """The pick's deployed config and how each knob it changes was measured (``picks``: the
    tier's leader, and the pick with its knobs that did nothing back at their defaults)."""
    assert policy.defaults is not None
    (lead, best), tier, cv = picks, rec.concurrency, rec.noise_cv
    told = walk(groups, lead, pool.configs, objective, tier, policy, cv)
    effects = knob_effects(groups, best.root.params, objective, tier, policy.defaults, cv)
    apart = measured_apart(groups, best, lead, pool.configs, (objective, tier, cv), policy)
    rec.effects = {k: asdict(e) for k, e in effects.items()}
    rec.params, rec.idle = _deployed(best.root.params, tier, policy)
    alone = {k: without(best.root.params, (k,), policy) for k in rec.effects}
    forbidden = frozenset(k for k, params in alone.items() if not policy.allows(params))
    stormed = frozenset(c.root.number for c in groups if c.preempted_beside(lead, tier))
    m = Measured(effects, told, apart, lead.root.number, cv, forbidden, stormed)
    rec.knobs = knob_notes(rec.params, m, objective, policy.defaults)


def _yardstick(
    groups: Sequence[Config],
    base: Config | None,
    pool: Eligible,
    objective: Objective,
    tier: int,
    cv: float | None,
) -> Yardstick | None:
    """The baseline as the yardstick of a pick's changes, where it served the tier on its own
    terms: eligible, or left out only for its throughput (then a gain in throughput counts).
    One that failed, missed an SLO or queued users is beaten by any eligible config."""
    if base is None or (base not in pool.configs and base not in pool.below_floor):
        return None
    axes: tuple[tuple[Objective, float | None], ...] = ((objective, cv),)
    if base in pool.below_floor:
        axes += ((OUTPUT, noise_cv(groups, OUTPUT, tier)),)
    return Yardstick(base, axes)


def _deployed(
    params: dict[str, Any], tier: int, policy: Policy
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pick's config as the tier deploys it, and the knobs it measured with that cannot act
    at the tier, as measured (a seat cap of 16 with one user): those go back to the defaults
    where the space's rules allow, as no launch at the tier could tell them apart."""
    assert policy.defaults is not None
    out = policy.defaults.deployed(params, tier)
    if not policy.allows(out):
        return dict(params), {}
    return out, {k: params[k] for k in policy.defaults.idle(params, tier)}


def _undrawn(groups: Sequence[Config], best: Config, tier: int, policy: Policy) -> str:
    """Where the tier has limits a draw moves, whether the pick's were checked on another."""
    return undrawn_words(groups, best, tier) if policy.limits.get(tier) else ""


def _idle_words(rec: TierRecommendation) -> str:
    if not rec.idle:
        return ""
    knobs = ", ".join(f"{k}={v}" for k, v in rec.idle.items())
    users = f"{rec.concurrency} user" + ("s" if rec.concurrency != 1 else "")
    return (f"; trial {rec.trial} ran with {knobs}, which cannot act with {users}: the pick "
            "leaves it at the engine's default")  # fmt: skip


def leader(
    groups: Sequence[Config], objective: Objective, tier: int, policy: Policy
) -> Config | None:
    """The tier's pick before its idle knobs go back (``tuner.score.revert``)."""
    cv = noise_cv(groups, objective, tier)
    return _best(Eligible.at(groups, tier, policy).configs, objective, tier, cv)


def tier_walk(
    groups: Sequence[Config], objective: Objective, tier: int, policy: Policy
) -> Walk | None:
    """The leader's knobs told apart one at a time, where putting them back together measured
    worse (``tuner.score.narrow``)."""
    cv = noise_cv(groups, objective, tier)
    pool = Eligible.at(groups, tier, policy).configs
    best = _best(pool, objective, tier, cv)
    return None if best is None else walk(groups, best, pool, objective, tier, policy, cv)


def _unmeasured(groups: Sequence[Config], tier: int) -> str:
    # No pick because no launch had the figure: say why, as the launches' own notes do.
    notes = [n for c in groups for t in c.runs for n in t.notes(tier)]
    return f"; {notes[0]}" if notes else ""


def _pooled(c: Config, objective: Objective, tier: int) -> tuple[list[int], list[float]]:
    kept = c.measured(objective, tier)
    return [n for n, _ in kept], [v for _, v in kept]


def _samples(c: Config, objective: Objective, tier: int) -> int | None:
    key = samples_key(objective.key)
    n = c.mean_metrics(tier, [key]).get(key) if key else None
    return None if n is None else int(n)


def _best(
    groups: Sequence[Config], objective: Objective, tier: int, cv: float | None
) -> Config | None:
    # A config whose engine preempted requests at the tier ranks after every one that did
    # not: recomputed prefills are latency spikes the tier's percentiles may not show yet.
    best: tuple[bool, float, Config] | None = None
    for c in groups:
        score = rank_score(c, objective, tier, cv)
        if score is None:
            continue
        late = c.preempted(tier)
        if best is None or late < best[0] or (late == best[0] and objective.better(score, best[1])):
            best = (late, score, c)
    return best[2] if best else None


def rank_score(c: Config, objective: Objective, tier: int, cv: float | None) -> float | None:
    """Pooled mean worsened by ``RANK_Z`` standard errors: fewer launches, less trust."""
    vals = c.values(objective, tier)
    if not vals:
        return None
    mean = statistics.fmean(vals)
    penalty = RANK_Z * (cv or 0.0) * abs(mean) / math.sqrt(len(vals))
    return mean + penalty if objective.direction == "minimize" else mean - penalty


def _verdict(rec: TierRecommendation, is_base: bool, base_queued: bool) -> str:
    if is_base:
        return "baseline"
    if not rec.baseline_feasible:
        return "baseline infeasible"
    verdict = _against_noise(rec)
    # Against a baseline that queued users, a pick that is not better is not worse either:
    # the baseline's TPOT covers only the users it seated.
    return "baseline queued" if base_queued and verdict != "better" else verdict


def _against_noise(rec: TierRecommendation) -> str:
    if rec.noise_cv is None or rec.gain is None:
        return "unconfirmed"
    runs = (len(rec.values), len(rec.baseline_values))
    if beyond_noise(rec.gain, rec.noise_cv, *runs):
        return "better"
    if beyond_noise(-rec.gain, rec.noise_cv, *runs):
        return "worse"
    return "within noise"
