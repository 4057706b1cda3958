"""Per concurrency tier: every measured config, the Pareto front, the baseline and the pick.

A point pools a trial's own measurement with its confirmation re-measurements (trials whose
``confirm_of`` names it): figures are medians over those measurements and ``spread`` is the
relative range of the objective across them (0 with one measurement). Trials that merely copy
an earlier launch (``duplicate_of``) and the confirmations themselves are not separate points.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective
from tuner.export.recommend import baseline_trial, feasible_at, recommend, tier_metrics

FRONT_X = "output_throughput"  # maximised
FRONT_Y = "p99_tpot_ms"  # minimised
FIGURE_KEYS = ("median_tpot_ms", "p99_tpot_ms", "p99_ttft_ms", "output_throughput")


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

    def figures(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {k: self.metrics[k] for k in FIGURE_KEYS if k in self.metrics}
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

    def point(self, trial: int) -> Point | None:
        return next((p for p in self.points if p.trial == trial), None)

    def front_points(self) -> list[Point]:
        return [p for n in self.front if (p := self.point(n)) is not None]


def build_tiers(
    trials: Sequence[FrozenTrial], objective: Objective, tiers: Sequence[int]
) -> list[Tier]:
    by_origin = _confirmations(trials)
    originals = [t for t in trials if _is_original(t)]
    recs = recommend(trials, objective, tiers)  # it pools confirmations itself
    base = baseline_trial(originals)
    out = []
    for tier, rec in zip(tiers, recs, strict=True):
        points = [p for t in originals if (p := _point(t, tier, objective, by_origin))]
        built = Tier(concurrency=tier, points=points, front=pareto_front(points))
        built.recommended = built.point(rec.trial) if rec.trial is not None else None
        built.baseline = built.point(base.number) if base is not None else None
        built.gain = _gain(built, objective)
        out.append(built)
    return out


def _is_original(t: FrozenTrial) -> bool:
    attrs = t.user_attrs
    return (
        t.state == TrialState.COMPLETE
        and attrs.get("duplicate_of") is None
        and attrs.get("confirm_of") is None
    )


def _confirmations(trials: Sequence[FrozenTrial]) -> dict[int, list[FrozenTrial]]:
    out: dict[int, list[FrozenTrial]] = {}
    for t in trials:
        origin = t.user_attrs.get("confirm_of")
        if origin is not None and t.state == TrialState.COMPLETE:
            out.setdefault(int(origin), []).append(t)
    return out


def _point(
    t: FrozenTrial, tier: int, objective: Objective, by_origin: Mapping[int, list[FrozenTrial]]
) -> Point | None:
    runs = [tier_metrics(t, tier)] + [tier_metrics(c, tier) for c in by_origin.get(t.number, [])]
    runs = [r for r in runs if _finite(r.get(objective.key))]
    if not runs:
        return None
    return Point(
        trial=t.number,
        params=dict(t.params),
        metrics=_pooled(runs),
        feasible=feasible_at(t, tier),  # a config may hold its SLOs at c1 and miss them at c40
        baseline=bool(t.user_attrs.get("baseline")),
        confirmations=len(runs),
        spread=_spread([float(r[objective.key]) for r in runs]),
        failure=str(t.user_attrs.get("failure") or ""),
    )


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _pooled(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    keys = {k for r in runs for k, v in r.items() if _finite(v)}
    return {
        k: float(statistics.median(float(r[k]) for r in runs if _finite(r.get(k))))
        for k in sorted(keys)
    }


def _spread(values: Sequence[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / abs(mid) if len(values) > 1 and mid else 0.0


def pareto_front(points: Sequence[Point]) -> list[int]:
    """Feasible points no other feasible point beats on both p99 TPOT and throughput."""
    cand = [p for p in points if p.feasible and FRONT_X in p.metrics and FRONT_Y in p.metrics]
    front = [p for p in cand if not any(_dominates(q, p) for q in cand)]
    front.sort(key=lambda p: (p.metrics[FRONT_X], p.trial))
    return [p.trial for p in front]


def _dominates(a: Point, b: Point) -> bool:
    ax, ay, bx, by = a.metrics[FRONT_X], a.metrics[FRONT_Y], b.metrics[FRONT_X], b.metrics[FRONT_Y]
    return ax >= bx and ay <= by and (ax > bx or ay < by)


def _gain(tier: Tier, objective: Objective) -> float | None:
    rec, base = tier.recommended, tier.baseline
    if rec is None or base is None or objective.key not in base.metrics:
        return None
    return objective.gain(rec.metrics[objective.key], base.metrics[objective.key])
