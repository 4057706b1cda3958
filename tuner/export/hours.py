"""Where a study's engine hours went, as plain data: start-up, warm-up, tiers, confirmations,
failures, and what the kept compile cache did to start-up.

Every second of a launch lands in one part: a launch that measured its tiers (its figures are
the study's, feasible or not) splits into start-up, warm-up, tiers and quality checks (the
probe answers and the space's quality command); a confirmation launch
is all "confirmations"; a launch that broke down (refused, out of memory, crashed, timed out,
an infrastructure fault, interrupted) is all "failures", whatever phase it reached. Seconds are
the engine's clock (``tuner.record.times``): on the simulated engine, the hardware's it stands
for, not the few wall seconds the simulator takes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from optuna.trial import FrozenTrial

from tuner.record.times import TrialTimes
from tuner.record.trial import TrialRecord

# The failure kinds of a launch that measured every tier it was asked to: the study's figures.
MEASURED_KINDS = (None, "slo", "failed_requests", "quality")


@dataclass(frozen=True)
class KeyStartups:
    """The start-ups of one compile key: its first launch, and the mean of the later ones."""

    key: str
    launches: int
    first_s: float
    later_s: float | None


@dataclass(frozen=True)
class CacheEffect:
    """Start-up of the study's first launch against its later ones, overall and per key."""

    first_s: float
    later_s: float | None  # mean of the later launches that got ready
    later_n: int
    keys: list[KeyStartups] = field(default_factory=list)
    compiled: int = 0  # launches whose log said they compiled their graphs
    loaded: int = 0  # ... that read every graph back from the cache

    @property
    def key_first_s(self) -> float | None:
        """Mean start-up of a compile key's first launch."""
        return _mean([k.first_s for k in self.keys])

    @property
    def key_later_s(self) -> float | None:
        """Mean start-up of a compile key's later launches (each launch weighs the same)."""
        repeats = [(k.later_s, k.launches - 1) for k in self.keys if k.later_s is not None]
        n = sum(count for _, count in repeats)
        return sum(mean * count for mean, count in repeats) / n if n else None


@dataclass(frozen=True)
class StudyHours:
    """A study's engine seconds by part (see the module docstring)."""

    simulated: bool  # seconds on the simulated engine's clock
    startup_s: float = 0.0
    warmup_s: float = 0.0
    tiers_s: dict[int, float] = field(default_factory=dict)
    confirmations_s: float = 0.0
    failures_s: float = 0.0
    launches: int = 0
    untimed: int = 0  # launches stored before trials recorded their times
    cache: CacheEffect | None = None
    quality_s: float = 0.0

    def parts(self) -> list[tuple[str, float]]:
        tiers = sum(self.tiers_s.values())
        return [
            ("start-up", self.startup_s),
            ("warm-up", self.warmup_s),
            ("tiers", tiers),
            ("quality checks", self.quality_s),
            ("confirmations", self.confirmations_s),
            ("failures", self.failures_s),
        ]

    @property
    def total_s(self) -> float:
        return sum(s for _, s in self.parts())

    def share(self, seconds: float) -> float:
        return seconds / self.total_s if self.total_s else 0.0


def study_hours(trials: Sequence[FrozenTrial], tiers: Sequence[int], simulated: bool) -> StudyHours:
    """Add up every launch's ``TrialTimes`` into the parts of ``StudyHours``."""
    sums: dict[str, float] = defaultdict(float)
    by_tier = dict.fromkeys(tiers, 0.0)
    timed: list[tuple[int, TrialTimes]] = []
    untimed = 0
    for r in map(TrialRecord.of, trials):
        if r.times is None:
            untimed += int(r.is_measurement)
            continue
        timed.append((r.number, r.times))
        _add(r, r.times, sums, by_tier)
    return StudyHours(
        simulated,
        sums["start-up"],
        sums["warm-up"],
        by_tier,
        sums["confirmations"],
        sums["failures"],
        len(timed),
        untimed,
        cache_effect([t for _, t in sorted(timed, key=lambda nt: nt[0])]),
        sums["quality checks"],
    )


def _add(r: TrialRecord, t: TrialTimes, sums: dict[str, float], by_tier: dict[int, float]) -> None:
    if not r.complete or r.failure_kind not in MEASURED_KINDS:
        sums["failures"] += t.total_s
    elif r.confirm_of is not None:
        sums["confirmations"] += t.total_s
    else:
        sums["start-up"] += t.startup_s or 0.0
        sums["warm-up"] += t.warmup_s or 0.0
        sums["quality checks"] += t.quality_s or 0.0
        for tier, seconds in t.tiers_s.items():
            by_tier[int(tier)] = by_tier.get(int(tier), 0.0) + seconds


def cache_effect(times: Sequence[TrialTimes]) -> CacheEffect | None:
    """First launch against the rest, among launches that got ready, in launch order."""
    ready = [t for t in times if t.ready and t.startup_s is not None]
    if not ready:
        return None
    seconds = [float(t.startup_s or 0.0) for t in ready]
    return CacheEffect(
        first_s=seconds[0],
        later_s=_mean(seconds[1:]),
        later_n=len(seconds) - 1,
        keys=_per_key(ready),
        compiled=sum(t.compile_cached is False for t in ready),
        loaded=sum(t.compile_cached is True for t in ready),
    )


def _per_key(ready: Sequence[TrialTimes]) -> list[KeyStartups]:
    groups: dict[str, list[float]] = defaultdict(list)
    for t in ready:
        if t.compile_key is not None:
            groups[t.compile_key].append(float(t.startup_s or 0.0))
    return [KeyStartups(k, len(s), s[0], _mean(s[1:])) for k, s in groups.items()]


def clock_words(h: StudyHours) -> str:
    """Which clock the seconds are on, in words."""
    if h.simulated:
        return "on the simulated engine's clock: what the hardware would spend"
    return "wall clock"


def startup_words(c: CacheEffect) -> str:
    """The compile cache's effect on start-up in one sentence (``tune show``, the report)."""
    words = f"first launch {span(c.first_s)} to ready"
    if c.later_s is not None:
        words += f", later launches {span(c.later_s)} (mean of {c.later_n})"
    first, later = c.key_first_s, c.key_later_s
    if c.keys and first is not None:
        words += f"; per compile key ({len(c.keys)}): first launch {span(first)}"
        repeats = sum(k.launches - 1 for k in c.keys)
        words += f", repeats {span(later)} ({repeats})" if later is not None else ", no repeats"
    if c.compiled or c.loaded:
        words += f"; the logs: {c.compiled} compiled, {c.loaded} read the cache"
    return words


def span(seconds: float) -> str:
    """A duration as people read one: ``42 s``, ``12.5 min``, ``3.20 h``."""
    if seconds < 10:
        return f"{seconds:.2g} s" if seconds < 1 else f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
