"""Confirmation runs: the leading configs of every tier measured again on a fresh engine.

One launch of a config is one draw of the engine's run-to-run noise, and the best of many draws
is flattered by it. Once exploration is done, the baseline (the yardstick every verdict reads
the noise against) and, at each tier whose pick is within the noise of a rival
(``close_leaders``), the ``k`` configs with the best mean are launched once more, each on a new
engine (a new trial: new start-up, new noise). A tier whose pick leads its runner-up by more
than the noise is not confirmed: another draw would not change the pick, and a launch costs a
whole start-up and every tier. A confirmation trial's record names the config's first
measurement (``confirm_of``); it is never answered from the duplicate cache, does not count
towards ``--trials``, and runs through the same claim / run / tell loop as every trial
(``WorkerLoop.drain``). Confirmations can reshuffle a tier's leaders, so the pick is repeated
(at most ``MAX_ROUNDS`` times) until every leader holds two launches. ``tuner.score.recommend``
then pools the launches of each
config and weighs its lead against the noise the repeats reveal.

The same rounds launch each tier's leader once more with the knobs whose effect at that tier
is not beyond the noise back at the engine's defaults (``tuner.score.revert``), where the
space's rules allow: if it measures within the noise of the leader, it is the pick, and the
recipe carries only the knobs that mattered. Where it measures worse and put back two knobs or
more, the later rounds try those knobs one at a time (``tuner.score.narrow``), one launch per
tier and round: at most one launch per knob put back, none once ``--timeout`` is spent, none
without the tier's noise (so none with ``--confirm 0``). Once nothing is left to launch,
``tuner.run.prune`` measures the picks' kept knobs apart, and then ``tuner.run.holdout``
launches every pick on another draw of the workload, where it must stay within the limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import Objective
from tuner.record.trial import TrialRecord, confirm_attrs, draw_attrs, revert_attrs
from tuner.run.context import DEFAULT_CONFIRM
from tuner.run.eta import Clock
from tuner.run.holdout import draw_seed, holdouts
from tuner.run.loop import WorkerLoop
from tuner.run.objective import StudyObjective
from tuner.run.prune import prunings, queued_confirmations
from tuner.score.eligible import Eligible, Policy
from tuner.score.pooling import Config, configs, noise_cv
from tuner.score.recommend import leader, rank_score, tier_walk
from tuner.score.revert import knob_effects, reverted
from tuner.space.sample import config_key, violated_rules
from tuner.space.schema import Space

MAX_ROUNDS = 3
LAUNCHES = 2  # launches a leading config should hold once confirmed
# A pick and its runner-up are within the noise when they differ by at most NOISE_Z run-to-run
# standard deviations; before any repeat shows the noise, it is taken as NOISE_FLOOR (the
# simulated H200's launches of one config spread by about 1%).
NOISE_Z = 2.0
NOISE_FLOOR = 0.015

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


def close_leaders(
    groups: Sequence[Config], objective: Objective, tier: int, k: int, policy: Policy
) -> list[Config]:
    """The pick at ``tier`` and its rivals within the noise of it, at most ``k``; none when
    the pick leads every rival by more than the noise (or has no rival)."""
    ranked = leaders(groups, objective, tier, max(k, 2), policy)  # a rival, even for k=1
    if len(ranked) < 2:
        return []
    noise = NOISE_Z * max(noise_cv(groups, objective, tier) or 0.0, NOISE_FLOOR)
    best = rank_score(ranked[0], objective, tier, None) or 0.0
    close = [
        c
        for c in ranked[1:]
        if abs((rank_score(c, objective, tier, None) or 0.0) - best) <= noise * abs(best)
    ]
    return [ranked[0], *close][:k] if close else []


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
        c.root.number: c
        for tier in tiers
        for c in close_leaders(groups, objective, tier, k, policy)
    }
    wanted.update(
        {c.root.number: c for c in groups if c.is_baseline and any(map(c.feasible_at, tiers))}
    )
    queued = queued_confirmations(trials)
    todo = [c.root for n, c in wanted.items() if len(c.pooled) < LAUNCHES and n not in queued]
    return sorted(todo, key=lambda t: t.number)


def reversions(
    trials: Sequence[FrozenTrial], objective: Objective, space: Space, policy: Policy
) -> list[tuple[int, int, dict[str, Any]]]:
    """Per tier, its leader (by root trial) with the knobs whose effect is within the noise at
    that tier back at their defaults: (leader, tier, config), once per leader and tier; none
    where nothing would change, the rules forbid it, or that config was already measured."""
    groups, defaults = list(configs(trials).values()), policy.defaults
    done = {(r.revert_of, r.revert_at) for r in map(TrialRecord.of, trials) if not r.revert_knob}
    seen = {config_key(policy.canonical(t.params)) for t in trials}
    out = []
    for tier in space.workload.tiers:
        top = leader(groups, objective, tier, policy)
        # A leader that tried one knob alone is a step of a walk that tells its knobs apart;
        # a reversion with no tier (an older study) stood for every tier.
        if top is None or defaults is None or top.root.revert_knob:
            continue
        if {(top.root.number, tier), (top.root.number, None)} & done:
            continue
        pick = dict(top.root.params)
        cv = noise_cv(groups, objective, tier)
        back = reverted(pick, knob_effects(groups, pick, objective, tier, defaults, cv), defaults)
        key = config_key(back)
        # Knobs that cannot act at the tier go back in the pick with no launch (it would
        # measure the same engine at this tier): a launch only where an acting knob goes back.
        acts = defaults.changed(back, tier) != defaults.changed(pick, tier)
        if acts and key not in seen and not violated_rules(space, back):
            out.append((top.root.number, tier, back))
            seen.add(key)
    return out


def narrowings(
    trials: Sequence[FrozenTrial], objective: Objective, space: Space, policy: Policy
) -> list[tuple[int, str, dict[str, Any]]]:
    """Per tier whose leader's knobs put back together measured worse, the next one to try
    alone (``tuner.score.narrow``): (the config it is put back from, the knob, the config),
    each config once, none already launched or queued."""
    groups = list(configs(trials).values())
    seen = {config_key(policy.canonical(t.params)) for t in trials}
    out = []
    for tier in space.workload.tiers:
        w = tier_walk(groups, objective, tier, policy)
        step = w.next if w is not None else None
        if w is None or step is None or (key := config_key(step.params)) in seen:
            continue
        out.append((w.origin, step.knob, step.params))
        seen.add(key)
    return out


def enqueue(study: optuna.Study, roots: Sequence[TrialRecord]) -> None:
    for root in roots:
        study.enqueue_trial(dict(root.params), user_attrs=confirm_attrs(root.number))


def confirm_leaders(worker: WorkerLoop, k: int, deadline: float | None) -> int:
    """Confirm the leaders of every tier; returns how many confirmation launches were queued."""
    objective, study, space = worker.objective, worker.study, worker.objective.ctx.space
    tiers, queued, rounds, policy = list(space.workload.tiers), 0, 0, Policy.of(space)
    while not _past(deadline, objective.clock) and objective.stop_reason() is None:
        with worker.j.lock.held():  # a second run on the study must see these as queued
            trials = study.get_trials(deepcopy=False)
            todo = pending(trials, objective.ctx.objective, tiers, k, policy)
            todo = todo if rounds < MAX_ROUNDS else []
            enqueue(study, todo)
            back = reversions(trials, objective.ctx.objective, space, policy)
            back = back if rounds < MAX_ROUNDS and k > 0 else []  # --confirm 0: none
            for root, tier, params in back:
                study.enqueue_trial(params, user_attrs=revert_attrs(root, tier))
            apart = narrowings(trials, objective.ctx.objective, space, policy)
            for root, knob, params in apart:
                study.enqueue_trial(params, user_attrs=revert_attrs(root, knob=knob))
            settled = k <= 0 or todo or back or apart  # --confirm 0: nothing launched again
            alone = [] if settled else _prune(study, trials, objective, policy)
            drawn = [] if settled or alone else _draw(study, trials, objective, policy)
        if back:
            objective.report(
                f"launching {len(back)} leading configs with their idle knobs at the engine's "
                f"defaults: {', '.join(f'{root} (c{tier})' for root, tier, _ in back)}"
            )
        if apart:
            objective.report(
                "their idle knobs together measured worse: trying one at a time, "
                + ", ".join(f"{root} with {knob} at its default" for root, knob, _ in apart)
            )
        if alone:
            objective.report("measuring kept knobs apart: " + "; ".join(alone))
        if drawn:
            objective.report(
                f"launching the picks on another draw of the workload (seed "
                f"{draw_seed(space)}): " + ", ".join(drawn)
            )
        if todo:
            rounds += 1
            queued += len(todo)
            numbers = ", ".join(str(t.number) for t in todo)
            objective.report(f"confirming {len(todo)} leading configs on a fresh engine: {numbers}")
        if not waiting(study):
            break
        worker.drain(deadline, objective.report)  # also runs launches queued again after a fault
    return queued


def _prune(
    study: optuna.Study, trials: Sequence[FrozenTrial], objective: StudyObjective, policy: Policy
) -> list[str]:
    """Queue the launches that measure the picks' kept knobs apart (``tuner.run.prune``); what
    was queued, in words."""
    tiers = objective.ctx.space.workload.tiers
    confirm, apart = prunings(trials, objective.ctx.objective, tiers, policy)
    enqueue(study, confirm)
    for root, tier, knobs, params in apart:
        study.enqueue_trial(params, user_attrs=revert_attrs(root, tier, ",".join(knobs)))
    return [f"confirming {t.number} (a pick whose tier's noise is unknown)" for t in confirm] + [
        f"c{tier} {root} with {', '.join(knobs)} at the defaults" for root, tier, knobs, _ in apart
    ]


def _draw(
    study: optuna.Study, trials: Sequence[FrozenTrial], objective: StudyObjective, policy: Policy
) -> list[str]:
    """Queue each pick's launch on another draw of the workload (``tuner.run.holdout``); what
    was queued, in words."""
    space = objective.ctx.space
    found = holdouts(trials, objective.ctx.objective, space, policy)
    params = {t.number: t.params for t in trials}
    for root, tier in found:
        study.enqueue_trial(dict(params[root]), user_attrs=draw_attrs(root, draw_seed(space), tier))
    return [f"{root} (c{tier})" for root, tier in found]


def waiting(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


def _past(deadline: float | None, clock: Clock) -> bool:
    return deadline is not None and clock.now() >= deadline
