"""Which feasible configs may be a tier's pick (``tuner.score.why`` says why in one line).

Feasible at a tier means every request served and the tier's SLOs met. A serving engineer
asks two more things of a pick, and ``Policy`` encodes them:

- it must not win by queueing users: a config whose server held users back at the tier (it
  never ran them all at once while requests waited, ``users_held`` > 0) may win that tier only
  where the space sets SLOs for it, so that the wait is bounded and the SLO line is the proof,
  and only if its users wait for their first token no longer than where the fewest are held:
  its median TTFT is within ``HELD_TTFT_RATIO`` of the best eligible config that held the
  fewest users, none where one seated them all (a P99 TTFT limit alone lets a seat limit
  through, as the last of a burst waits anyway);
- it must not give up most of a replica's capacity for latency: its output throughput reaches
  ``throughput_floor`` of the best a feasible config reached at the tier.

The pick is then the eligible config with the best pooled objective: a point of the tier's
front of objective against throughput among the eligible configs (``tuner.score.tiers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from objectives.metrics import SLO
from tuner.score.pooling import Config
from tuner.space.schema import Space

THROUGHPUT = "output_throughput"
TTFT = "median_ttft_ms"
# Queueing shows as a median TTFT several times the seated configs' (5x at 20 users with 16
# seats on the H200 space); 1.25 leaves room for run-to-run noise.
HELD_TTFT_RATIO = 1.25


@dataclass(frozen=True)
class Policy:
    """What makes a feasible config eligible, from the space (the defaults: no rule at all)."""

    throughput_floor: float = 0.0
    slo_tiers: frozenset[int] = frozenset()  # tiers at least one of the space's SLOs covers
    slo_text: dict[int, str] = field(default_factory=dict)  # per tier, its SLOs in words

    @classmethod
    def of(cls, space: Space) -> Policy:
        tiers = list(space.workload.tiers)
        covered = {t: [s for s in space.slos if s.applies_to(t)] for t in tiers}
        text = {t: ", ".join(_slo_words(s) for s in slos) for t, slos in covered.items() if slos}
        return cls(space.study.throughput_floor, frozenset(text), text)


def _slo_words(slo: SLO) -> str:
    if slo.max is not None:
        return f"{slo.metric} <= {slo.max:g}"
    return f"{slo.metric} >= {slo.min or 0:g}"


@dataclass
class Eligible:
    """A tier's feasible configs split into those that may win and why the others may not."""

    tier: int
    configs: list[Config]
    best_throughput: float | None
    held: list[Config] = field(default_factory=list)
    below_floor: list[Config] = field(default_factory=list)
    queued: list[Config] = field(default_factory=list)  # held, and users waited longer for it
    seated_ttft: float | None = None  # best median TTFT of those that held the fewest users
    seated_held: float = 0.0  # the fewest users an eligible config held

    @classmethod
    def at(cls, groups: Sequence[Config], tier: int, policy: Policy) -> Eligible:
        feasible = [c for c in groups if c.feasible_at(tier)]
        tputs = [t for c in feasible if (t := throughput(c, tier)) is not None]
        best = max(tputs) if tputs else None
        out = cls(tier, [], best)
        for c in feasible:
            if holds_users(c, tier) and tier not in policy.slo_tiers:
                out.held.append(c)
            elif best and (throughput(c, tier) or 0.0) < policy.throughput_floor * best:
                out.below_floor.append(c)
            else:
                out.configs.append(c)
        out._drop_queueing(tier)
        return out

    def _drop_queueing(self, tier: int) -> None:
        """Configs that held more users than the fewest any eligible config held, with a
        median TTFT beyond ``HELD_TTFT_RATIO`` of the best of those that held the fewest."""
        held = {c.root.number: users_held(c, tier) for c in self.configs}
        if not held or max(held.values()) == 0:
            return
        fewest = min(held.values())
        seated = [t for c in self.configs if held[c.root.number] == fewest and (t := ttft(c, tier))]
        if not seated:
            return
        self.seated_ttft, self.seated_held = min(seated), fewest
        limit = HELD_TTFT_RATIO * self.seated_ttft
        self.queued = [
            c
            for c in self.configs
            if held[c.root.number] > fewest and (ttft(c, tier) or 0.0) > limit
        ]
        self.configs = [c for c in self.configs if c not in self.queued]


def throughput(c: Config, tier: int) -> float | None:
    return c.mean_metrics(tier, (THROUGHPUT,)).get(THROUGHPUT)


def ttft(c: Config, tier: int) -> float | None:
    return c.mean_metrics(tier, (TTFT,)).get(TTFT)


def users_held(c: Config, tier: int) -> float:
    return c.worst_server(tier, "users_held") or 0.0


def holds_users(c: Config, tier: int) -> bool:
    return users_held(c, tier) > 0
