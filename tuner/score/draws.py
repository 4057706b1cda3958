"""How far another draw of the workload moves a limited figure, and the margin a pick keeps.

A space's limit on a tier figure (the longest gap any user met, a P99 TTFT) is read off one
draw of the workload, and a maximum over one draw moves with the draw: which long prompts
arrive together decides the largest prefill step. A config measured at 1.8 s against a 2 s
limit on the study's draw went past it on half of ten other draws of the same shape.

The picks' launches on another draw (``tuner.run.holdout``) show that spread: each config
launched on another draw gives, per tier and limited figure, one difference between that draw
and its own draw's pooled value. ``draw_cv`` pools them into one relative spread per tier and
figure. A pair counts where the config was feasible at the tier on its own draw, each launch
measured the tier on every request and neither engine preempted a request there: a draw that
tips a config into failure on its own draw, or into a preemption storm that turns a 0.8 s
longest gap into 21 s, is a fault of that config (ranked last, or ruled out, for it), not a
spread of the draws; a maximum over the 41 requests a race left measured is no figure of the
60 another draw sends. A pair that crossed the limit without preempting counts: that is the
spread the margin is for.
``near_limit`` then asks of a config the figure a new draw would plausibly show: the mean over
the draws it was measured on, worsened by ``DRAW_Z`` standard deviations of a new draw about
that mean, must stay within the limit. Until a launch on another draw shows the spread, no
margin is taken.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from objectives.metrics import SLO
from tuner.score.pooling import Config

DRAW_Z = 1.0  # a new draw's figure is taken at one standard deviation past its expected value
# The launches on another draw a tier gets (``tuner.run.holdout``): a tier whose picks keep
# breaking a limit, or preempting, there stops asking.
PER_TIER = 3


def draw_cv(groups: Sequence[Config], key: str, tier: int) -> float | None:
    """Pooled relative spread of ``key`` at ``tier`` between draws of the workload (None: no
    config feasible at the tier was launched on another draw)."""
    squares, n = 0.0, 0
    for c in groups:
        own = _own(c, key, tier)
        if own is None or own == 0 or not c.drawn or not _feasible_own(c, tier):
            continue
        for t in c.drawn:
            if not t.measured_in_full(tier) or t.preempted(tier):
                continue
            if (v := t.value(key, tier)) is not None:
                # The own draw's value is a mean over its launches: the difference holds a
                # new draw's spread and that mean's (engine noise, small beside a draw's).
                squares += ((v - own) / own) ** 2
                n += 1
    return math.sqrt(squares / n) if n else None


def near_limit(c: Config, tier: int, limits: Sequence[SLO], groups: Sequence[Config]) -> str | None:
    """The first of the tier's ``limits`` a new draw would plausibly break for ``c``, in words
    (None: it keeps the margin on every one, or no spread is known)."""
    for slo in limits:
        cv = draw_cv(groups, slo.metric, tier)
        draws = _draws(c, slo.metric, tier)
        if cv is None or not draws:
            continue
        center = statistics.fmean(draws)
        reach = DRAW_Z * cv * abs(center) * math.sqrt(1 + 1 / len(draws))
        if slo.max is not None and center + reach > slo.max:
            return f"{slo.metric} {center:.4g} + {reach:.3g} on another draw > {slo.max:g}"
        if slo.min is not None and center - reach < slo.min:
            return f"{slo.metric} {center:.4g} - {reach:.3g} on another draw < {slo.min:g}"
    return None


def held_on_draws(c: Config, tier: int, limits: Sequence[SLO]) -> list[dict[str, Any]]:
    """The config's launches on another draw at ``tier``: trial, seed and each limited figure."""
    keys = dict.fromkeys(s.metric for s in limits)
    return [
        {"trial": t.number, "seed": t.draw_seed, **{k: t.value(k, tier) for k in keys}}
        for t in c.drawn
        if t.tier(tier)
    ]


def spent_on(groups: Sequence[Config], tier: int) -> list[int]:
    """The configs (root trials) launched on another draw for ``tier``'s pick, in order."""
    roots = {t.root for c in groups for t in c.drawn if t.draw_for == tier}
    return sorted(roots)


def undrawn_words(groups: Sequence[Config], pick: Config, tier: int) -> str:
    """Why a limited tier's pick was never launched on another draw: the tier's launches there
    went to earlier picks, or none was made (``--confirm 0``, ``--timeout`` spent). Empty where
    it was launched there."""
    if pick.drawn:
        return ""
    spent = spent_on(groups, tier)
    if len(spent) < PER_TIER:
        return "; not launched on another draw of the workload: its limits rest on the study's draw"
    trials = ", ".join(str(n) for n in spent)
    return (f"; rests on the study's draw alone: the tier's {len(spent)} launches on another "
            f"draw of the workload went to earlier picks (trials {trials})")  # fmt: skip


def draw_words(held: Sequence[dict[str, Any]]) -> str:
    """``held_on_draws`` as the end of a pick's line (empty: none)."""
    said = []
    for h in held:
        shown = [(k, v) for k, v in h.items() if k not in ("trial", "seed") and v is not None]
        figures = ", ".join(f"{k} {_num(v)}" for k, v in shown)
        said.append(f"trial {h['trial']}, seed {h['seed']}" + (f": {figures}" if figures else ""))
    if not said:
        return ""
    return "; within the space's limits on another draw of the workload (" + "; ".join(said) + ")"


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _draws(c: Config, key: str, tier: int) -> list[float]:
    """One value per draw the config was measured on: its own draw's pooled mean first."""
    own = _own(c, key, tier)
    others = [v for t in c.drawn if (v := t.value(key, tier)) is not None]
    return ([own] if own is not None else []) + others


def _own(c: Config, key: str, tier: int) -> float | None:
    return c.mean_metrics(tier, (key,)).get(key)


def _feasible_own(c: Config, tier: int) -> bool:
    return bool(c.pooled) and all(
        t.feasible_at(tier) and t.measured_in_full(tier) and not t.preempted(tier) for t in c.pooled
    )
