"""Each knob a tier's pick keeps, measured on its own: the pick launched once more with that one
knob at the engine's default.

``tuner.score.evidence`` credits a knob with an effect from the regression (a gain beyond the
noise, told apart from every other knob) or from a reversion launch that measured worse. A knob
with neither is one the recipe would carry unproven (``tuner.score.evidence.unproven``):

- its estimate is within the noise, and no reversion tried it (one that mattered when the group
  reversion was chosen, and no longer does once more launches came in);
- its estimate rests on a joint effect: every config measured changed it together with other
  knobs, so the fit split their effect between them;
- it was put back with others, that measured worse, and no launch tried it alone.

The confirmation rounds launch the pick with such knobs at their defaults, one launch per tier
and round (``tuner.run.prune``): first every knob whose estimate is within the noise at once
(one launch settles them where that holds up), then each unproven knob alone
(``tuner.score.evidence.tries``).
``measured_apart`` reads the launches of one knob back, each against the tier's leader (the
test ``simplest`` applies):

- worse beyond the noise, or no pick at the tier (an SLO missed, the tier raced out): the knob
  matters, and its note says by how much;
- otherwise the config without it holds up, and ``simplest`` picks it (fewer changes) where it
  also beats the baseline beyond the noise.

Bound: each knob of a pick at most once per tier (a config is never launched twice for this),
none before the tier's run-to-run noise is measured, none with ``--confirm 0``, none once
``--timeout`` is spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from objectives.objective import Objective
from tuner.score.eligible import Policy
from tuner.score.narrow import holds_up
from tuner.score.pooling import Config
from tuner.space.sample import config_key


@dataclass(frozen=True)
class Apart:
    """The pick launched with one knob at its default, and what that launch said."""

    knob: str
    trial: int  # root trial of the launch without the knob
    loss: float | None  # how much worse than the tier's leader it measured (0.04: 4% worse)
    held: bool  # eligible at the tier and not worse than the leader beyond the noise


def without(params: Mapping[str, Any], knobs: Sequence[str], policy: Policy) -> dict[str, Any]:
    """``params`` with ``knobs`` at the engine's defaults, as one launch."""
    assert policy.defaults is not None
    back = {k: policy.defaults.values[k] for k in knobs}
    return policy.canonical({**params, **back})


def measured_apart(
    groups: Sequence[Config],
    pick: Config,
    lead: Config,
    pool: Sequence[Config],
    at: tuple[Objective, int, float | None],
    policy: Policy,
) -> dict[str, Apart]:
    """For each knob ``pick`` changes at the tier, the measured config that is ``pick`` without
    it, judged against ``lead`` (``at``: objective, tier, the tier's noise); none where the
    noise is unknown, as nothing can be judged."""
    objective, tier, noise = at
    if policy.defaults is None or noise is None:
        return {}
    by_params = {config_key(policy.canonical(c.root.params)): c for c in groups}
    out = {}
    for k in policy.defaults.changed(pick.root.params, tier):
        c = by_params.get(config_key(without(pick.root.params, (k,), policy)))
        if c is not None and c is not pick:
            held, loss = holds_up(c, lead, pool, objective, tier, noise)
            out[k] = Apart(k, c.root.number, loss, held)
    return out
