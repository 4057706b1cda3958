"""Per concurrency tier: every measured config, the Pareto front, the baseline and the pick.

A point is one config, pooled by ``tuner.score.pooling`` as the recommendations pool it: its
figures are means over its launches (the count a percentile rests on, ``tpot_samples``, is the
fewest of any launch), ``spread`` the relative range of the objective across them (0 with one
launch), and the gain is the recommendation's own. Copies of an earlier launch and the
confirmations themselves are not separate points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from optuna.trial import FrozenTrial

from objectives.objective import Objective, front_axes, get_objective
from objectives.tails import is_count, with_counts
from tuner.score.eligible import Eligible, Policy
from tuner.score.pooling import Config, configs, relative_range
from tuner.score.quality import Quality, config_quality
from tuner.score.recommend import SHOWN_METRICS, TierRecommendation

# The figures a pick shows, one list for the pick and the front.
FIGURE_KEYS = SHOWN_METRICS


@dataclass
class Point:
    """One config measured at one tier, pooled over its confirmations."""

    trial: int
    params: dict[str, Any]
    metrics: dict[str, float]
    feasible: bool
    baseline: bool = False
    confirmations: int = 1
    spread: float = 0.0
    failure: str = ""
    eligible: bool = False  # may be the tier's pick (tuner.score.eligible)
    quality: Quality = field(default_factory=Quality)  # its answers against the baseline's
    lower_quality: bool = False  # below the quality floor: on a front only marked so

    def figures(self) -> dict[str, float | int]:
        """The shown figures, the counts their percentiles rest on, and how often measured."""
        keys = with_counts(FIGURE_KEYS)
        out: dict[str, float | int] = {k: self.metrics[k] for k in keys if k in self.metrics}
        out.update({k: int(v) for k, v in out.items() if is_count(k)})
        out["confirmations"] = self.confirmations
        out["spread"] = self.spread
        return out


@dataclass
class Tier:
    """What an export says about one concurrency tier."""

    concurrency: int
    points: list[Point] = field(default_factory=list)  # feasible and infeasible, by trial
    front: list[int] = field(default_factory=list)  # trial numbers, by rising throughput
    recommended: Point | None = None
    baseline: Point | None = None
    gain: float | None = None  # objective's relative improvement over the baseline
    # The front's axes (``front_axes``): the objective against throughput, or what
    # ``--objective`` named; ``x`` and ``y`` are how a plot draws them.
    axes: tuple[Objective, ...] = field(
        default_factory=lambda: front_axes(get_objective("p99_tpot"))
    )
    choice: str = ""  # the recommendation's one line: what was given up for what
    verdict: str | None = None  # the gain against the noise (``tuner.score.recommend``)

    def point(self, trial: int) -> Point | None:
        return next((p for p in self.points if p.trial == trial), None)

    def front_points(self) -> list[Point]:
        return [p for n in self.front if (p := self.point(n)) is not None]

    @property
    def x(self) -> Objective:
        return plot_axes(self.axes)[0]

    @property
    def y(self) -> Objective:
        return plot_axes(self.axes)[1]


def build_tiers(
    trials: Sequence[FrozenTrial],
    recs: Sequence[TierRecommendation],
    objective: Objective,
    policy: Policy,
    against: tuple[Objective, ...] = (),
) -> list[Tier]:
    """Each tier of ``recs`` (``recommend``'s, for the same trials) with its points and front."""
    groups = list(configs(trials).values())
    axes = front_axes(objective, against)
    base_config = next((c for c in groups if c.is_baseline), None)
    quality = {c.root.number: config_quality(c, base_config, policy.gate) for c in groups}
    out = []
    for rec in recs:
        tier = rec.concurrency
        eligible = {c.root.number for c in Eligible.at(groups, tier, policy).configs}
        points = [p for c in groups if (p := _point(c, tier, objective, eligible))]
        for p in points:
            p.quality = quality[p.trial]
            p.lower_quality = p.quality.below and p.feasible
        built = Tier(tier, points, pareto_front(points, axes), axes=axes, choice=rec.choice)
        built.recommended = (
            _deployed(built.point(rec.trial), rec) if rec.trial is not None else None
        )
        base = rec.baseline_trial
        built.baseline = built.point(base) if base is not None else None
        built.gain = rec.gain if built.recommended and built.baseline else None
        built.verdict = rec.verdict if built.gain is not None else None
        out.append(built)
    return out


def _deployed(point: Point | None, rec: TierRecommendation) -> Point | None:
    """The pick's point with its config as deployed (``TierRecommendation.idle``)."""
    return None if point is None else replace(point, params=dict(rec.params))


def _point(c: Config, tier: int, objective: Objective, eligible: set[int]) -> Point | None:
    values = c.values(objective, tier)
    if not values:
        return None
    return Point(
        trial=c.root.number,
        params=dict(c.root.params),
        metrics=c.mean_metrics(tier, _metric_keys(c, tier)),
        feasible=c.feasible_at(tier),  # a config may hold its SLOs at c1 and miss them at c40
        baseline=c.is_baseline,
        confirmations=len(values),
        spread=relative_range(values),
        failure=str(c.root.failure or ""),
        eligible=c.root.number in eligible,
    )


def _metric_keys(c: Config, tier: int) -> list[str]:
    return sorted({k for t in c.runs for k in t.tier(tier)})


def pareto_front(points: Sequence[Point], axes: Sequence[Objective]) -> list[int]:
    """Eligible points no other eligible point beats on every axis (and strictly on one), and
    the lower-quality points no point of either kind beats (what answering otherwise would
    buy, marked so), in rising order of the plot's horizontal axis."""
    keys = [o.key for o in axes]
    cand = [p for p in points if p.eligible and all(k in p.metrics for k in keys)]
    lower = [p for p in points if p.lower_quality and all(k in p.metrics for k in keys)]
    front = [p for p in cand if not any(_dominates(q, p, axes) for q in cand)]
    front += [p for p in lower if not any(_dominates(q, p, axes) for q in cand + lower)]
    x, _ = plot_axes(tuple(axes))
    front.sort(key=lambda p: (p.metrics[x.key], p.trial))
    return [p.trial for p in front]


def plot_axes(axes: tuple[Objective, ...]) -> tuple[Objective, Objective]:
    """(x, y) of a front's plot: y is the first axis to minimise (down is better)."""
    y = next((o for o in axes if o.direction == "minimize"), axes[0])
    return next(o for o in axes if o is not y), y


def _dominates(a: Point, b: Point, axes: Sequence[Objective]) -> bool:
    pairs = [(a.metrics[o.key], b.metrics[o.key], o) for o in axes]
    no_worse = all(not o.better(vb, va) for va, vb, o in pairs)
    return no_worse and any(o.better(va, vb) for va, vb, o in pairs)
