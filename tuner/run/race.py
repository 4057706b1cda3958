"""Which tiers of a launch may stop early, and what each is raced against.

Each tier races against its current pick (``tuner.score.recommend``: eligible, pooled), read
back from the study with the per-request values its launch stored; a tier with no pick yet,
whose pick stored none, or whose pick held users back, is raced against the space's SLOs on a
longest figure alone (``ceilings``), or measured in full where it has none. A pick that held
users is no yardstick for the objective: a launch that seats them is slower per token for
running more at once, and may still win the tier by the queueing rule
(``tuner.score.eligible``), which only a launch measured in full can show. The baseline and
confirmation launches are never raced: the yardstick and every pick's second launch rest on
every request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective
from objectives.race import CEILINGS, Race, RaceRule, series_of
from tuner.record.trial import TrialRecord
from tuner.score.eligible import Policy
from tuner.score.recommend import recommend
from tuner.space.schema import Space


def race_for(
    space: Space, objective: Objective, trials: Sequence[FrozenTrial], in_full: bool = False
) -> Race | None:
    """The race of the next launch (None: every tier in full, as ``in_full`` asks for the
    baseline and confirmations)."""
    study = space.study
    if not study.race or in_full:
        return None
    incumbents: dict[int, list[float | None]] = {}
    if series_of(objective.key) is not None:
        incumbents = _incumbents(space, objective, trials)
    limits = ceilings(space)
    if not incumbents and not limits:
        return None
    rule = RaceRule(alpha=study.race_alpha, margin=study.race_margin)
    return Race(objective.key, incumbents, rule, limits)


def _incumbents(
    space: Space, objective: Objective, trials: Sequence[FrozenTrial]
) -> dict[int, list[float | None]]:
    """Per tier whose pick seated every user, the pick's stored per-request values."""
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    out: dict[int, list[float | None]] = {}
    by_number = {t.number: TrialRecord.of(t) for t in done}
    for rec in recommend(done, objective, list(space.workload.tiers), Policy.of(space)):
        if rec.trial is None or rec.users_held:
            continue
        if values := _stored(by_number, rec.runs, rec.concurrency):
            out[rec.concurrency] = values
    return out


def ceilings(space: Space) -> dict[int, dict[str, float]]:
    """Per tier, the space's SLOs on a longest figure as limits on a per-request series
    (seconds; the tightest where two apply)."""
    out: dict[int, dict[str, float]] = {}
    for slo in space.slos:
        name = CEILINGS.get(slo.metric)
        if name is None or slo.max is None:
            continue
        for tier in space.workload.tiers:
            if slo.applies_to(tier):
                limits = out.setdefault(tier, {})
                limits[name] = min(limits.get(name, math.inf), slo.max / 1000)
    return out


def _stored(
    by_number: dict[int, TrialRecord], runs: Sequence[int], tier: int
) -> list[float | None] | None:
    """The per-request values of the pick's first launch that stored them at ``tier``."""
    for n in runs:
        rec = by_number.get(n)
        if rec is not None and (values := rec.requests.get(str(tier))):
            return list(values)
    return None
