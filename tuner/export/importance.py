"""Which parameters mattered at each tier, by Optuna's PED-ANOVA importance evaluator.

PED-ANOVA asks which parameters separate the best configs (the top quantile) from the rest; it
needs nothing beyond numpy (fANOVA would pull in scikit-learn) and has no randomness, so the
same storage always exports the same numbers. The study has one objective per tier and
infeasible trials carry +/-inf, which no evaluator can use: each tier gets its own
single-objective in-memory study of that tier's feasible measurements (with the objective's
direction, so no sign-flipping ``target=`` is needed).

A knob that cannot act at a tier is not ranked there: a seat cap (``--max-num-seqs``) at or
above the tier's concurrency never holds a user, so its values count as the default's
(``tuner.score.revert.Defaults.acting``), and a knob left with one acting value is listed in
``idle`` instead. ``METHOD`` is the sentence every shown importance carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import optuna
from optuna.trial import FrozenTrial

from objectives.objective import Objective
from tuner.score.revert import Defaults
from tuner.score.tiers import Tier

MIN_TRIALS = 8  # below this the "top quantile" is one or two trials: noise, not importance
TOP_TRIALS = 5  # PED-ANOVA's advice: at least this many trials above the target quantile


@dataclass
class Importance:
    """Normalised importances (summing to 1), or why there are none."""

    concurrency: int
    values: dict[str, float] = field(default_factory=dict)
    trials: int = 0
    quantile: float = 0.0  # the share of best trials the importances explain
    note: str = ""
    idle: list[str] = field(default_factory=list)  # knobs that cannot act at this tier


METHOD = (
    "PED-ANOVA importance (Optuna): how much each parameter's values separate the best "
    "{top:.0%} of the {n} feasible configs at c{tier} from the rest, on {objective}; it ranks "
    "parameters, it does not measure their effect (each pick's knobs carry their measured "
    "effect and whether it is beyond the noise)"
)


def tier_importance(
    tier: Tier,
    trials: Sequence[FrozenTrial],
    objective: Objective,
    defaults: Defaults | None = None,
) -> Importance:
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
    acts = defaults.acting if defaults else (lambda _n, v, _t: v)
    c = tier.concurrency
    varied = [n for n in names if len({repr(acts(n, p.params.get(n), c)) for p in feasible}) > 1]
    out.idle = [
        n for n in names if n not in varied and len({repr(p.params.get(n)) for p in feasible}) > 1
    ]
    if not varied:
        out.note = "no parameter took more than one value among the feasible trials"
        return out
    top = min(0.5, max(0.1, TOP_TRIALS / len(feasible)))
    out.quantile = top
    evaluator = optuna.importance.PedAnovaImportanceEvaluator(target_quantile=top)
    got = optuna.importance.get_param_importances(study, evaluator=evaluator, params=varied)
    out.values = {k: round(float(v), 4) for k, v in got.items()}
    return out
