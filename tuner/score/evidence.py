"""How each knob a pick keeps was measured to matter: one note per knob, plain data that every
export shows as it is (``recipe.yaml``, ``commands.md``, ``recommendations.txt`` / ``.json``,
``report.html``, ``tune show``).

A knob's note says which measurement keeps it, in this order:

- ``reversion``: its own reversion launch (``tuner.score.narrow``, or the pick launched without
  it alone, ``tuner.score.apart``) measured worse than the leader beyond the noise: "reverting
  it measured +4.1% worse p99_tpot (trial 52 against 34)";
- ``regression``: the regression's estimate (``tuner.score.revert.knob_effects``) is a gain
  beyond the noise;
- ``untested``: it was put back with others and that measured worse, and no launch tried it
  alone (the budget ran out first, or the space's rules forbid reverting it alone);
- ``unmeasured``: none of these: no reversion was measured at the tier (confirmations off,
  the time spent), or none can be judged (no config measured twice at the tier, so its
  run-to-run noise is unknown); the words say which beside the estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from objectives.objective import Objective
from tuner.score.apart import Apart
from tuner.score.narrow import FORBIDDEN, IDLE, KEPT, Walk
from tuner.score.revert import Defaults, Effect

# How each note says it was measured (``measured_by``).
REVERSION, REGRESSION, UNTESTED, NOT_MEASURED = "reversion", "regression", "untested", "unmeasured"
UNMEASURED = "no reversion measured it apart"
FORBIDDEN_WORDS = "the space's rules forbid reverting it alone"
UNJUDGED = "no reversion judged at this tier: no config measured twice there, its noise unknown"


@dataclass(frozen=True)
class Measured:
    """What measured a pick's knobs at one tier: the regression, the walk, the launches of the
    pick without one knob, the tier's leader they are judged against, and the tier's noise."""

    effects: Mapping[str, Effect]
    walk: Walk | None
    apart: Mapping[str, Apart]
    lead: int
    noise: float | None
    # Knobs the pick cannot have at the default alone: that config breaks a rule of the space.
    forbidden: frozenset[str] = frozenset()
    # Configs (root trials) whose engine preempted requests at the tier where the leader's did
    # not: whatever their figures, they rank after it (``tuner.score.narrow.holds_up``).
    stormed: frozenset[int] = frozenset()


def knob_notes(
    params: Mapping[str, Any], m: Measured, objective: Objective, defaults: Defaults
) -> dict[str, dict[str, Any]]:
    """Each knob ``params`` changes from the engine's default, with how its effect was
    measured."""
    why = UNMEASURED if m.noise is not None else UNJUDGED
    return {
        k: {"value": v, **_note(k, m, objective.name, why)}
        for k, v in defaults.changed(params).items()
    }


def _note(knob: str, m: Measured, name: str, unmeasured: str) -> dict[str, Any]:
    e, walk, alone = m.effects.get(knob), m.walk, m.apart.get(knob)
    step = walk.step(knob) if walk else None
    if walk is not None and step is not None and step.outcome == KEPT:
        return _reversion(step.loss, step.trial, walk.pick, name, m.stormed)
    if alone is not None and not alone.held:
        return _reversion(alone.loss, alone.trial, m.lead, name, m.stormed)
    if alone is not None:
        return _level(alone, m.lead, name)
    if e is not None and e.beyond_noise:
        words = f"{e.change:+.1%} {name} (±{e.error:.1%}, beyond the noise)"
        if e.together:  # the fit split one joint effect between them
            words += (
                f", estimated with {', '.join(e.together)}: every config measured changed "
                "them together, so their effects are not told apart"
            )
        note = {"measured_by": REGRESSION, "change": e.change, "words": words}
        return {**note, "together": list(e.together)} if e.together else note
    if walk is not None and knob in walk.together:
        return _untested(knob, walk, step is not None and step.outcome == FORBIDDEN, name)
    if knob in m.forbidden:
        words = f"{_estimate(e, name)}; {FORBIDDEN_WORDS}"
        return {"measured_by": NOT_MEASURED, "change": None if e is None else e.change,
                "words": words, "forbidden": True}  # fmt: skip
    return {
        "measured_by": NOT_MEASURED,
        "change": None if e is None else e.change,
        "words": f"{_estimate(e, name)}; {unmeasured}",
    }


def _reversion(
    loss: float | None, trial: int | None, pick: int, name: str, stormed: frozenset[int]
) -> dict[str, Any]:
    where = f"trial {trial} against trial {pick}"
    if trial in stormed:
        words = f"without it the engine preempted requests at this tier ({where})"
    elif loss is None or loss <= 0:  # no slower, but no pick: an SLO missed, the tier raced out
        words = f"without it the config is no pick at this tier ({where})"
    else:
        words = f"reverting it measured {loss:+.1%} worse {name} ({where})"
    return {"measured_by": REVERSION, "change": loss, "trial": trial, "words": words}


def _untested(knob: str, walk: Walk, forbidden: bool, name: str) -> dict[str, Any]:
    idle = {s.knob for s in walk.steps if s.outcome == IDLE}
    others = ", ".join(k for k in walk.together if k != knob and k not in idle)
    loss, where = walk.group_loss, f"trial {walk.group}"
    cost = f"measured {loss:+.1%} worse {name}" if loss and loss > 0 else "left no pick"
    why = FORBIDDEN_WORDS if forbidden else "not measured apart"
    words = f"kept untested: reverting it together with {others} {cost} ({where}); {why}"
    note = {"measured_by": UNTESTED, "change": None, "trial": walk.group, "words": words}
    return {**note, "forbidden": True} if forbidden else note


def _level(alone: Apart, lead: int, name: str) -> dict[str, Any]:
    # Measured without it and level with the leader, yet kept: the config without it did not
    # beat the baseline beyond the noise, which the pick did (``tuner.score.revert.simplest``).
    loss = "" if alone.loss is None else f" ({alone.loss:+.1%} {name})"
    words = (
        f"reverting it measured within the noise{loss} (trial {alone.trial} against trial "
        f"{lead}), but without it the config does not beat the baseline beyond the noise"
    )
    return {"measured_by": REVERSION, "change": alone.loss, "trial": alone.trial,
            "words": words, "within_noise": True}  # fmt: skip


def _estimate(e: Effect | None, name: str) -> str:
    if e is None:
        return "cannot act at this tier"
    if e.error == 0 and e.change == 0:  # no feasible config here went without it
        return "every feasible config at this tier has it: no estimate apart from the rest"
    return f"{e.change:+.1%} {name} (±{e.error:.1%}, within the noise)"


def unproven(notes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The knobs of a pick's notes that no measurement credits on their own, the smallest
    estimated effect first (the likeliest to do nothing)."""
    out = [k for k, n in notes.items() if _unproven(n)]
    # Knobs a fit could not tell apart share one estimate, equal but for the last bits the
    # linear algebra library leaves: rounded, they tie and keep the order the pick's knobs come
    # in (the order the space's parameters are sampled in), so the launches go in one order
    # whatever machine the study runs on.
    return sorted(out, key=lambda k: round(abs(notes[k].get("change") or 0.0), 9))


def _unproven(note: Mapping[str, Any]) -> bool:
    by = note.get("measured_by")
    if note.get("forbidden"):
        return False  # the space's rules keep it: no launch can measure it alone
    if by == NOT_MEASURED:
        return note.get("change") is not None  # None: it cannot act at the tier
    return by == UNTESTED or (by == REGRESSION and bool(note.get("together")))


def tries(notes: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """The launches that would measure a pick's unproven knobs, in the order to try them: the
    knobs whose estimates are within the noise all back at once first (where there are two or
    more: if that holds up, one launch settles them all), then each unproven knob alone."""
    knobs = unproven(notes)
    quiet = tuple(k for k in knobs if notes[k].get("measured_by") == NOT_MEASURED)
    return ([quiet] if len(quiet) >= 2 else []) + [(k,) for k in knobs]
