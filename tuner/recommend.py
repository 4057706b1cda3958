"""Per-tier recommendations and the trials table, rebuilt from the study's storage alone."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective

SHOWN_METRICS = ("median_tpot_ms", "p99_tpot_ms", "p99_ttft_ms", "output_throughput")


@dataclass
class TierRecommendation:
    """The best measured config at one concurrency tier, beside the baseline."""

    concurrency: int
    trial: int | None
    params: dict[str, Any] = field(default_factory=dict)
    value: float | None = None
    baseline_trial: int | None = None
    baseline_value: float | None = None
    gain: float | None = None  # relative improvement over the baseline, 0.25 = 25% better
    metrics: dict[str, float] = field(default_factory=dict)
    baseline_metrics: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
    if value is None or not math.isfinite(float(value)):
        return None
    return float(value)


def baseline_trial(trials: Sequence[FrozenTrial]) -> FrozenTrial | None:
    done = [t for t in trials if t.user_attrs.get("baseline") and t.state == TrialState.COMPLETE]
    return done[0] if done else None


def recommend(
    trials: Sequence[FrozenTrial], objective: Objective, tiers: Sequence[int]
) -> list[TierRecommendation]:
    """For each tier, the feasible trial with the best objective value at that tier."""
    base = baseline_trial(trials)
    return [_recommend_tier(trials, objective, tier, base) for tier in tiers]


def _recommend_tier(
    trials: Sequence[FrozenTrial], objective: Objective, tier: int, base: FrozenTrial | None
) -> TierRecommendation:
    best: FrozenTrial | None = None
    best_value: float | None = None
    for t in trials:
        value = measured(t, objective, tier)
        if not feasible_at(t, tier) or value is None:
            continue
        if best_value is None or objective.better(value, best_value):
            best, best_value = t, value
    rec = TierRecommendation(concurrency=tier, trial=best.number if best else None)
    if best is not None:
        rec.params, rec.value = dict(best.params), best_value
        rec.metrics = _shown(tier_metrics(best, tier))
    if base is not None:
        rec.baseline_trial = base.number
        rec.baseline_value = measured(base, objective, tier)
        rec.baseline_metrics = _shown(tier_metrics(base, tier))
    if rec.value is not None and rec.baseline_value is not None:
        rec.gain = objective.gain(rec.value, rec.baseline_value)
    return rec


def _shown(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(metrics[k]) for k in SHOWN_METRICS if k in metrics}


def trials_table(study: optuna.Study, tiers: Sequence[int]) -> pd.DataFrame:
    """Every trial: state, params, failure reason and every per-tier metric (``c<N>_<key>``)."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        row: dict[str, Any] = {
            "trial": t.number,
            "state": t.state.name,
            "baseline": bool(t.user_attrs.get("baseline", False)),
            "feasible": is_feasible(t),
            "failure": t.user_attrs.get("failure") or "",
            "duration_s": t.duration.total_seconds() if t.duration else None,
        }
        row.update({f"param_{k}": v for k, v in t.params.items()})
        for tier in tiers:
            for key, value in tier_metrics(t, tier).items():
                if isinstance(value, int | float):
                    row[f"c{tier}_{key}"] = value
        rows.append(row)
    return pd.DataFrame(rows)


def format_recommendations(recs: Sequence[TierRecommendation], objective: Objective) -> str:
    """A plain-text table: one row per tier, best vs baseline, then each tier's settings."""
    head = f"{'tier':>6}  {'trial':>5}  {objective.name + ' (' + objective.unit + ')':>22}  "
    head += f"{'baseline':>10}  {'gain':>7}  {'median_tpot':>11}  {'out tok/s':>9}"
    lines = [head, "-" * len(head)]
    for r in recs:
        lines.append(_row(r))
    lines.append("")
    for r in recs:
        if r.trial is not None:
            settings = ", ".join(f"{k}={v}" for k, v in r.params.items())
            lines.append(f"c{r.concurrency}: {settings}")
        else:
            lines.append(f"c{r.concurrency}: no feasible trial yet")
    return "\n".join(lines)


def _row(r: TierRecommendation) -> str:
    def num(x: float | None, fmt: str = ".1f") -> str:
        return "-" if x is None else format(x, fmt)

    gain = "-" if r.gain is None else f"{r.gain * 100:+.1f}%"
    return (
        f"{'c' + str(r.concurrency):>6}  {num(r.trial, 'd') if r.trial is not None else '-':>5}  "
        f"{num(r.value):>22}  {num(r.baseline_value):>10}  {gain:>7}  "
        f"{num(r.metrics.get('median_tpot_ms')):>11}  {num(r.metrics.get('output_throughput')):>9}"
    )
