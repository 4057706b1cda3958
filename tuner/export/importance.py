"""Which parameters mattered at each tier, by Optuna's fANOVA importance evaluator.

The study has one objective per tier, and infeasible trials carry +/-inf, which no evaluator
can fit. So each tier gets its own single-objective in-memory study holding only the feasible
measurements of that tier, and ``target=`` reads that tier's value. The evaluator is seeded:
the same storage always exports the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import optuna
from optuna.trial import FrozenTrial

from objectives.objective import Objective
from tuner.export.tiers import Tier

MIN_TRIALS = 8  # below this a forest of 30-odd points says more about noise than parameters


@dataclass
class Importance:
    """Normalised importances (summing to 1), or why there are none."""

    concurrency: int
    values: dict[str, float] = field(default_factory=dict)
    trials: int = 0
    note: str = ""


def tier_importance(tier: Tier, trials: Sequence[FrozenTrial], objective: Objective) -> Importance:
    by_number = {t.number: t for t in trials}
    feasible = [p for p in tier.points if p.feasible and objective.key in p.metrics]
    out = Importance(tier.concurrency, trials=len(feasible))
    if len(feasible) < MIN_TRIALS:
        out.note = f"needs at least {MIN_TRIALS} feasible trials at this tier (has {len(feasible)})"
        return out
    study = optuna.create_study(direction=objective.direction)
    for p in feasible:
        t = by_number[p.trial]
        value = p.metrics[objective.key]
        study.add_trial(
            optuna.trial.create_trial(value=value, params=t.params, distributions=t.distributions)
        )
    names = list(dict.fromkeys(n for p in feasible for n in p.params))
    varied = [n for n in names if len({repr(p.params.get(n)) for p in feasible}) > 1]
    if not varied:
        out.note = "no parameter took more than one value among the feasible trials"
        return out
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    got = optuna.importance.get_param_importances(
        study, evaluator=evaluator, params=varied, target=lambda t: float(t.values[0])
    )
    out.values = {k: round(float(v), 4) for k, v in got.items()}
    return out
