"""Pooling repeated measurements of one config, and the run-to-run noise they reveal.

A config is measured once by the trial that first launched it (its *root*) and again by
confirmation trials, whose record names the root (``confirm_of``). Trials that reused another
trial's measurement (``duplicate_of``) or were refused by a rule before any launch are not
measurements. This is the one pooling rule: recommendations, confirmations and every exporter
group and average launches through it. ``Config.values(tier)`` are the objective values of
every launch of the config at that tier, ``Config.mean_metrics`` their pooled figures;
``noise_cv`` pools the relative spread of every config measured more than once into one
coefficient of variation per tier, the yardstick of "better than the baseline".

A confirmation on another draw of the workload (``draw_seed``, ``tuner.run.holdout``) asks one
question: does the config stay within the space's limits on traffic it was not picked on. It
counts towards ``feasible_at`` (every launch must hold), never towards the pooled figures:
another draw moves them by more than the engine's noise, and every rival was measured on the
study's own draw.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from optuna.trial import FrozenTrial

from objectives.objective import Objective
from objectives.tails import is_count
from tuner.record.trial import TrialRecord

MIN_NOISE_CV = 0.005  # a handful of repeats can show almost no spread by chance: never trust < 0.5%


@dataclass
class Config:
    """Every launch of one config: the root trial first, then its confirmations."""

    runs: list[TrialRecord] = field(default_factory=list)

    @property
    def root(self) -> TrialRecord:
        return self.runs[0]

    def feasible_at(self, tier: int) -> bool:
        """Feasible at ``tier`` only if every launch was, on every request the space asks for:
        one that failed once is not trusted, and a tier stopped early once its launch was out
        of contention (``objectives.race``) is a loser's estimate, never a pick or front point."""
        return all(t.feasible_at(tier) and t.measured_in_full(tier) for t in self.runs)

    @property
    def is_baseline(self) -> bool:
        return self.root.baseline

    @property
    def pooled(self) -> list[TrialRecord]:
        """The launches on the study's own draw of the workload: the ones figures pool."""
        return [t for t in self.runs if t.draw_seed is None]

    @property
    def drawn(self) -> list[TrialRecord]:
        """The launches on another draw of the workload (``tuner.run.holdout``)."""
        return [t for t in self.runs if t.draw_seed is not None]

    def values(self, objective: Objective, tier: int) -> list[float]:
        return [v for _, v in self.measured(objective, tier)]

    def measured(self, objective: Objective, tier: int) -> list[tuple[int, float]]:
        """(trial number, objective value) of every launch that reported the tier."""
        pairs = [(t.number, t.value(objective.key, tier)) for t in self.pooled]
        return [(n, v) for n, v in pairs if v is not None]

    def worst_server(self, tier: int, key: str) -> float | None:
        """The largest server-side figure over the launches (held users, preemptions)."""
        vals = [v for t in self.runs if (v := t.server(tier, key)) is not None]
        return max(vals) if vals else None

    def preempted(self, tier: int) -> bool:
        """Whether the engine preempted requests at ``tier`` in any launch."""
        return any(t.preempted(tier) for t in self.runs)

    def preempted_beside(self, other: Config, tier: int) -> bool:
        """Whether this config's engine preempted at ``tier`` where ``other``'s did not: it
        then ranks after ``other`` whatever its figures."""
        return self.preempted(tier) and not other.preempted(tier)

    def mean_metrics(self, tier: int, keys: Sequence[str]) -> dict[str, float]:
        """Each numeric metric averaged over the launches that reported it; a count of values
        (``tpot_samples``) is the fewest: a pooled p99 is no surer than its thinnest launch."""
        out: dict[str, float] = {}
        for key in keys:
            vals = [t.tier(tier).get(key) for t in self.pooled]
            nums = [float(v) for v in vals if isinstance(v, int | float) and math.isfinite(v)]
            if nums:
                out[key] = min(nums) if is_count(key) else statistics.fmean(nums)
        return out


def configs(trials: Sequence[FrozenTrial]) -> dict[int, Config]:
    """Measurements grouped by config, keyed by root trial number, in trial order."""
    groups: dict[int, Config] = {}
    for t in sorted(map(TrialRecord.of, trials), key=lambda t: t.number):
        if t.is_measurement:
            groups.setdefault(t.root, Config()).runs.append(t)
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


def relative_range(values: Sequence[float]) -> float:
    """(max - min) / |median| of a config's values: 0 with a single measurement."""
    mid = statistics.median(values) if values else 0.0
    return (max(values) - min(values)) / abs(mid) if len(values) > 1 and mid else 0.0
