"""Confirmation runs: the leading configs of every tier measured again on a fresh engine.

One launch of a config is one draw of the engine's run-to-run noise, and the best of many draws
is flattered by it. Once exploration is done, the baseline and the ``k`` configs with the best
mean at each tier are launched once more, each on a new engine (a new trial: new start-up, new
noise). A confirmation trial's record names the config's first measurement (``confirm_of``); it
is never answered from the duplicate cache, does not count towards ``--trials``, and runs
through the same claim / run / tell loop as every trial (``WorkerLoop.drain``). Confirmations
can reshuffle a tier's leaders, so the pick is repeated (at most ``MAX_ROUNDS`` times) until
every leader holds two launches. ``tuner.score.recommend`` then pools the launches of each
config and weighs its lead against the noise the repeats reveal.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective
from tuner.record.trial import TrialRecord, confirm_attrs
from tuner.run.context import DEFAULT_CONFIRM
from tuner.run.loop import WorkerLoop
from tuner.score.eligible import Eligible, Policy
from tuner.score.pooling import Config, configs
from tuner.score.recommend import rank_score

MAX_ROUNDS = 3
LAUNCHES = 2  # launches a leading config should hold once confirmed

__all__ = ["DEFAULT_CONFIRM", "confirm_leaders", "pending"]


def leaders(
    groups: Sequence[Config], objective: Objective, tier: int, k: int, policy: Policy
) -> list[Config]:
    """The ``k`` configs eligible at ``tier`` with the best mean objective value there."""
    eligible = Eligible.at(groups, tier, policy).configs
    scored = [(rank_score(c, objective, tier, None), c) for c in eligible]
    ranked = [(s, c) for s, c in scored if s is not None]
    ranked.sort(key=lambda sc: sc[0], reverse=objective.direction == "maximize")
    return [c for _, c in ranked[:k]]


def pending(
    trials: Sequence[FrozenTrial],
    objective: Objective,
    tiers: Sequence[int],
    k: int,
    policy: Policy | None = None,
) -> list[TrialRecord]:
    """First trials of the configs that still need a confirmation launch, in trial order."""
    if k <= 0:
        return []
    groups = list(configs(trials).values())
    policy = policy or Policy()
    wanted = {
        c.root.number: c for tier in tiers for c in leaders(groups, objective, tier, k, policy)
    }
    wanted.update(
        {c.root.number: c for c in groups if c.is_baseline and any(map(c.feasible_at, tiers))}
    )
    queued = {
        TrialRecord.of(t).confirm_of
        for t in trials
        if t.state in (TrialState.WAITING, TrialState.RUNNING)
    }
    todo = [c.root for n, c in wanted.items() if len(c.runs) < LAUNCHES and n not in queued]
    return sorted(todo, key=lambda t: t.number)


def enqueue(study: optuna.Study, roots: Sequence[TrialRecord]) -> None:
    for root in roots:
        study.enqueue_trial(dict(root.params), user_attrs=confirm_attrs(root.number))


def confirm_leaders(worker: WorkerLoop, k: int, deadline: float | None) -> int:
    """Confirm the leaders of every tier; returns how many confirmation launches were queued."""
    objective, study = worker.objective, worker.study
    tiers, queued, rounds = list(objective.ctx.space.workload.tiers), 0, 0
    while not _past(deadline) and objective.stop_reason() is None:
        with worker.j.lock.held():  # a second run on the study must see these as queued
            trials = study.get_trials(deepcopy=False)
            todo = pending(
                trials, objective.ctx.objective, tiers, k, Policy.of(objective.ctx.space)
            )
            todo = todo if rounds < MAX_ROUNDS else []
            enqueue(study, todo)
        if todo:
            rounds += 1
            queued += len(todo)
            numbers = ", ".join(str(t.number) for t in todo)
            objective.report(f"confirming {len(todo)} leading configs on a fresh engine: {numbers}")
        if not waiting(study):
            break
        worker.drain(deadline, objective.report)  # also runs launches queued again after a fault
    return queued


def waiting(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline
