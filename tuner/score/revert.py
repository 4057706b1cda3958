"""Only the knobs that matter: a pick's settings whose effect at its tier is not beyond the noise
go back to the engine's default.

A person deploys the smallest change from the engine's defaults that gets the gain. A search
lands on a config with every knob set somewhere, and a knob that rode along (a DeepGEMM switch
at an importance of 0.03, a seat limit above the tier's users) is a setting nobody measured.

- ``knob_effects`` estimates each changed knob's effect at a tier: a ridge regression of the
  log of every feasible config's pooled value on indicators of each knob's non-default values
  (so an effect reads as a relative change), with its standard error. A value that cannot act
  at the tier counts as the default: a seat limit (``--max-num-seqs``) at or above the tier's
  concurrency never holds a user.
- ``reverted`` is the pick with every knob whose effect is within ``VERDICT_Z`` standard errors
  (or the tier's run-to-run noise, whichever is larger) set back to its default, where the
  space's rules allow; the confirmation launches measure it (``tuner.run.confirm``).
- ``simplest`` then chooses, among the pick and the measured configs that are the pick with
  some knobs at their defaults, the one with the fewest changes whose value is not worse than
  the pick's beyond the noise and, while it changes any knob, better than the baseline beyond
  the noise (``tuner.score.recommend``).

Where the knobs put back together measure worse beyond the noise, ``tuner.score.narrow`` tries
them one at a time, and each knob the pick keeps says how its effect was measured
(``tuner.score.evidence``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from objectives.objective import Objective
from tuner.score.pooling import Config
from tuner.space.params import same_value

VERDICT_Z = 2.0  # as the verdicts: an effect is real beyond two standard errors
RIDGE = 0.1  # shrinks what few configs say about a knob towards no effect
SEAT_FLAG = "--max-num-seqs"  # a cap on running requests: no effect at or below it


@dataclass(frozen=True)
class Defaults:
    """Each parameter's engine default, and which parameters cap running requests."""

    values: Mapping[str, Any]
    seat_caps: frozenset[str] = frozenset()
    # Per knob, the (other knob, value) pairs that leave it out of the launch altogether
    # (``tuner.space.render.silenced_by``): set or not, it changes nothing there.
    silenced: Mapping[str, tuple[tuple[str, Any], ...]] = field(default_factory=dict)

    def canonical(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with every knob another one leaves out of the launch at its default: one
        launch, however its silenced knobs were sampled."""
        quiet = {
            k
            for k, offs in self.silenced.items()
            # the renderer's own test of an 'off' value (1 and 1.0 alike, never "1" or True)
            if k in params and any(o in params and same_value(params[o], v) for o, v in offs)
        }
        return {k: self.values[k] if k in quiet else v for k, v in params.items()}

    def acting(self, name: str, value: Any, tier: int) -> Any:
        """``value`` as it acts at ``tier``: a seat cap of at least ``tier`` is the default, if
        the default is one too (a default that holds users back at ``tier`` acts there)."""
        default = self.values.get(name)
        if name in self.seat_caps and _at_least(value, tier) and _at_least(default, tier):
            return default
        return value

    def changed(self, params: Mapping[str, Any], tier: int | None = None) -> dict[str, Any]:
        """The knobs of ``params`` that differ from the default (where they act at ``tier``;
        as written, with no tier)."""
        return {
            k: v
            for k, v in self.canonical(params).items()
            if k in self.values
            and _key(v if tier is None else self.acting(k, v, tier)) != _key(self.values[k])
        }

    def idle(self, params: Mapping[str, Any], tier: int) -> list[str]:
        """The knobs ``params`` changes that cannot act at ``tier``."""
        return sorted(set(self.changed(params)) - set(self.changed(params, tier)))

    def deployed(self, params: Mapping[str, Any], tier: int) -> dict[str, Any]:
        """``params`` as the pick of ``tier`` is deployed: a knob that cannot act there (a seat
        cap no user of the tier reaches) at its default, as no launch at the tier can measure it
        and it must not ride along into the recipe."""
        idle = self.idle(params, tier)
        return {k: self.values[k] if k in idle else v for k, v in self.canonical(params).items()}


@dataclass(frozen=True)
class Effect:
    """A knob's estimated effect at a tier: relative change of the objective, and its error."""

    knob: str
    value: Any
    change: float  # exp(coefficient) - 1: -0.12 is 12% lower than at the default
    error: float  # standard error of the coefficient (log scale, about a relative one)
    beyond_noise: bool
    # Knobs every measured config changed exactly where it changed this one: the fit splits
    # their joint effect between them and cannot tell them apart.
    together: tuple[str, ...] = ()


def knob_effects(
    groups: Sequence[Config],
    pick: Mapping[str, Any],
    objective: Objective,
    tier: int,
    defaults: Defaults,
    noise: float | None,
) -> dict[str, Effect]:
    """The estimated effect of each knob the pick changes, from every feasible config."""
    rows = _rows(groups, objective, tier)
    changed = defaults.changed(pick, tier)
    if not changed:
        return {}
    features = sorted(
        {(k, _key(v)) for params, _ in rows for k, v in defaults.changed(params, tier).items()}
        | {(k, _key(v)) for k, v in changed.items()}
    )
    coef, err = _ridge(rows, features, defaults, tier)
    twins = _twins(rows, changed, defaults, tier)
    floor = noise or 0.0
    out = {}
    for k, v in changed.items():
        i = features.index((k, _key(v)))
        # Only a gain counts: a knob measured to hurt goes back to its default as surely as
        # one that does nothing.
        gain = -coef[i] if objective.direction == "minimize" else coef[i]
        beyond = gain > VERDICT_Z * max(err[i], floor)
        out[k] = Effect(k, v, math.expm1(coef[i]), err[i], bool(beyond), twins[k])
    return out


def _twins(
    rows: Sequence[tuple[dict, float]], changed: Mapping[str, Any], defaults: Defaults, tier: int
) -> dict[str, tuple[str, ...]]:
    """For each knob of ``changed``, the others that every measured config set to the pick's
    value exactly where it set this one (none where fewer than two configs were measured)."""

    def column(k: str) -> tuple[bool, ...]:
        want = _key(changed[k])
        return tuple(_key(defaults.changed(p, tier).get(k)) == want for p, _ in rows)

    if len(rows) < 2:
        return {k: () for k in changed}
    cols = {k: column(k) for k in changed}
    return {k: tuple(sorted(o for o in changed if o != k and cols[o] == cols[k])) for k in changed}


def reverted(
    pick: Mapping[str, Any], effects: Mapping[str, Effect], defaults: Defaults
) -> dict[str, Any]:
    """``pick`` with every knob whose effect is not beyond the noise (or that cannot act at
    the tier, so has none in ``effects``) at its default."""
    kept = {k for k, e in effects.items() if e.beyond_noise}
    back = {k: defaults.values[k] for k in defaults.changed(pick) if k not in kept}
    return defaults.canonical({**pick, **back})


def simplest(
    best: Config,
    candidates: Sequence[Config],
    objective: Objective,
    tier: int,
    defaults: Defaults,
    noise: float | None,
    yardstick: Yardstick | None = None,
) -> Config:
    """The config with the fewest changed knobs among ``best`` and the measured configs that
    are ``best`` with some knobs back at their defaults and not worse beyond the noise. One
    that still changes knobs must also beat the ``yardstick`` (the baseline, where it may be
    compared) beyond the noise on one of its axes: "within the noise" does not chain, and a
    config level with both the leader and the defaults keeps changes that no measurement
    credits (a lossy KV-cache dtype among them). One whose engine preempted requests where
    ``best``'s did not stays out, as the ranking puts it after ``best``."""
    keep, mine = defaults.changed(best.root.params), defaults.canonical(best.root.params)
    out, fewest = best, len(keep)
    for c in candidates:
        changes = defaults.changed(c.root.params)
        if c is best or not _subset(changes, keep, defaults.canonical(c.root.params), mine):
            continue
        if c.preempted_beside(best, tier):
            continue  # ranked after every config that did not preempt: fewer changes no excuse
        loss = measured_loss(c, best, objective, tier, noise)
        if loss is None or loss[1] or len(changes) >= fewest:
            continue
        if changes and yardstick is not None and not yardstick.beaten_by(c, tier):
            continue
        out, fewest = c, len(changes)
    return out


@dataclass(frozen=True)
class Yardstick:
    """The baseline a config's changes must beat to be kept, and the axes it is beaten on:
    the objective, and output throughput where the baseline was left out for giving up
    capacity (each with the tier's run-to-run noise)."""

    base: Config
    axes: tuple[tuple[Objective, float | None], ...]

    def beaten_by(self, c: Config, tier: int) -> bool:
        """Whether ``c`` measured better than the baseline beyond the noise on some axis, as
        a verdict calls it ``better``."""
        for objective, noise in self.axes:
            mine, theirs = c.values(objective, tier), self.base.values(objective, tier)
            if not mine or not theirs or noise is None:
                continue
            gain = objective.gain(statistics.fmean(mine), statistics.fmean(theirs))
            if beyond_noise(gain, noise, len(mine), len(theirs)):
                return True
        return False


def beyond_noise(gain: float, noise: float, runs: int, base_runs: int) -> bool:
    """Whether a relative ``gain`` between two configs' pooled means (over ``runs`` and
    ``base_runs`` launches) exceeds ``VERDICT_Z`` standard errors of the tier's noise."""
    return gain > VERDICT_Z * noise * math.sqrt(1 / runs + 1 / base_runs)


def measured_loss(
    c: Config, best: Config, objective: Objective, tier: int, noise: float | None
) -> tuple[float, bool] | None:
    """How much worse ``c`` measured than ``best`` at ``tier`` (0.04: 4% worse; negative:
    better), and whether beyond the noise; None where either has no figure or the noise is
    unknown."""
    mine, theirs = best.values(objective, tier), c.values(objective, tier)
    if not mine or not theirs or noise is None:
        return None
    loss = -objective.gain(statistics.fmean(theirs), statistics.fmean(mine))
    return loss, beyond_noise(loss, noise, len(mine), len(theirs))


def _subset(changes: Mapping, keep: Mapping, params: Mapping, best: Mapping) -> bool:
    """Whether a config keeps only some of ``best``'s changes, each at ``best``'s value, and
    leaves every knob ``best`` did not change as ``best`` has it."""
    same = all(_key(params.get(k)) == _key(best.get(k)) for k in best if k not in keep)
    return same and all(k in keep and _key(v) == _key(keep[k]) for k, v in changes.items())


def _rows(groups: Sequence[Config], objective: Objective, tier: int) -> list[tuple[dict, float]]:
    rows = []
    for c in groups:
        vals = c.values(objective, tier)
        if vals and c.feasible_at(tier) and (mean := statistics.fmean(vals)) > 0:
            rows.append((dict(c.root.params), math.log(mean)))
    return rows


def _ridge(
    rows: Sequence[tuple[dict, float]], features: list, defaults: Defaults, tier: int
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients and standard errors of a ridge fit with an unpenalised intercept."""
    if len(rows) < 2:
        return np.zeros(len(features)), np.full(len(features), np.inf)
    x = np.zeros((len(rows), len(features) + 1))
    x[:, 0] = 1.0
    for r, (params, _) in enumerate(rows):
        for k, v in defaults.changed(params, tier).items():
            x[r, 1 + features.index((k, _key(v)))] = 1.0
    y = np.array([v for _, v in rows])
    penalty = RIDGE * np.eye(x.shape[1])
    penalty[0, 0] = 0.0
    inv = np.linalg.pinv(x.T @ x + penalty)
    beta = inv @ x.T @ y
    dof = max(len(rows) - np.linalg.matrix_rank(x), 1)
    sigma2 = float(np.sum((y - x @ beta) ** 2)) / dof
    err = np.sqrt(np.maximum(np.diag(inv @ x.T @ x @ inv) * sigma2, 0.0))
    return beta[1:], err[1:]


def _at_least(value: Any, tier: int) -> bool:
    try:
        return float(value) >= tier
    except (TypeError, ValueError):
        return False


def _key(value: Any) -> str:
    return repr(value)
