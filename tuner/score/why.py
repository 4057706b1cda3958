"""The one line that explains a tier's pick: what it gave up for what, whom it held back
within which SLOs, and which feasible configs were left out and why.

The trade is against the other axis of the tier's front (``objectives.objective.front_axes``):
output throughput unless ``--objective`` named more than one objective.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from objectives.objective import Objective
from tuner.score.eligible import Eligible, Policy, ttft, users_held
from tuner.score.pooling import Config

# A KV cache this full at its peak leaves a few thousand tokens' blocks: a draw with a little
# more context in flight preempts (README's c40 pick: 99.4% on its own draw, one preemption storm
# in 20 replays).
KV_EDGE = 0.98


@dataclass(frozen=True)
class Leader:
    """The best-ranked config before knobs within the noise went back to their defaults, and
    the tier's run-to-run noise (coefficient of variation of one launch)."""

    config: Config | None
    noise: float | None


def choice_line(
    pick: Config | None,
    value: float | None,
    pool: Eligible,
    goal: tuple[Objective, Objective],
    policy: Policy,
    leader: Leader | None = None,
) -> str:
    """The pick's line; ``value`` is its pooled objective, ``goal`` (objective, trade)."""
    if pick is None:
        return f"c{pool.tier}: no eligible config" + _left_out(pool, policy)
    if leader is not None and leader.config is not None and leader.config is not pick:
        head = _simpler(pick, leader, pool.tier, goal[0], policy)
    else:
        head = _trade(pick, value, pool, *goal)
    parts = [f"c{pool.tier}: trial {pick.root.number} " + head]
    held = users_held(pick, pool.tier)
    if held:
        parts.append(
            f"its server never ran {held:g} of its {pool.tier} users at once while "
            f"requests waited, within the tier's SLOs ({policy.slo_text.get(pool.tier, '')})"
            + _seated(pick, held, pool)
        )
    if preempted := pick.worst_server(pool.tier, "num_preemptions"):
        parts.append(f"it preempted {preempted:g} requests (ranked after configs that did not)")
    elif (kv := pick.worst_server(pool.tier, "kv_cache_usage_peak") or 0.0) >= KV_EDGE:
        parts.append(f"its KV cache peaked {kv:.1%} full, at the edge of preempting")
    return "; ".join(parts) + _left_out(pool, policy)


def _simpler(pick: Config, leader: Leader, tier: int, objective: Objective, policy: Policy) -> str:
    # A config with fewer changes stands in for the best measured one when the gap between
    # them is within the noise: say so, rather than trade figures that read as a loss.
    assert leader.config is not None
    mine, theirs = pick.values(objective, tier), leader.config.values(objective, tier)
    gain = objective.gain(statistics.fmean(theirs), statistics.fmean(mine))
    changed = policy.defaults.changed if policy.defaults is not None else dict
    n, m = len(changed(pick.root.params)), len(changed(leader.config.root.params))
    what = "the engine's defaults" if n == 0 else f"{n} of the {m} changed knobs"
    noise = ""
    if leader.noise is not None:
        error = 2 * leader.noise * math.sqrt(1 / len(mine) + 1 / len(theirs))
        noise = f" ({error:.0%} at two standard errors of this tier's run-to-run noise)"
    # The leader ranks first by more than its figure (no preemptions, say), so it can measure
    # worse than the config that stands in for it.
    ahead = f"{gain:.1%} better" if gain >= 0 else f"{-gain:.1%} worse"
    return (
        f"keeps {what}: the best measured, trial {leader.config.root.number} ({m} changed), "
        f"was {ahead} on {objective.name}, within the noise{noise}, so the fewer changes stand"
    )


def _seated(pick: Config, held: float, pool: Eligible) -> str:
    mine = ttft(pick, pool.tier)
    if pool.seated_ttft is None or mine is None:
        return ""
    if held == pool.seated_held:
        fewer = any(users_held(c, pool.tier) < held for c in pool.configs)
        return ", the fewest any eligible config held" + (" without preempting" if fewer else "")
    where = (
        "every user was seated"
        if not pool.seated_held
        else f"the fewest users were held ({pool.seated_held:g})"
    )
    return (
        f" and a P99 TTFT of {mine:.0f} ms against {pool.seated_ttft:.0f} ms where {where} "
        "(within the noise, as its throughput)"
    )


def _trade(
    pick: Config, value: float | None, pool: Eligible, objective: Objective, trade: Objective
) -> str:
    def on_trade(c: Config) -> float | None:
        return c.mean_metrics(pool.tier, (trade.key,)).get(trade.key)

    scored = [(v, c) for c in pool.configs if (v := on_trade(c)) is not None]
    mine = on_trade(pick)
    words = trade.name.replace("_", " ")
    if not scored or mine is None or value is None:
        return f"has the best {objective.name} of the eligible configs"
    top, best = scored[0]
    for v, c in scored[1:]:
        if trade.better(v, top):
            top, best = v, c
    theirs = best.values(objective, pool.tier)
    if best is pick or not top or not theirs or not trade.better(top, mine):
        return f"has the best {objective.name} and the best {words} of the eligible configs"
    loss, gain = -trade.gain(mine, top), objective.gain(value, sum(theirs) / len(theirs))
    given = f"gives up {loss:.1%} of {words} ({mine:.0f} against {top:.0f} {trade.unit}, "
    if gain >= 0:
        return given + f"trial {best.root.number}) for {gain:.1%} better {objective.name}"
    # Only a rank above the figures puts a config worse on both ahead: say which.
    why = ""
    if best.preempted_beside(pick, pool.tier):
        why = f": trial {best.root.number}'s engine preempted requests, which ranks it last"
    return given + f"trial {best.root.number}) and is {-gain:.1%} worse on {objective.name}{why}"


def _left_out(pool: Eligible, policy: Policy) -> str:
    out = []
    if pool.lower_quality:
        floor = policy.gate.floor
        out.append(f"{len(pool.lower_quality)} answered below the quality floor ({floor:.0%})")
    if pool.near_limit:
        out.append(
            f"{len(pool.near_limit)} within a draw's spread of a limit (another draw of the "
            "workload would plausibly break it)"
        )
    if pool.held:
        out.append(f"{len(pool.held)} held users waiting with no SLO at this tier")
    if pool.queued:
        out.append(
            f"{len(pool.queued)} held more users back at a P99 TTFT or throughput beyond the "
            "noise of a config that held the fewest"
        )
    if pool.below_floor:
        out.append(
            f"{len(pool.below_floor)} below {policy.throughput_floor:.0%} of the tier's best "
            "throughput"
        )
    return f" ({'; '.join(out)} left out)" if out else ""
