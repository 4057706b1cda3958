"""The last check of each pick: the same config on another draw of the workload.

A limit on a maximum (the longest gap any user met) is read off one draw of the workload:
which long prompts arrive together decides how large the largest prefill step is, and another
draw of the same shape moves that maximum by a quarter either way. A pick that sits just
under a limit on the study's draw goes past it on the next night's traffic as often as not.

So once the rounds of ``tuner.run.confirm`` and ``tuner.run.prune`` have nothing left to
launch, each tier's pick is launched once more on another draw of the workload: the
workload's seed plus one, the same other traffic for every pick. A launch that breaks one of
the space's limits at a tier makes its config infeasible there (every launch must hold,
``tuner.score.pooling.Config.feasible_at``), so the tier's pick moves to the next config and
the rounds go on. Its figures are not pooled with the study's draw. A tier gets at most
``PER_TIER`` such launches, only where the space sets a limit at that tier, none with
``--confirm 0`` and none once ``--timeout`` is spent.
"""

from __future__ import annotations

from collections.abc import Sequence

from optuna.trial import FrozenTrial

from objectives.objective import Objective
from tuner.score.draws import PER_TIER, spent_on
from tuner.score.eligible import Policy
from tuner.score.pooling import configs
from tuner.score.recommend import recommend
from tuner.space.schema import Space


def draw_seed(space: Space) -> int:
    """The seed of the other draw every pick is checked on."""
    return space.workload.seed + 1


def holdouts(
    trials: Sequence[FrozenTrial], objective: Objective, space: Space, policy: Policy
) -> list[tuple[int, int]]:
    """Per tier whose pick no launch checked on another draw yet: (the pick's root trial, the
    tier), a config picked at several tiers once, in tier order."""
    groups = list(configs(trials).values())
    checked = {t.root for c in groups for t in c.drawn}
    limited = {tier for tier in space.workload.tiers if _limited(space, tier)}
    out: list[tuple[int, int]] = []
    for rec in recommend(trials, objective, space.workload.tiers, policy):
        tier = rec.concurrency
        if rec.trial is None or tier not in limited or len(spent_on(groups, tier)) >= PER_TIER:
            continue
        if rec.trial not in checked:
            out.append((rec.trial, tier))
            checked.add(rec.trial)
    return out


def _limited(space: Space, tier: int) -> bool:
    return any(slo.applies_to(tier) for slo in space.slos)
