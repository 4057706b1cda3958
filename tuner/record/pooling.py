"""Pooling repeated measurements of one config, and the run-to-run noise they reveal.

A config is measured once by the trial that first launched it (its *root*) and again by
confirmation trials, which carry the user attr ``confirm_of: <root trial number>``. Trials that
reused another trial's measurement (``duplicate_of``) or were refused by a rule before any launch
are not measurements. ``Config.values(tier)`` are the objective values of every launch of the
config at that tier; ``noise_cv`` pools the relative spread of every config measured more than
once into one coefficient of variation per tier, the yardstick of "better than the baseline".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective

CONFIRM_ATTR = "confirm_of"
DEFAULT_CONFIRM = 2  # leading configs per tier launched again after exploration (--confirm)
MIN_NOISE_CV = 0.005  # a handful of repeats can show almost no spread by chance: never trust < 0.5%


def tier_metrics(trial: FrozenTrial, tier: int) -> dict[str, Any]:
    tiers = trial.user_attrs.get("tiers") or {}
    return dict(tiers.get(str(tier)) or {})


def is_feasible(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.COMPLETE and bool(trial.user_attrs.get("feasible"))


def feasible_at(trial: FrozenTrial, tier: int) -> bool:
    """Whether the trial served every request of ``tier`` and met that tier's SLOs."""
    if trial.state != TrialState.COMPLETE:
        return False
    tier_ok = trial.user_attrs.get("tier_ok")
    if tier_ok:
        return bool(tier_ok.get(str(tier)))
    return bool(trial.user_attrs.get("feasible"))


def measured(trial: FrozenTrial, objective: Objective, tier: int) -> float | None:
    value = tier_metrics(trial, tier).get(objective.key)
    if not isinstance(value, int | float) or not math.isfinite(float(value)):
        return None
    return float(value)


def root_of(trial: FrozenTrial) -> int:
    """The trial number of the first measurement of ``trial``'s config."""
    root = trial.user_attrs.get(CONFIRM_ATTR)
    return int(root) if root is not None else trial.number


def is_measurement(trial: FrozenTrial) -> bool:
    """A finished launch of its own (not a copied duplicate, not a rule refusal)."""
    return (
        trial.state == TrialState.COMPLETE
        and trial.user_attrs.get("duplicate_of") is None
        and trial.user_attrs.get("failure_kind") != "rules"
    )


@dataclass
class Config:
    """Every launch of one config: the root trial first, then its confirmations."""

    runs: list[FrozenTrial] = field(default_factory=list)

    @property
    def root(self) -> FrozenTrial:
        return self.runs[0]

    def feasible_at(self, tier: int) -> bool:
        """Feasible at ``tier`` only if every launch was: one that failed once is not trusted."""
        return all(feasible_at(t, tier) for t in self.runs)

    @property
    def is_baseline(self) -> bool:
        return bool(self.root.user_attrs.get("baseline"))

    def values(self, objective: Objective, tier: int) -> list[float]:
        out = [measured(t, objective, tier) for t in self.runs]
        return [v for v in out if v is not None]

    def mean_metrics(self, tier: int, keys: Sequence[str]) -> dict[str, float]:
        """Each numeric metric averaged over the launches that reported it."""
        out: dict[str, float] = {}
        for key in keys:
            vals = [tier_metrics(t, tier).get(key) for t in self.runs]
            nums = [float(v) for v in vals if isinstance(v, int | float) and math.isfinite(v)]
            if nums:
                out[key] = statistics.fmean(nums)
        return out


def configs(trials: Sequence[FrozenTrial]) -> dict[int, Config]:
    """Measurements grouped by config, keyed by root trial number, in trial order."""
    groups: dict[int, Config] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if is_measurement(t):
            groups.setdefault(root_of(t), Config()).runs.append(t)
    return groups


def noise_cv(groups: Sequence[Config], objective: Objective, tier: int) -> float | None:
    """Pooled coefficient of variation of repeated launches at ``tier`` (None: no repeats)."""
    squares, dof = 0.0, 0
    for c in groups:
        vals = c.values(objective, tier)
        if len(vals) < 2 or not c.feasible_at(tier):
            continue
        mean = statistics.fmean(vals)
        if mean == 0:
            continue
        squares += sum(((v - mean) / mean) ** 2 for v in vals)
        dof += len(vals) - 1
    if dof == 0:
        return None
    return max(math.sqrt(squares / dof), MIN_NOISE_CV)


def spread(values: Sequence[float]) -> float | None:
    """Sample standard deviation of a config's values (None with a single measurement)."""
    return statistics.stdev(values) if len(values) >= 2 else None
