"""Knobs put back together that measured worse, told apart one at a time.

``tuner.score.revert`` sets every knob of a tier's pick whose estimated effect is within the
noise back to its default at once, and a confirmation launch measures that config (the group
reversion). Where it measures worse than the pick beyond the noise, or is no pick at the tier
at all (an SLO missed, the tier stopped once out of contention), at least one of those knobs
matters and the regression, which could not tell them apart, cannot say which. ``walk`` then
reverts them one at a time, the smallest estimated |effect| first (estimated from the launches
before the walk's first, so the order stays put as the walk's own launches come in):

- each step is the pick with that knob at its default, on top of the knobs the steps before it
  put back; a step the space's rules forbid is skipped, its knob kept untested;
- a step measured not worse than the pick beyond the noise (the test ``simplest`` applies)
  puts its knob back and the next steps build on it, so the walk ends on a measured config
  that ``simplest`` can pick;
- a step measured worse keeps its knob, now with a measured effect;
- the first step not measured yet is the one to launch next (``Walk.next``), one per tier per
  confirmation round (``tuner.run.confirm``); the steps after it are untested.

Bound: the single-knob launches from one leader (``revert_of`` and ``revert_knob``, counted
over every tier) number at most the knobs its tier's group reversion put back, one per round;
none is launched before the group's launch and the tier's run-to-run noise are measured (so
``--confirm 0`` launches none), and like every confirmation none once ``--timeout`` is spent.
A knob whose step was never measured stays set and says so (``tuner.score.evidence``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from objectives.objective import Objective
from tuner.score.eligible import Policy
from tuner.score.pooling import Config, noise_cv
from tuner.score.revert import Defaults, Effect, knob_effects, measured_loss, reverted

REVERTED, KEPT, FORBIDDEN, NEXT, UNTESTED = "reverted", "kept", "forbidden", "next", "untested"
IDLE = "idle"  # cannot act at the tier: back at its default with no launch


@dataclass(frozen=True)
class Step:
    """The pick with one more knob at its default, and what its launch said."""

    knob: str
    params: dict[str, Any]
    outcome: str  # reverted / kept / idle / forbidden (by a rule) / next (to launch) / untested
    trial: int | None = None  # the launch that measured it
    loss: float | None = None  # how much worse than the pick it measured (0.04: 4% worse)


@dataclass(frozen=True)
class Walk:
    """A tier's knobs that were put back together and measured worse, tried one at a time."""

    pick: int  # root trial of the config each step is compared against
    origin: int  # root trial of the config the group reversion put the knobs back from
    group: int  # root trial of the group reversion
    group_loss: float | None  # how much worse than the pick it measured (None: no figure)
    together: tuple[str, ...]  # the knobs it put back, in the walk's order
    steps: tuple[Step, ...]

    @property
    def next(self) -> Step | None:
        """The step to launch now (None: every step measured, forbidden, or the cap met)."""
        return next((s for s in self.steps if s.outcome == NEXT), None)

    def step(self, knob: str) -> Step | None:
        return next((s for s in self.steps if s.knob == knob), None)


def walk(
    groups: Sequence[Config],
    best: Config,
    pool: Sequence[Config],
    objective: Objective,
    tier: int,
    policy: Policy,
    noise: float | None,
) -> Walk | None:
    """``best``'s knobs told apart at ``tier`` (``pool``: the configs eligible there); None
    where nothing needs it: the noise or the group reversion not measured yet, or the group
    reversion holds up against ``best`` (``simplest`` picks it)."""
    defaults = policy.defaults
    if defaults is None or noise is None:
        return None
    origin = _origin(groups, best)
    effects = _effects(groups, origin, objective, tier, defaults)
    group = _group(groups, origin, tier, effects, defaults)
    if group is None:
        return None
    held, group_loss = holds_up(group, best, pool, objective, tier, noise)
    if held:
        return None
    changed = defaults.changed(group.root.params)
    together = [k for k in defaults.changed(origin.root.params) if k not in changed]
    size = {k: abs(e.change) for k, e in effects.items()}  # none: cannot act at the tier
    order = tuple(sorted(together, key=lambda k: (size.get(k, 0.0), k)))
    w = Walk(best.root.number, origin.root.number, group.root.number, group_loss, order, ())
    steps = _steps(w, groups, best, pool, (objective, tier, noise), policy)
    return Walk(w.pick, w.origin, w.group, w.group_loss, w.together, steps)


def _steps(
    w: Walk,
    groups: Sequence[Config],
    best: Config,
    pool: Sequence[Config],
    at: tuple[Objective, int, float],
    policy: Policy,
) -> tuple[Step, ...]:
    assert policy.defaults is not None
    defaults, idle = policy.defaults.values, policy.defaults.idle(best.root.params, at[1])
    by_params = {_key(policy.defaults.canonical(c.root.params)): c for c in groups}
    launched = sum(_step_of(c, w.origin) for c in groups)
    base, out, waiting = dict(best.root.params), [], False
    for k in w.together:
        if k not in policy.defaults.changed(base):
            continue  # the pick is itself a step that put it back, or another knob silenced it
        params = policy.defaults.canonical({**base, k: defaults[k]})
        c = by_params.get(_key(params))
        if k in idle and policy.allows(params):
            out.append(Step(k, params, IDLE))
            base = params
        elif not policy.allows(params):
            out.append(Step(k, params, FORBIDDEN))
        elif c is None or waiting:
            # Each later step builds on this one's verdict: none is known until it is measured.
            first = not waiting and launched < len(w.together)
            out.append(Step(k, params, NEXT if first else UNTESTED))
            waiting = True
        else:
            held, loss = holds_up(c, best, pool, *at)
            out.append(Step(k, params, REVERTED if held else KEPT, c.root.number, loss))
            base = params if held else base
    return tuple(out)


def holds_up(
    c: Config,
    best: Config,
    pool: Sequence[Config],
    objective: Objective,
    tier: int,
    noise: float,
) -> tuple[bool, float | None]:
    """Whether ``c`` holds up against ``best`` (eligible, not worse beyond the noise, and no
    preemption where ``best`` had none: that ranks it after ``best`` whatever its figures), and
    how much worse it measured."""
    loss = measured_loss(c, best, objective, tier, noise)
    eligible = any(c is p for p in pool) and not c.preempted_beside(best, tier)
    return eligible and loss is not None and not loss[1], None if loss is None else loss[0]


def _effects(
    groups: Sequence[Config], origin: Config, objective: Objective, tier: int, defaults: Defaults
) -> dict[str, Effect]:
    """The regression's estimates for ``origin``'s knobs from the launches before the walk's
    first step (all of them, before it starts): its own launches do not move its order."""
    first = [c.root.number for c in groups if _step_of(c, origin.root.number)]
    n = min(first, default=None)
    if n is not None:
        groups = [Config([r for r in c.runs if r.number < n]) for c in groups if c.root.number < n]
    noise = noise_cv(groups, objective, tier)
    return knob_effects(groups, origin.root.params, objective, tier, defaults, noise)


def _group(
    groups: Sequence[Config],
    origin: Config,
    tier: int,
    effects: dict[str, Effect],
    defaults: Defaults,
) -> Config | None:
    """The measured config that is ``origin`` with its knobs idle at ``tier`` all at their
    defaults: the reversion launched for the tier, else one measured before (for another tier
    or as sampled, so never launched again)."""
    o = origin.root.number
    launched = (c for c in groups if c.root.revert_of == o and c.root.revert_at == tier)
    back = reverted(origin.root.params, effects, defaults)
    same = (
        c
        for c in groups
        if back != defaults.canonical(origin.root.params)
        and _key(defaults.canonical(c.root.params)) == _key(back)
    )
    return next((c for c in launched if c.root.revert_knob is None), None) or next(same, None)


def _origin(groups: Sequence[Config], best: Config) -> Config:
    """The config whose group reversion ``best``'s knobs are told apart from: ``best`` itself,
    unless it is a step of that walk (a group reversion that leads has a group of its own)."""
    r = best.root
    of = r.revert_of if r.revert_knob is not None and r.revert_at is None else None
    return next((c for c in groups if of is not None and c.root.number == of), best)


def _step_of(c: Config, origin: int) -> bool:
    """Whether ``c`` was launched as a step of the walk from trial ``origin``."""
    r = c.root
    return r.revert_of == origin and r.revert_knob is not None and r.revert_at is None


def _key(value: Any) -> str:
    """A parameter value, or a whole config, as confirmations tell configs apart."""
    return repr(sorted(value.items())) if isinstance(value, dict) else repr(value)
