"""Which feasible configs may be a tier's pick (``tuner.score.why`` says why in one line).

Feasible at a tier means every request served and the tier's SLOs met. A serving engineer
asks two more things of a pick, and ``Policy`` encodes them:

- it must not win by queueing users: a config whose server held users back at the tier (it
  never ran them all at once while requests waited, ``users_held`` > 0) may win that tier only
  where the space sets SLOs for it, so that the wait is bounded and the SLO line is the proof,
  and only if holding them cost nothing a user or the operator sees, against the configs that
  held the fewest users (none, where one seated them all): its P99 TTFT is within the noise of
  the best of theirs, and its output throughput is not below the best of theirs beyond the
  noise. Queueing shows in the tail, not the median: 8 of 40 users held made the last of a
  burst wait 48 s where a seated config kept them to 25 s, with the median much the same. The
  noise is each figure's run-to-run spread over the configs launched twice at the tier
  (``tuner.score.pooling.noise_cv``), ``QUEUE_Z`` standard errors of the difference; until a
  config has been launched twice it is unknown, and no held config is let through;
- it must not give up most of a replica's capacity for latency: its output throughput reaches
  ``throughput_floor`` of the best a feasible config reached at the tier;
- it must stay within the space's limits on traffic it was not picked on: once a pick's launch
  on another draw of the workload shows how far a draw moves a limited figure, a config whose
  figure a new draw would plausibly push past its limit is left out (``tuner.score.draws``);
- it must answer as the baseline does: where the space's quality gate is on, a config below
  its floor (``tuner.score.quality``) is lower quality, set apart before anything else, and
  its throughput sets no floor for the others (it is not one to deploy).

The pick is then the eligible config with the best pooled objective: a point of the tier's
front of objective against throughput among the eligible configs (``tuner.score.tiers``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from objectives.metrics import PER_REQUEST, SLO
from objectives.objective import get_objective
from tuner.score.draws import near_limit
from tuner.score.pooling import Config, noise_cv
from tuner.score.quality import Gate, config_quality
from tuner.score.revert import SEAT_FLAG, Defaults
from tuner.space.render import silenced_by
from tuner.space.rules import Rule
from tuner.space.schema import Space

P99_TTFT = get_objective("p99_ttft")
OUTPUT = get_objective("output_throughput")
THROUGHPUT, TTFT = OUTPUT.key, P99_TTFT.key
QUEUE_Z = 2.0  # standard errors of a difference beyond which it is no longer noise


@dataclass(frozen=True)
class Policy:
    """What makes a feasible config eligible, from the space (the defaults: no rule at all)."""

    throughput_floor: float = 0.0
    slo_tiers: frozenset[int] = frozenset()  # tiers at least one of the space's SLOs covers
    slo_text: dict[int, str] = field(default_factory=dict)  # per tier, its SLOs in words
    gate: Gate = field(default_factory=Gate)  # the quality floor
    defaults: Defaults | None = None  # the engine's defaults: a knob that did nothing goes back
    rules: tuple[Rule, ...] = ()  # the space's rules: a knob goes back only where they allow
    # Per tier, the space's SLOs on a tier figure: the limits a new draw must keep too.
    limits: dict[int, tuple[SLO, ...]] = field(default_factory=dict)

    def allows(self, params: Mapping[str, Any]) -> bool:
        """Whether a config keeps every rule of the space (so it may be launched)."""
        return all(rule.holds(params) for rule in self.rules)

    def canonical(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` as one launch (``Defaults.canonical``; as given with no defaults)."""
        return dict(params) if self.defaults is None else self.defaults.canonical(params)

    @classmethod
    def of(cls, space: Space) -> Policy:
        tiers = list(space.workload.tiers)
        covered = {t: [s for s in space.slos if s.applies_to(t)] for t in tiers}
        text = {t: ", ".join(_slo_words(s) for s in slos) for t, slos in covered.items() if slos}
        params = space.parameters
        caps = frozenset(n for n, p in params.items() if p.flag == SEAT_FLAG)
        values = {n: p.default for n, p in params.items()}
        defaults = Defaults(values, caps, silenced_by(space))
        floor, rules = space.study.throughput_floor, tuple(space.parsed_rules())
        limits = {
            t: tuple(s for s in slos if s.metric not in PER_REQUEST) for t, slos in covered.items()
        }
        return cls(floor, frozenset(text), text, Gate.of(space), defaults, rules, limits)


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
    queued: list[Config] = field(default_factory=list)  # held, and it cost TTFT or throughput
    lower_quality: list[Config] = field(default_factory=list)  # below the quality floor
    near_limit: list[Config] = field(default_factory=list)  # another draw would break a limit
    seated_ttft: float | None = None  # best P99 TTFT of those that held the fewest users
    seated_throughput: float | None = None  # best output throughput of those
    seated_held: float = 0.0  # the fewest users an eligible config held

    @classmethod
    def at(cls, groups: Sequence[Config], tier: int, policy: Policy) -> Eligible:
        feasible = [c for c in groups if c.feasible_at(tier)]
        lower = lower_quality(groups, policy.gate)
        feasible = [c for c in feasible if c not in lower]
        tputs = [t for c in feasible if (t := throughput(c, tier)) is not None]
        best = max(tputs) if tputs else None
        out = cls(tier, [], best, lower_quality=[c for c in lower if c.feasible_at(tier)])
        limits = policy.limits.get(tier, ())
        for c in feasible:
            if limits and near_limit(c, tier, limits, groups) is not None:
                out.near_limit.append(c)
            elif holds_users(c, tier) and tier not in policy.slo_tiers:
                out.held.append(c)
            elif best and (throughput(c, tier) or 0.0) < policy.throughput_floor * best:
                out.below_floor.append(c)
            else:
                out.configs.append(c)
        out._drop_queueing(groups)
        return out

    def _drop_queueing(self, groups: Sequence[Config]) -> None:
        """Configs that held more users than the fewest any eligible config held (of those
        whose engine did not preempt, where there are any), unless their P99 TTFT and
        throughput are within the noise of the best of those that held the fewest."""
        held = {c.root.number: users_held(c, self.tier) for c in self.configs}
        if not held or max(held.values()) == 0:
            return
        # A config whose engine preempted put running users back in the queue: it sets no
        # yardstick for seating them while one that did not preempt is there to.
        steady = [c for c in self.configs if not c.preempted(self.tier)] or self.configs
        self.seated_held = min(held[c.root.number] for c in steady)
        seated = [c for c in steady if held[c.root.number] == self.seated_held]
        ttfts = [v for c in seated if (v := ttft(c, self.tier)) is not None]
        tputs = [v for c in seated if (v := throughput(c, self.tier)) is not None]
        self.seated_ttft = min(ttfts, default=None)
        self.seated_throughput = max(tputs, default=None)
        if self.seated_ttft is None or self.seated_throughput is None:
            return  # no figure to judge by (a tier that records neither)
        noise = {o.key: noise_cv(groups, o, self.tier) for o in (P99_TTFT, OUTPUT)}
        self.queued = [
            c
            for c in self.configs
            if held[c.root.number] > self.seated_held and not self._costs_nothing(c, noise)
        ]
        self.configs = [c for c in self.configs if c not in self.queued]

    def _costs_nothing(self, c: Config, noise: dict[str, float | None]) -> bool:
        """Whether held config ``c``'s P99 TTFT and throughput are within the noise of the
        seated configs' best (one launch of theirs assumed: the least sure comparison)."""
        mine_ttft, mine_tput = ttft(c, self.tier), throughput(c, self.tier)
        if mine_ttft is None or mine_tput is None:
            return False
        ttft_slack = _allowed(noise[TTFT], len(c.pooled))
        tput_slack = _allowed(noise[THROUGHPUT], len(c.pooled))
        if ttft_slack is None or tput_slack is None:
            return False  # the noise is unknown until a config is launched twice
        assert self.seated_ttft is not None and self.seated_throughput is not None
        return mine_ttft <= self.seated_ttft * (
            1 + ttft_slack
        ) and mine_tput >= self.seated_throughput * (1 - tput_slack)


def _allowed(cv: float | None, launches: int) -> float | None:
    """The relative difference the noise explains between ``launches`` and one launch."""
    return None if cv is None else QUEUE_Z * cv * (1 / max(launches, 1) + 1) ** 0.5


def lower_quality(groups: Sequence[Config], gate: Gate) -> list[Config]:
    """The configs below the quality floor (none where the gate is off)."""
    if not gate.on:
        return []
    base = next((c for c in groups if c.is_baseline), None)
    return [c for c in groups if config_quality(c, base, gate).below]


def throughput(c: Config, tier: int) -> float | None:
    return c.mean_metrics(tier, (THROUGHPUT,)).get(THROUGHPUT)


def ttft(c: Config, tier: int) -> float | None:
    """The pooled P99 TTFT (ms): queueing shows in the tail of a burst, not its median."""
    return c.mean_metrics(tier, (TTFT,)).get(TTFT)


def users_held(c: Config, tier: int) -> float:
    return c.worst_server(tier, "users_held") or 0.0


def holds_users(c: Config, tier: int) -> bool:
    return users_held(c, tier) > 0
